/* report_html.js — draws the HTML report's charts with Chart.js (inlined
 * before this script) from the JSON object in #kld-data. Sets
 * document.body.dataset.charts to the number of charts drawn; a chart that
 * fails is reported on the console. */
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('kld-data').textContent);
  const runs = data.runs;
  const palette = ['#2f6fb3', '#d1495b', '#2e9e6b', '#e08e0b', '#7a5195', '#00a3b4', '#8c6d31', '#5c6770'];
  const color = (i) => palette[i % palette.length];
  const fade = (c) => c + '33';

  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif';
  Chart.defaults.font.size = 12;
  Chart.defaults.color = '#3b4046';
  Chart.defaults.plugins.legend.labels.boxWidth = 12;
  Chart.defaults.plugins.legend.labels.boxHeight = 12;

  const fmt = (v) => {
    if (v === 0) return '0';
    const a = Math.abs(v);
    return a >= 1e4 || a < 1e-3 ? v.toExponential(0) : String(+v.toPrecision(3));
  };
  /* log axes: label the decades only */
  const decades = (v) => {
    const l = Math.log10(v);
    return Math.abs(l - Math.round(l)) < 1e-6 ? fmt(v) : '';
  };

  /* error bars along the value axis: dataset.intervals[i] = [lo, hi] (a 95%
   * bootstrap interval) where given, else ± dataset.errors[i] (one standard
   * error) */
  const errorBars = {
    id: 'kldErrorBars',
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      const horizontal = chart.options.indexAxis === 'y';
      chart.data.datasets.forEach((ds, di) => {
        if ((!ds.errors && !ds.intervals) || !chart.isDatasetVisible(di)) return;
        const meta = chart.getDatasetMeta(di);
        const scale = chart.scales[horizontal ? meta.xAxisID : meta.yAxisID];
        ctx.save();
        ctx.strokeStyle = ds.errorColor || '#222';
        ctx.lineWidth = 1.4;
        meta.data.forEach((el, i) => {
          const raw = ds.data[i], e = ds.errors ? ds.errors[i] : null, iv = ds.intervals ? ds.intervals[i] : null;
          const v = raw !== null && typeof raw === 'object' ? (horizontal ? raw.x : raw.y) : raw;
          if (v === null || v === undefined) return;
          let lo, hi;
          if (iv && isFinite(iv[0]) && isFinite(iv[1])) { lo = iv[0]; hi = iv[1]; }
          else if (e !== null && e !== undefined && isFinite(e) && e > 0) { lo = v - e; hi = v + e; }
          else return;
          if (scale.type === 'logarithmic' && lo <= 0) lo = scale.min;
          const p1 = scale.getPixelForValue(lo), p2 = scale.getPixelForValue(hi);
          const c = horizontal ? el.y : el.x, w = 4;
          ctx.beginPath();
          if (horizontal) {
            ctx.moveTo(p1, c); ctx.lineTo(p2, c);
            ctx.moveTo(p1, c - w); ctx.lineTo(p1, c + w); ctx.moveTo(p2, c - w); ctx.lineTo(p2, c + w);
          } else {
            ctx.moveTo(c, p1); ctx.lineTo(c, p2);
            ctx.moveTo(c - w, p1); ctx.lineTo(c + w, p1); ctx.moveTo(c - w, p2); ctx.lineTo(c + w, p2);
          }
          ctx.stroke();
        });
        ctx.restore();
      });
    }
  };

  /* the dataset's label (or its pointNames[i]) beside each point */
  const pointLabels = {
    id: 'kldPointLabels',
    afterDatasetsDraw(chart, args, opts) {
      if (!opts || !opts.enabled) return;
      const ctx = chart.ctx;
      ctx.save();
      ctx.font = '11px ' + Chart.defaults.font.family;
      ctx.fillStyle = '#3b4046';
      ctx.textBaseline = 'middle';
      chart.data.datasets.forEach((ds, di) => {
        chart.getDatasetMeta(di).data.forEach((el, i) => {
          const text = ds.pointNames ? ds.pointNames[i] : ds.label;
          const right = el.x + 8 + ctx.measureText(text).width < chart.chartArea.right;
          ctx.textAlign = right ? 'left' : 'right';
          ctx.fillText(text, el.x + (right ? 8 : -8), el.y - 8);
        });
      });
      ctx.restore();
    }
  };
  Chart.register(errorBars, pointLabels);

  const axisTitle = (text) => ({ display: true, text: text });
  const logAxis = (title) => ({ type: 'logarithmic', title: axisTitle(title), ticks: { callback: decades, autoSkip: false, maxRotation: 0 } });
  const charts = [];
  const draw = (id, config) => {
    if (!document.getElementById(id)) return; /* a section the page does not have */
    try {
      charts.push(new Chart(document.getElementById(id), config));
    } catch (e) {
      console.error('kldeval report: chart ' + id + ': ' + e);
    }
  };

  const lineSet = (r, i, points, extra) => Object.assign({
    label: r.name, data: points, borderColor: color(i), backgroundColor: fade(color(i)),
    borderWidth: 2, pointRadius: 0, tension: 0.15
  }, extra || {});

  draw('chart-hist', {
    type: 'line',
    data: { datasets: runs.filter((r) => r.hist).map((r) => lineSet(r, runs.indexOf(r),
      data.hist_centers.map((x, k) => ({ x: x, y: r.hist[k] })), { fill: false })) },
    options: { parsing: false, scales: { x: logAxis('KLD (nats, log scale)'), y: { title: axisTitle('share of positions'), beginAtZero: true } } }
  });

  draw('chart-cdf', {
    type: 'line',
    data: { datasets: runs.map((r, i) => lineSet(r, i, r.cdf_x.map((x, k) => ({ x: x, y: r.cdf_y[k] })),
      r.cdf_from === 'percentiles' ? { borderDash: [5, 4], pointRadius: 2 } : {})) },
    options: { parsing: false, scales: { x: logAxis('KLD (nats, log scale)'), y: { min: 0, max: 1, title: axisTitle('share of positions ≤ x') } } }
  });

  /* buckets: the union of every run's buckets, by their lower edge */
  const bucketChart = (id, key, label) => {
    const edges = new Map();
    runs.forEach((r) => (r[key] || []).forEach((b) => edges.set(b.lo, b.hi)));
    const los = [...edges.keys()].sort((a, b) => a - b);
    draw(id, {
      type: 'line',
      data: {
        labels: los.map((lo) => label(lo, edges.get(lo))),
        datasets: runs.map((r, i) => {
          const by = new Map((r[key] || []).map((b) => [b.lo, b]));
          return lineSet(r, i, los.map((lo) => (by.has(lo) ? by.get(lo).kld_mean : null)), {
            errors: los.map((lo) => (by.has(lo) ? by.get(lo).kld_se : null)), errorColor: color(i),
            pointRadius: 3, spanGaps: true
          });
        })
      },
      options: { scales: { y: { beginAtZero: true, title: axisTitle('mean KLD (nats)') } } }
    });
  };
  bucketChart('chart-pos', 'by_pos', (lo, hi) => lo + '–' + (hi - 1));
  bucketChart('chart-conf', 'by_conf', (lo, hi) => lo.toFixed(1) + '–' + hi.toFixed(1));

  /* a run's 95% bootstrap interval of key (kld_mean_ci …), or null */
  const ci = (r, key) => (r[key + '_ci'] ? r[key + '_ci'] : null);
  const barChart = (id, key, seKey, title, extra) => {
    const values = runs.map((r) => r[key]);
    const errors = runs.map((r) => r[seKey]);
    const intervals = runs.map((r) => ci(r, key));
    const finite = values.map((v, i) => [v, errors[i] || 0, intervals[i]]).filter((p) => p[0] !== null);
    const lo = Math.min(...finite.map((p) => Math.min(p[0] - 2 * p[1], p[2] ? p[2][0] : Infinity)));
    const hi = Math.max(...finite.map((p) => Math.max(p[0] + 2 * p[1], p[2] ? p[2][1] : -Infinity)));
    const pad = (hi - lo) * 0.25 || Math.abs(hi) * 0.01 || 0.01;
    draw(id, {
      type: 'bar',
      data: { labels: runs.map((r) => r.name.split(' ')), datasets: [{ label: title, data: values, errors: errors, intervals: intervals,
        backgroundColor: runs.map((r, i) => fade(color(i))), borderColor: runs.map((r, i) => color(i)), borderWidth: 1.5 }] },
      options: Object.assign({ plugins: { legend: { display: false } },
        scales: { x: { ticks: { maxRotation: 0, autoSkip: false } }, y: {
          suggestedMin: extra.floor !== undefined ? Math.max(extra.floor, lo - pad) : lo - pad,
          suggestedMax: extra.ceil !== undefined ? Math.min(extra.ceil, hi + pad) : hi + pad,
          max: extra.ceil !== undefined && hi + pad >= extra.ceil ? extra.ceil : undefined,
          title: axisTitle(title) } } }, {})
    });
  };
  barChart('chart-top1', 'top1', 'top1_se', 'top-1 agreement', { floor: 0, ceil: 1 });
  barChart('chart-ppl', 'ppl_ratio', 'ppl_ratio_se', 'PPL(arm) / PPL(ref)', {});

  const MiB = 1024 * 1024;
  const kldLo = Math.min(...runs.map((r) => (r.kld_mean_ci ? r.kld_mean_ci[0] : r.kld_mean - (r.kld_se || 0))).filter((v) => v > 0));
  const kldHi = Math.max(...runs.map((r) => (r.kld_mean_ci ? r.kld_mean_ci[1] : r.kld_mean + (r.kld_se || 0))));
  draw('chart-size', {
    type: 'scatter',
    data: { datasets: runs.map((r, i) => ({ label: r.name, data: r.bytes === null ? [] : [{ x: r.bytes / MiB, y: r.kld_mean }],
      errors: [r.kld_se], intervals: [ci(r, 'kld_mean')], errorColor: color(i), backgroundColor: color(i), borderColor: color(i), pointRadius: 5 })) },
    options: { plugins: { kldPointLabels: { enabled: true }, legend: { display: false } },
      scales: { x: { title: axisTitle('arm file size (MiB)'), grace: '10%' },
        y: Object.assign(logAxis('mean KLD (nats, log scale)'), { min: kldLo / 2, max: kldHi * 2 }) } }
  });

  const ranked = runs.map((r, i) => ({ r: r, i: i })).sort((a, b) => a.r.kld_mean - b.r.kld_mean);
  draw('chart-rank', {
    type: 'bar',
    data: { labels: ranked.map((e) => e.r.name), datasets: [{ label: 'mean KLD', data: ranked.map((e) => e.r.kld_mean),
      errors: ranked.map((e) => e.r.kld_se), intervals: ranked.map((e) => ci(e.r, 'kld_mean')), backgroundColor: ranked.map((e) => fade(color(e.i))),
      borderColor: ranked.map((e) => color(e.i)), borderWidth: 1.5 }] },
    options: { indexAxis: 'y', plugins: { legend: { display: false } },
      scales: { x: { beginAtZero: true, suggestedMax: kldHi * 1.05, title: axisTitle('mean KLD (nats)') } } }
  });

  /* the KV cache sweep: mean KLD against bits per cached value, one series
   * per scheme family (kvFamily names it for the browser test); arms with
   * a mean KLD of 0 have no place on the log axis */
  const families = ['llama.cpp', 'mlx', 'rot', 'mixed', 'f32'];
  const familyName = { 'llama.cpp': "llama.cpp block types", mlx: 'MLX affine groups', rot: 'rotated (TurboQuant-style)',
    mixed: 'mixed schemes', f32: 'f32' };
  const kvRuns = runs.filter((r) => r.kv_bits !== undefined && r.kld_mean > 0);
  const kvSets = families.map((fam, fi) => {
    const rs = kvRuns.filter((r) => r.kv_family === fam).sort((a, b) => a.kv_bits - b.kv_bits);
    return { label: familyName[fam], kvFamily: fam, kvRuns: rs.map((r) => r.id), pointNames: rs.map((r) => r.kv_types),
      data: rs.map((r) => ({ x: r.kv_bits, y: r.kld_mean })), errors: rs.map((r) => r.kld_se),
      intervals: rs.map((r) => ci(r, 'kld_mean')), errorColor: color(fi),
      backgroundColor: color(fi), borderColor: color(fi), pointRadius: 5, showLine: true, borderWidth: 1.5 };
  }).filter((ds) => ds.data.length);
  if (kvSets.length) {
    const kvLo = Math.min(...kvRuns.map((r) => r.kld_mean));
    const kvHi = Math.max(...kvRuns.map((r) => (r.kld_mean_ci ? r.kld_mean_ci[1] : r.kld_mean + (r.kld_se || 0))));
    draw('chart-kvbits', {
      type: 'scatter',
      data: { datasets: kvSets },
      options: { parsing: false, plugins: { kldPointLabels: { enabled: true } },
        scales: { x: { title: axisTitle('bits per cached value'), grace: '8%' },
          y: Object.assign(logAxis('mean KLD (nats, log scale)'), { min: kvLo / 3, max: kvHi * 3 }) } }
    });
  }

  /* capability runs: accuracy per task, one bar per model (kldRun, kldSide
   * name the run and the model for the browser test) */
  if (data.cap) {
    draw('chart-cap', {
      type: 'bar',
      data: { labels: data.cap.tasks, datasets: data.cap.bars.map((b, i) => ({
        label: b.name, data: b.accuracy, errors: b.errors, errorColor: '#222', kldRun: b.run, kldSide: b.side,
        backgroundColor: b.side === 'arm' ? fade(color(i)) : color(i) + '99', borderColor: color(i), borderWidth: 1.5 })) },
      options: { scales: { x: { ticks: { maxRotation: 0, autoSkip: false } },
        y: { min: 0, suggestedMax: 1, title: axisTitle('accuracy') } } }
    });
  }

  /* kldeval diff runs: SQNR per layer, one line per site (kldRun, kldSite,
   * kldInf name them for the browser test); +inf (nothing differs) sits on
   * the chart's top edge, drawn as a triangle and labelled +inf */
  (data.diff || []).forEach((d) => {
    const siteNames = ['mixer', 'ffn', 'resid'];
    const finite = [].concat(...siteNames.map((s) => d.sites[s].sqnr.filter((v) => v !== null && isFinite(v))));
    const anyInf = siteNames.some((s) => d.sites[s].inf.some((b) => b));
    const hiFinite = finite.length ? Math.max(...finite) : 0;
    const loFinite = finite.length ? Math.min(...finite) : 0;
    const top = anyInf ? Math.ceil((hiFinite + Math.max(5, (hiFinite - loFinite) * 0.15)) / 5) * 5 : undefined;
    const layers = Array.from({ length: d.n_layer }, (_, l) => l);
    draw('chart-diff-' + d.run, {
      type: 'line',
      data: { labels: layers, datasets: siteNames.map((s, si) => {
        const inf = d.sites[s].inf;
        return { label: s, kldRun: d.run, kldSite: s, kldInf: inf,
          data: d.sites[s].sqnr.map((v, l) => (inf[l] ? top : v)),
          borderColor: color(si), backgroundColor: color(si), borderWidth: 2, tension: 0, clip: 10,
          pointStyle: inf.map((b) => (b ? 'triangle' : 'circle')), pointRadius: inf.map((b) => (b ? 6 : 3)) };
      }) },
      options: {
        layout: { padding: { top: 10 } },
        plugins: { tooltip: { callbacks: { label: (c) => c.dataset.label + ': ' +
          (c.dataset.kldInf[c.dataIndex] ? '+inf' : c.parsed.y.toPrecision(4)) + ' dB' } } },
        scales: { x: { title: axisTitle('layer'), ticks: { autoSkip: true, maxRotation: 0 } },
          y: { title: axisTitle('SQNR (dB)'), max: top,
            ticks: { callback: (v) => (top !== undefined && v === top ? '+inf' : fmt(v)) } } }
      }
    });
  });

  window.kldCharts = charts;
  document.body.dataset.charts = String(charts.length);
})();
