// check_report.js — opens a kldeval HTML report in Debian's headless
// Chromium (through playwright-core) and checks it as a reader would see it:
// every chart drew something, the table numbers equal the database's (from
// `kldeval runs export --jsonl`), the capability section's table and grouped
// bar chart equal the database's cap_results (when capability runs are
// exported), the console shows no error, the page makes no request besides
// its own file; saves a full-page screenshot.
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
  const exported = fs.readFileSync(exportPath, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
  const byId = new Map(exported.map((r) => [r.id, r]));
  // KL runs fill the summary, the eight KLD charts and the comparisons; capability runs the capability section
  const runs = exported.filter((r) => r.cap_results === null || r.cap_results === undefined);
  const capRuns = exported.filter((r) => r.cap_results !== null && r.cap_results !== undefined);
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
    const wantCharts = (runs.length ? 8 : 0) + (capRuns.length ? 1 : 0);
    check(charts.length === wantCharts, wantCharts + ' chart canvases (' + charts.length + ')');
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
    if (runs.length > 1 && runs.every((r) => r.mode === 'sweep'))
      check(paired === pairs.length, 'a sweep\'s arms share the teacher: every comparison paired (' + paired + ')');
    else if (runs.length > 1) check(paired > 0 && paired < pairs.length, 'paired and unpaired comparisons present (' + paired + ' paired)');

    if (capRuns.length) {
      // the capability table: every cell's value (and se) is the database's, at the path its data-key names
      const at = (row, key) => key.split('.').reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), row);
      const capCells = await page.evaluate(() => [...document.querySelectorAll('#cap-table td[data-key]')].map((td) => ({
        run: Number(td.dataset.run), key: td.dataset.key, value: td.dataset.value, seKey: td.dataset.seKey,
        se: td.dataset.se, text: td.textContent })));
      const capShown = new Set(capCells.map((c) => c.run));
      check(capRuns.every((r) => capShown.has(r.id)) && capShown.size === capRuns.length,
        'every capability run has rows in the capability table (' + capShown.size + ' of ' + capRuns.length + ')');
      let capExact = 0, capText = 0, capValues = 0;
      for (const c of capCells) {
        const want = at(byId.get(c.run), c.key);
        if (want === null || want === undefined) {
          check(c.value === undefined, 'run ' + c.run + ' ' + c.key + ': empty in the database, empty on the page');
          continue;
        }
        capValues++;
        if (Number(c.value) === want) capExact++;
        else console.error('run ' + c.run + ' ' + c.key + ': page ' + c.value + ', database ' + want);
        if (c.seKey) check(Number(c.se) === at(byId.get(c.run), c.seKey), 'run ' + c.run + ' ' + c.seKey + ': page ' + c.se);
        const m = c.text.match(/^[-+]?[0-9.]+/);
        if (m && Math.abs(Number(m[0]) - want) <= 5e-5 + 1e-12) capText++;
        else console.error('run ' + c.run + ' ' + c.key + ': text "' + c.text + '" vs ' + want);
      }
      const wantCells = capRuns.reduce((n, r) => n + Object.keys(r.cap_results).reduce((m, t) =>
        m + ['ref', 'arm', 'paired'].filter((s) => r.cap_results[t][s]).length, 0) + (r.cap_score_arm === null ? 1 : 3), 0);
      check(capValues === wantCells && capExact === capValues,
        'capability table values equal the database (' + capExact + ' of ' + capValues + ', ' + wantCells + ' expected)');
      check(capText === capValues, 'capability table text shows those values (' + capText + ' of ' + capValues + ')');

      // the grouped bar chart: one bar per model per task, heights and error bars from the database
      const bars = await page.evaluate(() => {
        const chart = Chart.getChart(document.getElementById('chart-cap'));
        return chart ? { labels: chart.data.labels, sets: chart.data.datasets.map((d) => ({ run: d.kldRun, side: d.kldSide,
          data: d.data, errors: d.errors, drawn: chart.getDatasetMeta(chart.data.datasets.indexOf(d)).data.length })) } : null;
      });
      const wantSets = capRuns.reduce((n, r) => n + (r.cap_score_arm === null ? 1 : 2), 0);
      check(bars && bars.sets.length === wantSets, 'chart-cap: one dataset per model (' + (bars ? bars.sets.length : 0) + ' of ' + wantSets + ')');
      let barsOk = 0, barsAll = 0;
      for (const set of bars ? bars.sets : []) {
        const row = byId.get(set.run);
        check(set.drawn === bars.labels.length, 'chart-cap: run ' + set.run + ' ' + set.side + ' has a bar per task');
        bars.labels.forEach((task, k) => {
          const t = row.cap_results[task];
          const acc = t && t[set.side] ? t[set.side].accuracy : null;
          const se = !t ? null : set.side === 'arm' ? (t.paired ? t.paired.stderr : null) : (t.ref ? t.ref.stderr : null);
          barsAll++;
          // the chart data is written with 10 significant digits
          const near = (a, b) => (a === null && b === null) || (a !== null && b !== null && Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)));
          if (near(set.data[k], acc) && near(set.errors[k], se)) barsOk++;
          else console.error('chart-cap run ' + set.run + ' ' + set.side + ' ' + task + ': bar ' + set.data[k] + ' ± ' +
            set.errors[k] + ', database ' + acc + ' ± ' + se);
        });
      }
      check(barsAll > 0 && barsOk === barsAll, 'chart-cap: bars and error bars equal the database (' + barsOk + ' of ' + barsAll + ')');
      const capCanvas = charts.find((c) => c.id === 'chart-cap');
      check(capCanvas && capCanvas.inked > 2000, 'chart-cap drawn (' + (capCanvas ? capCanvas.inked : 0) + ' inked pixels)');
    }

    if (runs.length && runs.every((r) => r.mode === 'sweep')) {
      // a sweep's report: the ranked chart names the groups, lowest mean KLD first, at the database's values
      const rank = await page.evaluate(() => {
        const c = document.getElementById('chart-rank'), chart = Chart.getChart(c);
        return { title: c.closest('figure').querySelector('h3').textContent, labels: chart.data.labels,
                 values: chart.data.datasets[0].data };
      });
      check(/sweep's groups ranked/.test(rank.title), 'the sweep report titles its ranked group chart: ' + rank.title);
      const want = [...runs].sort((a, b) => a.kld_mean - b.kld_mean);
      check(rank.labels.length === want.length, 'chart-rank: one bar per arm (' + rank.labels.length + ')');
      let ok = 0;
      want.forEach((r, k) => {
        if (rank.labels[k] && rank.labels[k].endsWith(r.label) && Math.abs(rank.values[k] - r.kld_mean) <= 1e-9 * r.kld_mean) ok++;
        else console.error('chart-rank bar ' + k + ': ' + rank.labels[k] + ' ' + rank.values[k] + ' vs ' + r.label + ' ' + r.kld_mean);
      });
      check(ok === want.length, 'chart-rank: groups in ranked order at the database\'s KLD (' + ok + ' of ' + want.length + ')');
    }

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
