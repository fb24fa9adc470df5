// check_report.js — opens a kldeval HTML report in Debian's headless
// Chromium (through playwright-core) and checks it as a reader would see it:
// every chart drew something, the table numbers equal the database's (from
// `kldeval runs export --jsonl`), the console shows no error, the page makes
// no request besides its own file; saves a full-page screenshot.
// usage: node check_report.js REPORT.html EXPORT.jsonl SCREENSHOT.png
'use strict';
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');
const { chromium } = require('playwright-core');

const [reportPath, exportPath, shotPath] = process.argv.slice(2);
if (!reportPath || !exportPath || !shotPath) {
  console.error('usage: node check_report.js REPORT.html EXPORT.jsonl SCREENSHOT.png');
  process.exit(2);
}
let passed = 0, failed = 0;
const check = (ok, what) => {
  if (ok) passed++;
  else { failed++; console.error('FAIL ' + what); }
};

(async () => {
  const runs = fs.readFileSync(exportPath, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
  const byId = new Map(runs.map((r) => [r.id, r]));
  const url = pathToFileURL(path.resolve(reportPath)).href;
  const browser = await chromium.launch({
    executablePath: process.env.KLD_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync']
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
    const requests = [], blocked = [], problems = [];
    await context.route('**/*', (route) => {
      const u = route.request().url();
      if (u === url) return route.continue();
      blocked.push(u);
      return route.abort();
    });
    const page = await context.newPage();
    page.on('request', (r) => requests.push(r.url()));
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.type() + ': ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    await page.goto(url, { waitUntil: 'load' });
    await page.waitForFunction(() => document.body.dataset.charts !== undefined, null, { timeout: 15000 });

    // every chart rendered: a Chart instance with data, and pixels on its canvas
    const charts = await page.evaluate(() => [...document.querySelectorAll('canvas.kld-chart')].map((c) => {
      const chart = Chart.getChart(c);
      const points = chart ? chart.data.datasets.reduce((n, ds) => n + ds.data.filter((v) => v !== null && v !== undefined).length, 0) : 0;
      const img = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let inked = 0;
      for (let i = 3; i < img.length; i += 4) if (img[i] > 0) inked++;
      return { id: c.id, chart: !!chart, points: points, inked: inked, w: c.width, h: c.height };
    }));
    const drawn = Number(await page.evaluate(() => document.body.dataset.charts));
    check(charts.length === 8, 'eight chart canvases (' + charts.length + ')');
    check(drawn === charts.length, 'every chart constructed (' + drawn + ' of ' + charts.length + ')');
    for (const c of charts) {
      check(c.chart && c.points > 0, c.id + ': a chart with data points (' + c.points + ')');
      check(c.w > 200 && c.h > 100 && c.inked > 2000, c.id + ': drawn on a ' + c.w + 'x' + c.h + ' canvas (' + c.inked + ' inked pixels)');
    }

    // the summary table shows the database's numbers
    const cells = await page.evaluate(() => [...document.querySelectorAll('#summary-table td[data-key]')].map((td) => ({
      run: Number(td.dataset.run), key: td.dataset.key, value: td.dataset.value, seKey: td.dataset.seKey,
      se: td.dataset.se, text: td.textContent })));
    const shown = new Set(cells.map((c) => c.run));
    check(runs.every((r) => shown.has(r.id)) && shown.size === runs.length, 'every exported run has a row (' + shown.size + ' of ' + runs.length + ')');
    let exact = 0, readable = 0, withValue = 0;
    for (const c of cells) {
      const row = byId.get(c.run);
      const want = row ? row[c.key] : undefined;
      if (want === null || want === undefined) {
        check(c.value === undefined, 'run ' + c.run + ' ' + c.key + ': empty in the database, empty on the page');
        continue;
      }
      withValue++;
      if (Number(c.value) === want) exact++;
      else console.error('run ' + c.run + ' ' + c.key + ': page ' + c.value + ', database ' + want);
      if (c.seKey) check(Number(c.se) === row[c.seKey], 'run ' + c.run + ' ' + c.seKey + ': page ' + c.se + ', database ' + row[c.seKey]);
      // the visible text rounds the same value
      const m = c.key === 'arm_bytes' ? null : c.text.match(/^[-+]?[0-9.]+(e[-+]?[0-9]+)?/i);
      if (c.key === 'arm_bytes') readable++;
      else if (m && Math.abs(Number(m[0]) - want) <= 1e-4 * Math.abs(want)) readable++;
      else console.error('run ' + c.run + ' ' + c.key + ': text "' + c.text + '" vs ' + want);
    }
    check(withValue > 30 && exact === withValue, 'table values equal the database (' + exact + ' of ' + withValue + ')');
    check(readable === withValue, 'table text shows those values (' + readable + ' of ' + withValue + ')');

    // the comparison table: one row per pair; paired ΔKLD agrees with the means
    const pairs = await page.evaluate(() => [...document.querySelectorAll('#compare-table tr[data-pair]')].map((tr) => {
      const d = tr.querySelector('[data-key="d_kld"]'), u = tr.querySelector('[data-key="u_kld"]');
      return { pair: tr.dataset.pair, d: d ? Number(d.dataset.value) : null, u: u ? Number(u.dataset.value) : null };
    }));
    check(pairs.length === runs.length * (runs.length - 1) / 2, 'one comparison per pair (' + pairs.length + ')');
    let paired = 0;
    for (const p of pairs) {
      const [a, b] = p.pair.split('-').map(Number);
      const diff = byId.get(a).kld_mean - byId.get(b).kld_mean;
      const v = p.d !== null ? p.d : p.u;
      if (p.d !== null) paired++;
      check(v !== null && Math.abs(v - diff) <= 1e-5 * Math.abs(diff) + 1e-12, 'pair ' + p.pair + ': ΔKLD ' + v + ' vs ' + diff);
    }
    check(paired > 0 && paired < pairs.length, 'paired and unpaired comparisons present (' + paired + ' paired)');

    check(problems.length === 0, 'no console errors or warnings: ' + problems.join(' | '));
    check(blocked.length === 0, 'no network request: ' + blocked.join(', '));
    check(requests.length === 1 && requests[0] === url, 'one request, the file itself: ' + requests.join(', '));

    await page.screenshot({ path: shotPath, fullPage: true });
    await page.screenshot({ path: shotPath.replace(/\.png$/, '-top.png') }); // the first screen, for a quick look
    check(fs.statSync(shotPath).size > 10000, 'screenshot saved to ' + shotPath);
  } finally {
    await browser.close();
  }
  console.log(passed + ' passed, ' + failed + ' failed');
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(1); });
