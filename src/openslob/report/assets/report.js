/* openslob HTML report: sortable tables and interactive charts (Chart.js, embedded).
 *
 * Charts come as JSON specs written by report/webcharts.py:
 *   {title, x: {label, log, scale: "nines", max}, y: {label, log}, line, note, group,
 *    series: [{label, color, dash, step, width, points: [[x, y, note, tag, ranges], ...]}]}
 *   (tag: text drawn beside the point, e.g. its session count; ranges: [x0, x1, y0, y1],
 *   the min–max bars of a point made of repeats)
 *   {title, kind: "bars", bars: [{label, value, verdict, note}]}
 * Hover shows the values in an HTML tooltip (.chart-tip), a legend click toggles a curve,
 * dragging a box zooms (ctrl + wheel too), double-click or "reset zoom" undoes it; the charts
 * of one group (a run's time series) zoom together on their common time axis.
 */
(function () {
  "use strict";

  const fmt = (v, digits) =>
    v === null || v === undefined || Number.isNaN(v)
      ? "n/a"
      : Number(v).toLocaleString("en-US", { maximumFractionDigits: digits });
  const niceDigits = (v) => (Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2);
  const ninesLabel = (v) => "p" + Number((100 * (1 - Math.pow(10, -v))).toPrecision(6));

  // --- sortable tables -----------------------------------------------------------------
  function sortTable(table, index, th) {
    const numeric = th.dataset.type === "num";
    const dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    table.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir);
    const sign = dir === "ascending" ? 1 : -1;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const key = (row) => {
      const raw = row.cells[index].dataset.v;
      if (raw === undefined || raw === "") return null; // not measured: always last
      return numeric ? parseFloat(raw) : raw.toLowerCase();
    };
    rows.sort((a, b) => {
      const ka = key(a), kb = key(b);
      if (ka === null || kb === null) return ka === kb ? 0 : ka === null ? 1 : -1;
      return (ka < kb ? -1 : ka > kb ? 1 : 0) * sign;
    });
    rows.forEach((r) => body.appendChild(r));
  }

  function initTables() {
    document.querySelectorAll("table.sortable").forEach((table) => {
      table.querySelectorAll("thead th").forEach((th, index) => {
        const go = () => sortTable(table, index, th);
        th.addEventListener("click", go);
        th.addEventListener("keydown", (e) => {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); }
        });
      });
    });
  }

  // --- charts --------------------------------------------------------------------------
  const charts = [];
  const groups = {};

  function tooltip(box) {
    return function (context) {
      const tip = box.querySelector(".chart-tip");
      const model = context.tooltip;
      if (!model || model.opacity === 0 || !model.dataPoints || !model.dataPoints.length) {
        tip.style.display = "none";
        return;
      }
      const lines = model.dataPoints.map((dp) => {
        const raw = dp.raw;
        const spec = box._spec;
        if (spec.kind === "bars") {
          return `<b>${escapeHtml(raw.label)}</b>: ${fmt(raw.value, 1)} %<br>${escapeHtml(raw.note || "")}`;
        }
        const xText = spec.x.scale === "nines" ? ninesLabel(raw.x) : fmt(raw.x, niceDigits(raw.x));
        const note = raw.note ? `<br><span class="tip-note">${escapeHtml(raw.note)}</span>` : "";
        return (
          `<span class="swatch" style="background:${dp.dataset.borderColor}"></span>` +
          `<b>${escapeHtml(dp.dataset.label)}</b><br>${escapeHtml(spec.x.label)}: ${xText}` +
          `<br>${escapeHtml(spec.y.label)}: ${fmt(raw.y, niceDigits(raw.y))}${note}`
        );
      });
      tip.innerHTML = lines.join("<hr>");
      tip.style.display = "block";
      const left = Math.min(model.caretX + 12, box.clientWidth - tip.offsetWidth - 4);
      tip.style.left = Math.max(0, left) + "px";
      tip.style.top = Math.max(0, model.caretY - tip.offsetHeight / 2) + "px";
    };
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) =>
      ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  function axis(spec, which) {
    const a = spec[which] || {};
    const out = {
      type: a.log ? "logarithmic" : "linear",
      title: { display: true, text: a.label || "" },
      ticks: {
        callback: (v) => (a.scale === "nines" ? ninesLabel(v) : fmt(v, niceDigits(v))),
      },
      grid: { color: "#e5e5e5" },
    };
    if (a.scale === "nines") { out.ticks.stepSize = 1; out.min = 0; out.max = a.max; }
    // both axes from 0 (a petal's x too): a curve's distance from the origin is its size
    if (!a.log) out.beginAtZero = true;
    return out;
  }

  function zoomOptions(box) {
    return {
      zoom: {
        drag: { enabled: true, backgroundColor: "rgba(31,119,180,0.15)" },
        wheel: { enabled: true, modifierKey: "ctrl" },
        pinch: { enabled: true },
        mode: "xy",
        onZoomComplete: ({ chart }) => syncGroup(box, chart),
      },
      pan: { enabled: true, modifierKey: "shift", mode: "xy" },
    };
  }

  function syncGroup(box, chart) {
    const name = box._spec.group;
    if (!name || box._syncing) return;
    const { min, max } = chart.scales.x;
    for (const other of groups[name] || []) {
      if (other === chart) continue;
      other.canvas.parentNode._syncing = true;
      other.zoomScale("x", { min, max }, "none");
      other.canvas.parentNode._syncing = false;
    }
  }

  function xyConfig(spec, box) {
    const datasets = spec.series.map((s) => ({
      label: s.label,
      data: s.points.map((p) => ({ x: p[0], y: p[1], note: p[2] || "", tag: p[3] || "", range: p[4] || null })),
      borderColor: s.color,
      backgroundColor: s.color,
      borderDash: s.dash ? [6, 4] : [],
      borderWidth: s.width || 1.6,
      showLine: spec.line !== false,
      stepped: s.step ? "after" : false,
      pointRadius: s.points.length > 60 ? 0 : 3,
      pointHoverRadius: 5,
      spanGaps: false,
    }));
    return {
      type: "scatter",
      data: { datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: "nearest", intersect: false, axis: "xy" },
        scales: { x: axis(spec, "x"), y: axis(spec, "y") },
        plugins: {
          title: { display: true, text: spec.title },
          // legend entries drawn as the line itself: dashed curves (intended start, the
          // candidate side) stay told apart from solid ones
          legend: { position: "bottom", labels: { usePointStyle: true, pointStyle: "line" } },
          tooltip: { enabled: false, external: tooltip(box) },
          zoom: zoomOptions(box),
        },
      },
    };
  }

  const VERDICT_COLORS = { better: "#2ca02c", worse: "#d62728" };

  function barsConfig(spec, box) {
    const bars = spec.bars;
    return {
      type: "bar",
      data: {
        labels: bars.map((b) => b.label),
        datasets: [{
          label: "change of the median (%)",
          data: bars.map((b) => ({ ...b, x: b.value, y: b.label })),
          backgroundColor: bars.map((b) => VERDICT_COLORS[b.verdict] || "#9e9e9e"),
        }],
      },
      options: {
        indexAxis: "y",
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        parsing: { xAxisKey: "x", yAxisKey: "y" },
        scales: { x: { title: { display: true, text: "change (%)" } } },
        plugins: {
          title: { display: true, text: spec.title },
          legend: { display: false },
          tooltip: { enabled: false, external: tooltip(box) },
          zoom: zoomOptions(box),
        },
      },
    };
  }

  // Petal points: the session count beside each point, and the min–max bars of a point
  // made of repeats (x and y ranges over its runs), in the curve's colour.
  const tagsPlugin = {
    id: "openslobTags",
    afterDatasetsDraw(chart) {
      const { ctx, scales: { x, y } } = chart;
      ctx.save();
      chart.data.datasets.forEach((ds, i) => {
        if (!chart.isDatasetVisible(i)) return;
        ctx.strokeStyle = ds.borderColor;
        ctx.fillStyle = ds.borderColor;
        ctx.font = "11px sans-serif";
        ctx.lineWidth = 1;
        for (const d of ds.data) {
          if (d.x == null || d.y == null) continue;
          const px = x.getPixelForValue(d.x), py = y.getPixelForValue(d.y);
          if (d.range) {
            const [x0, x1, y0, y1] = d.range;
            ctx.beginPath();
            ctx.moveTo(x.getPixelForValue(x0), py); ctx.lineTo(x.getPixelForValue(x1), py);
            ctx.moveTo(px, y.getPixelForValue(y0)); ctx.lineTo(px, y.getPixelForValue(y1));
            ctx.stroke();
          }
          if (d.tag) ctx.fillText(d.tag, px + 5, py - 5);
        }
      });
      ctx.restore();
    },
  };

  // Shaded spans of the x axis (degradation episodes), drawn under the curves.
  const bandsPlugin = {
    id: "openslobBands",
    beforeDatasetsDraw(chart) {
      const bands = chart.canvas.parentNode._spec.bands || [];
      if (!bands.length) return;
      const { ctx, chartArea: area, scales: { x } } = chart;
      ctx.save();
      for (const [start, end, kind] of bands) {
        const left = Math.max(area.left, x.getPixelForValue(start));
        const right = Math.min(area.right, x.getPixelForValue(end));
        if (right <= left) continue;
        ctx.fillStyle = "rgba(214, 39, 40, 0.12)";
        ctx.fillRect(left, area.top, right - left, area.bottom - area.top);
        ctx.fillStyle = "#d62728";
        ctx.font = "11px sans-serif";
        ctx.fillText(kind, left + 3, area.top + 12);
      }
      ctx.restore();
    },
  };

  function createChart(box) {
    if (box._chart) return;
    const spec = box._spec;
    if (spec.kind === "bars") {
      box.style.height = Math.max(220, 60 + 22 * spec.bars.length) + "px";
    }
    const canvas = box.querySelector("canvas");
    const chart = new Chart(canvas, spec.kind === "bars" ? barsConfig(spec, box) : xyConfig(spec, box));
    box._chart = chart;
    charts.push(chart);
    if (spec.group) (groups[spec.group] = groups[spec.group] || []).push(chart);
    canvas.addEventListener("dblclick", () => resetZoom(box, chart));
    const button = box.querySelector("button.reset");
    if (button) button.addEventListener("click", () => resetZoom(box, chart));
    canvas.addEventListener("mouseleave", () => { box.querySelector(".chart-tip").style.display = "none"; });
  }

  // Charts inside a closed run section are created when it opens (or the page is printed):
  // a sweep of many runs loads as fast as one.
  const deferred = [];

  function initCharts() {
    if (typeof Chart === "undefined") return 0;
    Chart.register(bandsPlugin, tagsPlugin);
    const boxes = document.querySelectorAll(".chart");
    boxes.forEach((box) => {
      box._spec = JSON.parse(box.querySelector("script.chart-spec").textContent);
      const closed = box.closest("details:not([open])");
      if (!closed) { createChart(box); return; }
      deferred.push(box);
      if (!closed._charts) {
        closed._charts = [];
        closed.addEventListener("toggle", () => { if (closed.open) closed._charts.forEach(createChart); });
      }
      closed._charts.push(box);
    });
    return boxes.length;
  }

  function resetZoom(box, chart) {
    const name = box._spec.group;
    for (const c of name ? groups[name] : [chart]) c.resetZoom("none");
  }

  // --- print: every section open, charts at paper width ------------------------------------
  function beforePrint() {
    document.querySelectorAll("details").forEach((d) => { d.dataset.wasOpen = d.open ? "1" : ""; d.open = true; });
    deferred.forEach(createChart);  // now, not at the toggle events: printing will not wait
    charts.forEach((c) => c.resize());
  }
  function afterPrint() {
    document.querySelectorAll("details").forEach((d) => { if (d.dataset.wasOpen === "") d.open = false; });
    charts.forEach((c) => c.resize());
  }

  document.addEventListener("DOMContentLoaded", () => {
    initTables();
    const boxes = initCharts();
    window.addEventListener("beforeprint", beforePrint);
    window.addEventListener("afterprint", afterPrint);
    document.body.dataset.ready = boxes.toString();  // every chart box: drawn or waiting
  });
  window.openslobCharts = charts;
})();
