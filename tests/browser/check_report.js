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
    // a sweep of KV caches adds the quality-vs-bits chart
    const kvArm = (r) => (r.report && r.report.config && r.report.config.arm) || {};
    const kvSweep = runs.length > 1 && runs.every((r) => r.mode === 'sweep') &&
      runs.some((r) => kvArm(r).kv_types && kvArm(r).kv_types !== 'f32');
    // each diff run (report.diff) adds its SQNR-per-layer chart
    const diffRuns = runs.filter((r) => r.report && r.report.diff && Array.isArray(r.report.diff.layers));
    const wantCharts = (runs.length ? 8 : 0) + (kvSweep ? 1 : 0) + (capRuns.length ? 1 : 0) + diffRuns.length;
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
    check(withValue >= Math.min(30, 7 * runs.length) && exact === withValue, 'table values equal the database (' + exact + ' of ' + withValue + ')');
    check(readable === withValue, 'table text shows those values (' + readable + ' of ' + withValue + ')');

    // the bootstrap intervals: every cell with data-ci-lo/hi shows the report's ci95 ("value [lo, hi]"),
    // in the summary table and the intervals table; runs whose report has none show no interval
    const ciPath = { kld_mean: ['kld', 'ci95', 'mean'], kld_median: ['kld', 'ci95', 'median'], kld_p90: ['kld', 'ci95', 'p90'],
      kld_p95: ['kld', 'ci95', 'p95'], kld_p99: ['kld', 'ci95', 'p99'], kld_p99_9: ['kld', 'ci95', 'p99_9'],
      top1_agreement: ['top1_agreement_ci95'], ppl_ratio: ['ppl_ratio_ci95'] };
    const ciOf = (row, key) => ciPath[key] && row && row.report ? ciPath[key].reduce((o, k) => (o ? o[k] : undefined), row.report) : undefined;
    const ciCells = await page.evaluate(() => [...document.querySelectorAll('#summary-table td[data-key], #ci-table td[data-key]')].map((td) => ({
      table: td.closest('table').id, run: Number(td.dataset.run), key: td.dataset.key, lo: td.dataset.ciLo, hi: td.dataset.ciHi,
      text: td.textContent })));
    let ciWant = 0, ciOk = 0;
    for (const c of ciCells) {
      const want = ciOf(byId.get(c.run), c.key);
      if (!Array.isArray(want) || want[0] === null) {
        check(c.lo === undefined && !/\[/.test(c.text), c.table + ' run ' + c.run + ' ' + c.key + ': no interval in the report, none on the page');
        continue;
      }
      ciWant++;
      const m = c.text.match(/\[([-+0-9.e]+), ([-+0-9.e]+)\]/i);
      const near = (a, b) => Math.abs(a - b) <= 1e-3 * Math.abs(b) + 1e-12;
      if (Number(c.lo) === want[0] && Number(c.hi) === want[1] && m && near(Number(m[1]), want[0]) && near(Number(m[2]), want[1]) &&
          want[0] <= want[1]) ciOk++;
      else console.error(c.table + ' run ' + c.run + ' ' + c.key + ': page [' + c.lo + ', ' + c.hi + '] "' + c.text + '", report ' + JSON.stringify(want));
    }
    const withCi = runs.filter((r) => r.report && r.report.bootstrap).length;
    check(ciOk === ciWant && ciWant === withCi * 14, 'bootstrap intervals shown as value [lo, hi] at the report\'s ci95 (' + ciOk +
      ' of ' + ciWant + ', ' + withCi * 14 + ' expected)');
    // the charts draw those intervals as error bars
    const bars = await page.evaluate(() => {
      const get = (id) => { const ch = Chart.getChart(document.getElementById(id)); return ch ? ch.data.datasets[0].intervals : null; };
      return { top1: get('chart-top1'), ppl: get('chart-ppl') };
    });
    let barOk = 0, barWant = 0;
    runs.forEach((r, i) => {
      for (const [name, key] of [['top1', 'top1_agreement_ci95'], ['ppl', 'ppl_ratio_ci95']]) {
        const want = r.report ? r.report[key] : undefined, got = bars[name] ? bars[name][i] : undefined;
        if (!Array.isArray(want)) { if (got === null || got === undefined) barOk++; barWant++; continue; }
        barWant++;
        if (got && Math.abs(got[0] - want[0]) <= 1e-9 * Math.abs(want[0]) && Math.abs(got[1] - want[1]) <= 1e-9 * Math.abs(want[1])) barOk++;
        else console.error('chart-' + name + ' run ' + r.id + ': error bar ' + JSON.stringify(got) + ' vs ' + JSON.stringify(want));
      }
    });
    check(barOk === barWant, 'chart-top1 and chart-ppl: error bars at the bootstrap intervals where the run has them (' + barOk + ' of ' + barWant + ')');

    // the comparison table: one row per pair; paired ΔKLD agrees with the means
    const pairs = await page.evaluate(() => [...document.querySelectorAll('#compare-table tr[data-pair]')].map((tr) => {
      const d = tr.querySelector('[data-key="d_kld"]'), u = tr.querySelector('[data-key="u_kld"]');
      const bd = tr.querySelector('[data-key="boot_d_kld"]'), bp = tr.querySelector('[data-key="boot_p"]');
      const v = tr.querySelector('[data-key="verdict"]');
      return { pair: tr.dataset.pair, d: d ? Number(d.dataset.value) : null, u: u ? Number(u.dataset.value) : null,
        boot: bd ? { diff: Number(bd.dataset.value), lo: Number(bd.dataset.ciLo), hi: Number(bd.dataset.ciHi), p: Number(bp.dataset.value) } : null,
        word: v ? v.dataset.word : null, verdict: v ? v.textContent : null };
    }));
    check(pairs.length === runs.length * (runs.length - 1) / 2, 'one comparison per pair (' + pairs.length + ')');
    let paired = 0;
    for (const p of pairs) {
      const [a, b] = p.pair.split('-').map(Number);
      const diff = byId.get(a).kld_mean - byId.get(b).kld_mean;
      const v = p.d !== null ? p.d : p.u;
      if (p.d !== null) paired++;
      check(v !== null && Math.abs(v - diff) <= 1e-5 * Math.abs(diff) + 1e-12, 'pair ' + p.pair + ': ΔKLD ' + v + ' vs ' + diff);
      if (p.d === null) {
        check(p.boot === null && p.word === null, 'pair ' + p.pair + ': unpaired, no bootstrap or verdict');
        continue;
      }
      // the paired bootstrap: the same difference, an interval around it, a p in (0, 1], a verdict that follows the interval
      check(p.boot !== null && Math.abs(p.boot.diff - p.d) <= 1e-6 * Math.abs(p.d) + 1e-12 && p.boot.lo <= p.boot.hi &&
        p.boot.p > 0 && p.boot.p <= 1, 'pair ' + p.pair + ': paired bootstrap ' + JSON.stringify(p.boot) + ' around ΔKLD ' + p.d);
      const word = p.boot.lo > 0 ? 'B' : p.boot.hi < 0 ? 'A' : 'n.d.';
      const [ida, idb] = p.pair.split('-');
      const said = word === 'n.d.' ? /^not distinguishable on \d+ positions/.test(p.verdict)
        : p.verdict.startsWith('run ' + (word === 'A' ? ida : idb) + ' is closer to the reference');
      check(p.word === word && said, 'pair ' + p.pair + ': verdict ' + p.word + ' "' + p.verdict + '" follows [' + p.boot.lo + ', ' + p.boot.hi + ']');
    }
    if (runs.length > 1 && runs.every((r) => r.mode === 'sweep'))
      check(paired === pairs.length, 'a sweep\'s arms share the teacher: every comparison paired (' + paired + ')');
    else if (runs.length > 1 && !runs.every((r) => r.mode === 'diff')) check(paired > 0 && paired < pairs.length, 'paired and unpaired comparisons present (' + paired + ' paired)');

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

    if (kvSweep) {
      // the KV chart: every arm with a positive mean KLD at (kv_bytes_per_token·8 / kv_values_per_token,
      // kld_mean) in its family's series: llama.cpp block types, MLX groups, the rotated quantizer
      const kv = await page.evaluate(() => {
        const chart = Chart.getChart(document.getElementById('chart-kvbits'));
        return chart ? chart.data.datasets.map((d, i) => ({ family: d.kvFamily, runs: d.kvRuns, data: d.data, errors: d.errors,
          drawn: chart.getDatasetMeta(i).data.filter((el) => isFinite(el.x) && isFinite(el.y)).length })) : null;
      });
      check(kv !== null, 'chart-kvbits exists');
      const family = (t) => /mlx/.test(t) ? (/rot|q\d|f16|bf16/.test(t) ? 'mixed' : 'mlx') : /rot/.test(t) ? (/q\d|f16|bf16/.test(t) ? 'mixed' : 'rot') : 'llama.cpp';
      const want = runs.filter((r) => r.kld_mean > 0 && kvArm(r).kv_types && kvArm(r).kv_types !== 'f32');
      let placed = 0;
      for (const r of want) {
        const a = kvArm(r), bits = a.kv_bytes_per_token * 8 / a.kv_values_per_token;
        const set = (kv || []).find((d) => d.runs.includes(r.id));
        const k = set ? set.runs.indexOf(r.id) : -1;
        const ok = set && set.family === family(a.kv_types) && Math.abs(set.data[k].x - bits) <= 1e-9 * bits &&
          Math.abs(set.data[k].y - r.kld_mean) <= 1e-9 * r.kld_mean && Math.abs(set.errors[k] - r.kld_se) <= 1e-9 * r.kld_se;
        if (ok) placed++;
        else console.error('chart-kvbits run ' + r.id + ' ' + a.kv_types + ': ' + JSON.stringify(set && set.data[k]) +
          ' in ' + (set && set.family) + ' vs ' + bits + ', ' + r.kld_mean + ' in ' + family(a.kv_types));
      }
      check(want.length >= 3 && placed === want.length, 'chart-kvbits: each arm at its bits per value and KLD in its family (' +
        placed + ' of ' + want.length + ')');
      const fams = new Set((kv || []).map((d) => d.family));
      check(fams.has('llama.cpp') && fams.has('mlx') && fams.has('rot'), 'chart-kvbits: llama.cpp, MLX and rotated series on one chart (' +
        [...fams].join(', ') + ')');
      check((kv || []).every((d) => d.drawn === d.data.length), 'chart-kvbits: every point drawn');
      const kvCanvas = charts.find((c) => c.id === 'chart-kvbits');
      check(kvCanvas && kvCanvas.inked > 2000, 'chart-kvbits drawn (' + (kvCanvas ? kvCanvas.inked : 0) + ' inked pixels)');
    }

    for (const r of diffRuns) {
      // a diff run: the SQNR chart has one line per site at report.diff's sqnr_db (the chart data keeps 10
      // significant digits), +inf on the top edge
      // (flagged, never NaN); the layer table and the heat map cells equal report.diff at their data-key
      const d = r.report.diff;
      const got = await page.evaluate((id) => {
        const chart = Chart.getChart(document.getElementById('chart-diff-' + id));
        if (!chart) return null;
        return { max: chart.scales.y.max, sets: chart.data.datasets.map((ds, i) => ({ site: ds.kldSite, run: ds.kldRun,
          data: ds.data, inf: ds.kldInf, drawn: chart.getDatasetMeta(i).data.filter((el) => isFinite(el.x) && isFinite(el.y)).length })) };
      }, r.id);
      check(got !== null && got.sets.length === 3, 'chart-diff-' + r.id + ': one line per site (' + (got ? got.sets.length : 0) + ')');
      let ok = 0, infs = 0, nan = 0;
      for (const e of d.layers) {
        const set = got ? got.sets.find((s) => s.site === e.site && s.run === r.id) : null;
        const v = set ? set.data[e.layer] : undefined;
        if (typeof v === 'number' && Number.isNaN(v)) nan++;
        if (e.sqnr_inf) {
          infs++;
          if (set && set.inf[e.layer] === true && v === got.max) ok++;
          else console.error('chart-diff-' + r.id + ' layer ' + e.layer + ' ' + e.site + ': +inf drawn at ' + v + ' (top ' + (got && got.max) + ')');
        } else if (set && set.inf[e.layer] === false && typeof v === 'number' && Math.abs(v - e.sqnr_db) <= 1e-9 * Math.abs(e.sqnr_db)) ok++;
        else console.error('chart-diff-' + r.id + ' layer ' + e.layer + ' ' + e.site + ': ' + v + ' vs ' + e.sqnr_db);
      }
      check(d.layers.length === 3 * d.n_layer && ok === d.layers.length && nan === 0,
        'chart-diff-' + r.id + ': every layer and site at report.diff\'s SQNR, ' + infs + ' +inf on the top edge (' + ok + ' of ' + d.layers.length + ')');
      check(got && got.sets.every((s) => s.drawn === d.n_layer), 'chart-diff-' + r.id + ': every point drawn');
      const at = (key) => key.split('.').reduce((o, k) => (o === null || o === undefined ? o : o[k]), d);
      const cells = await page.evaluate((id) => [...document.querySelectorAll('#diff-table-' + id + ' td[data-key], #diff-heat-' + id +
        ' td[data-key]')].map((td) => ({ table: td.closest('table').id, key: td.dataset.key, value: td.dataset.value, inf: td.dataset.inf,
        text: td.textContent })), r.id);
      let cellOk = 0, heat = 0;
      for (const c of cells) {
        const want = at(c.key), e = /sqnr_db$/.test(c.key) ? at(c.key.replace(/sqnr_db$/, 'sqnr_inf')) : false;
        if (c.table.startsWith('diff-heat')) heat++;
        const good = e === true ? c.value === undefined && c.inf === '1' && c.text === '+inf'
          : typeof want === 'number' && Number(c.value) === want && Math.abs(parseFloat(c.text) - want) <= 1e-3 * Math.abs(want);
        if (good) cellOk++;
        else console.error(c.table + ' ' + c.key + ': page ' + c.value + ' "' + c.text + '", report ' + want);
      }
      check(cellOk === cells.length && cells.length === 4 * d.n_layer + heat, 'diff tables of run ' + r.id + ' equal report.diff (' +
        cellOk + ' of ' + cells.length + ')');
      const nMat = Array.isArray(d.matrices) ? d.matrices.length : 0;
      check(heat === nMat, 'heat map of run ' + r.id + ': a cell per matrix (' + heat + ' of ' + nMat + ')');
      const worst = await page.evaluate((id) => [...document.querySelectorAll('#diff-table-' + id + ' tr.worst')].map((tr) => Number(tr.dataset.layer)), r.id);
      check(d.worst_layer === null ? worst.length === 0 : worst.length === 1 && worst[0] === d.worst_layer,
        'run ' + r.id + ': the worst layer flagged (' + JSON.stringify(worst) + ', report ' + d.worst_layer + ')');
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
