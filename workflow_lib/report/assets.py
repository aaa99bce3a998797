"""The page's inline CSS and JavaScript (kept as strings so an installed package carries them).

The script draws the timeline on one canvas from the JSON data block: raw tracks as merged
rectangles per pixel column, bucketed tracks as mean coverage (or min/max band) per pixel
column. It zooms (wheel, buttons, a slow step's row) and pans (drag), and reports how long
the first drawing took into #render-status (data-render-ms, data-done) for the tests.
"""

CSS = r"""
:root { --fg:#1d2330; --muted:#667085; --line:#d0d5dd; --bg:#fff; --soft:#f5f7fa; --A:#2563eb; --B:#ea580c; --C:#16a34a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0; background: var(--bg); }
header { padding: 10px 24px 8px; border-bottom: 1px solid var(--line); background: var(--soft); }
header h1 { margin: 0 0 2px; font-size: 20px; }
nav a { margin-right: 14px; }
main { padding: 0 24px 40px; }
section { margin-top: 24px; }
h2 { font-size: 17px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
.muted { color: var(--muted); }
.missing { color: var(--muted); font-style: italic; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.v-faster { background: #dcfce7; color: #166534; } .v-slower { background: #fee2e2; color: #991b1b; }
.v-no_detectable_change { background: #e0e7ff; color: #3730a3; } .v-inconclusive { background: #fef3c7; color: #92400e; }
.s-attributed { color: #166534; font-weight: 600; } .s-unresolved { color: #92400e; font-weight: 600; } .s-not_applicable { color: var(--muted); }
.st-pass { color: #166534; } .st-blocked { color: #991b1b; font-weight: 600; } .st-new_experiment { color: #92400e; font-weight: 600; }
tr.slow td:first-child { border-left: 3px solid #dc2626; }
tr.zoomable { cursor: zoom-in; } tr.zoomable:hover { background: #eef2ff; }
#timeline-wrap { position: relative; border: 1px solid var(--line); user-select: none; }
#timeline { display: block; width: 100%; cursor: grab; }
#tl-tip { position: absolute; pointer-events: none; background: rgba(20,24,33,.92); color: #fff; font-size: 12px;
          padding: 4px 7px; border-radius: 4px; white-space: pre; display: none; z-index: 2; }
.controls button { margin-right: 6px; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
details > summary { cursor: pointer; }
.finding { margin: 4px 0 8px 0; padding-left: 10px; border-left: 3px solid var(--line); }
.plot { border: 1px solid var(--line); background: #fff; }
.words { font-size: 15px; max-width: 70em; }
#glance { margin-top: 14px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin-bottom: 12px; background: #fff; }
.card h3 { margin: 0 0 6px; font-size: 15px; }
.card p { margin: 4px 0; }
.cards { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.cards > .card { margin-bottom: 0; }
#glance-next { margin-top: 12px; }
.verdict { border-left: 8px solid #94a3b8; }
.verdict.v-faster { border-left-color: #16a34a; background: #f0fdf4; } .verdict.v-slower { border-left-color: #dc2626; background: #fef2f2; }
.verdict.v-no_detectable_change { border-left-color: #4f46e5; background: #eef2ff; } .verdict.v-inconclusive { border-left-color: #d97706; background: #fffbeb; }
.vword { font-size: 26px; font-weight: 700; line-height: 1.2; }
.vnums { font-size: 16px; margin: 2px 0; } .vnums .big { font-size: 20px; } .vsentence { color: #344054; }
.xrow { margin: 6px 0 10px; }
.xbar { display: flex; height: 14px; border-radius: 3px; overflow: hidden; background: #f1f5f9; margin: 3px 0; max-width: 640px; }
.xbar i { display: block; height: 100%; }
.cause { display: inline-block; margin-right: 12px; font-size: 13px; }
.cause i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; border-radius: 2px; }
.small { font-size: 12px; }
table.compact td, table.compact th { padding: 2px 6px; font-size: 13px; }
table.compact td.num { white-space: nowrap; }
tr.c-unresolved td { color: var(--muted); }
"""

JS = r"""
(function () {
  "use strict";
  var status = document.getElementById("render-status");
  function fail(msg) { status.dataset.error = msg; status.textContent = "timeline failed: " + msg; }
  window.addEventListener("error", function (e) { fail(String(e.message)); });
  var data = JSON.parse(document.getElementById("stallcase-data").textContent);
  var tl = data.timeline;
  var canvas = document.getElementById("timeline");
  if (!tl || !canvas) { status.dataset.done = "1"; status.dataset.renderMs = performance.now().toFixed(1); return; }
  var ctx = canvas.getContext("2d");
  var tip = document.getElementById("tl-tip");
  var LABEL = 250, AXIS = 26;
  // Findings and spans take their colours from the data block (report/palette.py): one definition.
  var PAL = data.colors || { findings: {}, finding_other: "#334155", span_other: "#dee2e6" };
  var COLORS = { steps: ["#64748b", "#94a3b8"], intervals: "#7c3aed", busy: "#14b8a6", kernels: "#38bdf8",
                 api: "#64748b", sync: "#e11d48", collectives: "#60a5fa", wait: "rgba(225,29,72,0.45)",
                 gaps: "rgba(225,29,72,0.30)", samples: "#9333ea", band: "rgba(147,51,234,0.35)",
                 pageable: "#f59e0b" };
  var CHECK_COLORS = PAL.findings, SPAN_COLORS = (tl && tl.span_colors) || {};
  var ROWH = 15;  // one nesting level of host spans
  var used = {};  // legend key -> [label, colour]: only what the last drawing showed
  function use(key, label, color) { if (!used[key]) used[key] = [label, color]; }
  function spanColor(name) { return SPAN_COLORS[name] || PAL.span_other; }
  function checkColor(c) { return CHECK_COLORS[c] || PAL.finding_other; }

  function b64bytes(s) { var b = atob(s), a = new Uint8Array(b.length); for (var i = 0; i < b.length; i++) a[i] = b.charCodeAt(i); return a; }
  function cumsum(a) { var o = new Float64Array(a.length), acc = 0; for (var i = 0; i < a.length; i++) { acc += a[i]; o[i] = acc; } return o; }
  tl.tracks.forEach(function (t) {
    if (t.encoding === "raw" && t.start) { t.s = cumsum(t.start); t.d = Float64Array.from(t.dur); }
    if (t.encoding === "raw" && t.ts) { t.x = cumsum(t.ts); t.y = Float64Array.from(t.value); }
    if (t.encoding === "buckets" && t.coverage) t.cov = b64bytes(t.coverage);
    if (t.encoding === "buckets" && t.min) { t.mn = new Float32Array(b64bytes(t.min).buffer); t.mx = new Float32Array(b64bytes(t.max).buffer); }
    t.isSpans = t.id.indexOf("spans:") === 0;
    t.h = t.kind === "samples" ? 36 : (t.kind === "missing" || t.kind === "empty" ? 18 : ((t.isSpans || t.kind === "findings") ? (t.rows || 1) * ROWH + 2 : 18));
  });
  var rows = [], y = AXIS;
  tl.tracks.forEach(function (t) { rows.push({ t: t, y: y }); y += t.h + 3; });
  var H = y + 4;
  var v0 = tl.start_ns, v1 = tl.end_ns, W = 100;

  function lowerBound(a, v) { var lo = 0, hi = a.length; while (lo < hi) { var m = (lo + hi) >> 1; if (a[m] < v) lo = m + 1; else hi = m; } return lo; }
  // The formatting policy of report/fmt.py: 3 significant digits, the largest unit >= 1.
  var UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];
  function fmtNs(v) { var a = Math.abs(v); for (var k = 0; k < 3; k++) if (a >= UNITS[k][0] * 0.9995) { var x = v / UNITS[k][0];
                        return (Math.abs(x) >= 1000 ? Math.round(x).toString() : x.toPrecision(3)) + " " + UNITS[k][1]; }
                      return Math.round(v) + " ns"; }
  function tickNs(v, step) {  // a tick at a round value, with just the decimals its step needs
    var k = 0; while (k < 3 && step < UNITS[k][0]) k++;
    var d = Math.max(0, -Math.floor(Math.log10(step / UNITS[k][0]) + 1e-9)), x = v / UNITS[k][0];
    return (Math.abs(x) < 1e-12 ? "0" : x.toFixed(d)) + " " + UNITS[k][1];
  }
  function xOf(t) { return LABEL + (t - v0) * W / (v1 - v0); }

  function colorOf(t, i) {
    if (t.kind === "steps") return COLORS.steps[(t.step_id[i] % 2 + 2) % 2];
    if (t.kind === "findings") return checkColor(t.names[t.name[i]]);
    if (t.kind === "busy") return COLORS.busy;
    if (t.kind === "gaps") return COLORS.gaps;
    if (t.kind === "collectives" || t.kind === "enqueued") return COLORS.collectives;
    if (t.isSpans) return spanColor(t.names[t.name[i]]);
    if (t.sync) return t.sync[i] ? COLORS.sync : COLORS.api;
    if (t.id.indexOf("memcpy-pageable:") === 0) return COLORS.pageable;
    if (t.id.indexOf("kernels:") === 0 || t.id.indexOf("memcpy:") === 0) return COLORS.kernels;
    if (t.id.indexOf("runtime_api:") === 0) return COLORS.api;
    return COLORS.intervals;
  }

  function noteUse(t, i, c) {
    if (t.kind === "findings") { var nm = t.names[t.name[i]]; use("f:" + nm, nm.replace(/_/g, " ") + (t.placed && !t.placed[i] ? " (share of its step)" : ""), c); }
    else if (t.isSpans) { var sn = t.names[t.name[i]]; use("s:" + (SPAN_COLORS[sn] ? sn : "(other)"), SPAN_COLORS[sn] ? "span " + sn : "other spans", c); }
    else if (t.kind === "gaps") use("gaps", "GPU idle gap (longest, where it was)", c);
    else if (t.sync && t.sync[i]) use("sync", "synchronizing CUDA call", c);
    else if (t.id.indexOf("memcpy-pageable:") === 0) use("pageable", "copy from/to pageable (unpinned) host memory", c);
    else if (t.kind === "collectives" && t.wait[i] > 0) use("wait", "collective: waiting for the last rank", COLORS.wait);
  }

  function bucketColor(t) {  // a decimated track has no per-event fields: colour by kind
    var byKind = { steps: COLORS.steps[0], findings: "#334155", busy: COLORS.busy, gaps: COLORS.gaps,
                   collectives: COLORS.collectives, enqueued: COLORS.collectives };
    if (byKind[t.kind]) return byKind[t.kind];
    if (t.isSpans) return PAL.span_other;
    if (t.id.indexOf("runtime_api:") === 0) return COLORS.api;
    if (t.id.indexOf("memcpy-pageable:") === 0) return COLORS.pageable;
    if (t.id.indexOf("kernels:") === 0 || t.id.indexOf("memcpy:") === 0) return COLORS.kernels;
    return COLORS.intervals;
  }

  function label(x0, x1, top, h, text, dark) {  // the name inside its box when there is room
    var w = ctx.measureText(text).width;
    if (x1 - x0 < w + 6) return;
    ctx.fillStyle = dark ? "#1d2330" : "#fff"; ctx.fillText(text, LABEL + x0 + 3, top + h - 4);
  }

  function drawRaw(t, top) {
    var s = t.s, d = t.d, n = s.length, scale = W / (v1 - v0);
    var i = lowerBound(s, v0 - t.max_dur - 1);
    var cx0 = 0, cx1 = -1, cc = null, cy = 0, ch = 0;
    function flush() { if (cx1 >= cx0 && cc) { ctx.fillStyle = cc; ctx.fillRect(LABEL + cx0, top + cy, Math.max(cx1 - cx0, 1), ch); } }
    for (; i < n && s[i] <= v1; i++) {
      var e = s[i] + d[i]; if (e < v0) continue;
      var x0 = Math.max((s[i] - v0) * scale, 0), x1 = Math.min((e - v0) * scale, W);
      var c = colorOf(t, i), row = t.isSpans && t.depth ? Math.min(t.depth[i], (t.rows || 1) - 1)
        : (t.kind === "findings" && t.rows === 2 && !t.placed[i] ? 1 : 0);
      var dy = row * ROWH, hh = (t.isSpans || t.kind === "findings") ? ROWH - 1 : t.h - dy;
      noteUse(t, i, c);
      // Rectangles closer than half a pixel, of one colour and depth, are drawn as one:
      // the cost stays per pixel column, not per event.
      if (c === cc && dy === cy && x0 <= cx1 + 0.5) { if (x1 > cx1) cx1 = x1; continue; }
      flush(); cx0 = x0; cx1 = x1; cc = c; cy = dy; ch = hh;
      if (t.kind === "collectives" && t.wait[i] > 0) {
        ctx.fillStyle = COLORS.wait; var wx = Math.min((s[i] + t.wait[i] - v0) * scale, W);
        ctx.fillRect(LABEL + x0, top, Math.max(wx - x0, 1), t.h);
        cx0 = Math.min(Math.max(wx, x0), x1);
      }
      if (t.kind === "steps" || t.kind === "findings" || (t.isSpans && x1 - x0 >= 24)) {
        flush(); ctx.font = "11px sans-serif";
        var text = t.kind === "steps" ? "step " + t.step_id[i] : t.names[t.name[i]].replace(t.kind === "findings" ? /_/g : /$^/, " ");
        label(x0, x1, top + dy, hh, text, t.isSpans);
        if (t.isSpans) { ctx.strokeStyle = "rgba(29,35,48,0.35)"; ctx.strokeRect(LABEL + x0 + 0.5, top + dy + 0.5, Math.max(x1 - x0 - 1, 1), hh - 1); }
        cc = null;
      }
    }
    flush();
  }

  function drawCoverage(t, top) {
    var B = t.buckets, bw = (tl.end_ns - tl.start_ns) / B, cov = t.cov;
    var b0 = Math.max(Math.floor((v0 - tl.start_ns) / bw), 0), b1 = Math.min(Math.ceil((v1 - tl.start_ns) / bw), B);
    ctx.fillStyle = bucketColor(t);
    if (t.isSpans) use("s:decimated", "spans (many: drawn as coverage)", PAL.span_other);
    else if (t.kind === "findings") use("f:decimated", "findings (many: drawn as coverage)", PAL.finding_other);
    else if (t.kind === "gaps") use("gaps", "GPU idle gap (longest, where it was)", COLORS.gaps);
    var perPx = (b1 - b0) / W;
    if (perPx >= 1) {
      for (var px = 0; px < W; px++) {
        var a = b0 + Math.floor(px * perPx), z = Math.max(b0 + Math.floor((px + 1) * perPx), a + 1), sum = 0;
        for (var b = a; b < z && b < B; b++) sum += cov[b];
        var c = sum / ((z - a) * 255);
        if (c > 0) ctx.fillRect(LABEL + px, top + t.h * (1 - c), 1, Math.max(t.h * c, 1));
      }
    } else {
      for (var b = b0; b < b1; b++) {
        if (!cov[b]) continue; var c = cov[b] / 255, x0 = xOf(tl.start_ns + b * bw), x1 = xOf(tl.start_ns + (b + 1) * bw);
        ctx.fillRect(x0, top + t.h * (1 - c), Math.max(x1 - x0, 1), Math.max(t.h * c, 1));
      }
    }
  }

  function drawSamples(t, top) {
    var ym = t.y_max || 1;
    function yv(v) { return top + t.h - (Math.min(Math.max(v, 0), ym) / ym) * (t.h - 2); }
    ctx.strokeStyle = "#e2e8f0"; ctx.strokeRect(LABEL, top, W, t.h);
    if (t.encoding === "raw") {
      var x = t.x, vals = t.y, i = Math.max(lowerBound(x, v0) - 1, 0);
      ctx.strokeStyle = COLORS.samples; ctx.beginPath(); var started = false;
      for (; i < x.length; i++) {
        var px = xOf(x[i]); if (px > LABEL + W) { if (started) ctx.lineTo(LABEL + W, yv(vals[i - 1])); break; }
        if (!started) { ctx.moveTo(Math.max(px, LABEL), yv(vals[i])); started = true; } else { ctx.lineTo(px, yv(vals[i - 1])); ctx.lineTo(px, yv(vals[i])); }
      }
      ctx.stroke();
    } else {
      var B = t.buckets, bw = (tl.end_ns - tl.start_ns) / B;
      var b0 = Math.max(Math.floor((v0 - tl.start_ns) / bw), 0), b1 = Math.min(Math.ceil((v1 - tl.start_ns) / bw), B);
      ctx.fillStyle = COLORS.band;
      for (var b = b0; b < b1; b++) {
        if (isNaN(t.mn[b])) continue;
        var xa = xOf(tl.start_ns + b * bw), xb = xOf(tl.start_ns + (b + 1) * bw), ya = yv(t.mx[b]), yb = yv(t.mn[b]);
        ctx.fillRect(xa, ya, Math.max(xb - xa, 1), Math.max(yb - ya, 1));
      }
    }
    ctx.fillStyle = "#64748b"; ctx.font = "10px sans-serif"; ctx.fillText(String(t.y_max) + " " + t.unit, LABEL + 3, top + 10);
  }

  function niceStep(span, n) { var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p; return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p; }

  function draw() {
    var dpr = window.devicePixelRatio || 1, cw = canvas.clientWidth || 1000;
    W = Math.max(cw - LABEL - 8, 50);
    canvas.width = Math.round(cw * dpr); canvas.height = Math.round(H * dpr); canvas.style.height = H + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.clearRect(0, 0, cw, H);
    ctx.font = "11px sans-serif"; ctx.fillStyle = "#334155"; ctx.strokeStyle = "#cbd5e1";
    used = {};
    var step = niceStep(v1 - v0, 8);
    for (var k = Math.ceil(v0 / step); k * step <= v1; k++) {
      var t = k * step, x = xOf(t); ctx.beginPath(); ctx.moveTo(x, AXIS - 6); ctx.lineTo(x, H); ctx.stroke(); ctx.fillText(tickNs(t, step), x + 2, 12);
    }
    rows.forEach(function (r) {
      var t = r.t; ctx.save(); ctx.beginPath(); ctx.rect(0, r.y, LABEL - 4, t.h); ctx.clip();
      ctx.fillStyle = t.status === "observed" && t.kind !== "empty" ? "#1d2330" : "#98a2b3"; ctx.font = "11px sans-serif"; ctx.fillText(t.label, 4, r.y + t.h - 5);
      ctx.restore();
      ctx.save(); ctx.beginPath(); ctx.rect(LABEL, r.y, W, t.h); ctx.clip();
      if (t.kind === "missing" || t.kind === "empty") {
        ctx.fillStyle = "#98a2b3"; ctx.font = "italic 11px sans-serif";
        ctx.fillText((t.kind === "missing" ? "not observed: " : "") + t.reason, LABEL + 4, r.y + t.h - 5);
      }
      else if (t.kind === "samples") drawSamples(t, r.y);
      else if (t.encoding === "raw") drawRaw(t, r.y);
      else drawCoverage(t, r.y);
      ctx.restore();
    });
    document.getElementById("tl-range").textContent = fmtNs(v0) + " … " + fmtNs(v1) + " (" + fmtNs(v1 - v0) + " shown)";
    drawLegend();
  }

  var legend = document.getElementById("tl-legend"), legendKey = null;
  function drawLegend() {  // only what this drawing showed: findings first, then spans, then marks
    var keys = Object.keys(used).sort(function (a, b) { return (a[0] === "f" ? 0 : a[0] === "s" ? 1 : 2) - (b[0] === "f" ? 0 : b[0] === "s" ? 1 : 2) || (a < b ? -1 : 1); });
    var key = keys.join("|");
    if (key === legendKey) return;
    legendKey = key; legend.textContent = "";
    keys.forEach(function (k) {
      var sp = document.createElement("span"), i = document.createElement("i");
      sp.dataset.key = k; i.style.background = used[k][1]; sp.appendChild(i); sp.appendChild(document.createTextNode(used[k][0])); legend.appendChild(sp);
    });
    if (!keys.length) { var none = document.createElement("span"); none.className = "muted"; none.textContent = "no findings, named spans or marks in this view"; legend.appendChild(none); }
  }

  function zoom(factor, atX) {
    var f = (atX === undefined) ? 0.5 : Math.min(Math.max((atX - LABEL) / W, 0), 1), c = v0 + (v1 - v0) * f;
    var span = Math.max((v1 - v0) * factor, 1000);
    v0 = c - span * f; v1 = v0 + span; draw();
  }
  function setView(a, b) { var pad = (b - a) * 0.05 + 1; v0 = a - pad; v1 = b + pad; draw(); }
  function reset() { v0 = tl.start_ns; v1 = tl.end_ns; draw(); }

  canvas.addEventListener("wheel", function (e) { e.preventDefault(); var r = canvas.getBoundingClientRect(); zoom(e.deltaY > 0 ? 1.25 : 0.8, e.clientX - r.left); }, { passive: false });
  var drag = null;
  canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, v0: v0, v1: v1 }; canvas.style.cursor = "grabbing"; });
  window.addEventListener("mouseup", function () { drag = null; canvas.style.cursor = "grab"; });
  canvas.addEventListener("dblclick", reset);
  canvas.addEventListener("mousemove", function (e) {
    var r = canvas.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    if (drag) { var dt = (e.clientX - drag.x) * (drag.v1 - drag.v0) / W; v0 = drag.v0 - dt; v1 = drag.v1 - dt; draw(); tip.style.display = "none"; return; }
    tip.style.display = "none";
    if (mx < LABEL) return;
    var at = v0 + (mx - LABEL) * (v1 - v0) / W, text = null;
    rows.forEach(function (row) {
      if (my < row.y || my > row.y + row.t.h) return;
      var t = row.t;
      if (t.kind === "missing" || t.kind === "empty") { text = t.label + "\n" + (t.kind === "missing" ? "not observed: " : "") + t.reason; return; }
      if (t.encoding === "raw" && t.s) {
        var tol = 2 * (v1 - v0) / W, i = lowerBound(t.s, at - t.max_dur - tol);
        for (; i < t.s.length && t.s[i] <= at + tol; i++) {
          if (t.s[i] + t.d[i] + tol >= at) {
            var nm = t.kind === "steps" ? "step " + t.step_id[i] : (t.names && t.name.length ? t.names[t.name[i]] : t.label);
            if (t.kind === "findings") nm += t.placed && t.placed[i] ? " (where its evidence was)" : " (its share of the step: the record says how much, not where)";
            text = t.kind === "enqueued"
              ? nm + " #" + t.seq_id[i] + "\nenqueued at " + fmtNs(t.s[i]) + "\nGPU duration " + (t.gpu_dur[i] >= 0 ? fmtNs(t.gpu_dur[i]) : "not recorded") + "; where the GPU ran it is not recorded"
              : nm + "\nstart " + fmtNs(t.s[i]) + "  duration " + fmtNs(t.d[i]) + (t.wait ? "\nwaiting for the last rank " + fmtNs(t.wait[i]) : "");
          }
        }
      } else if (t.encoding === "buckets") {
        text = t.label + "\n" + t.count.toLocaleString() + " events, drawn decimated (shape only; numbers are in the tables below)";
      }
    });
    if (text) { tip.textContent = text; tip.style.display = "block"; tip.style.left = Math.min(mx + 12, r.width - 260) + "px"; tip.style.top = (my + 14) + "px"; }
  });
  document.getElementById("tl-in").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("tl-out").addEventListener("click", function () { zoom(2); });
  document.getElementById("tl-reset").addEventListener("click", reset);
  Array.prototype.forEach.call(document.querySelectorAll("tr.zoomable"), function (tr) {
    tr.addEventListener("click", function () {
      setView(Number(tr.dataset.start) - tl.origin_ns, Number(tr.dataset.end) - tl.origin_ns);
      document.getElementById("timeline-section").scrollIntoView();
    });
  });
  window.addEventListener("resize", draw);
  draw();
  status.dataset.renderMs = performance.now().toFixed(1);
  status.dataset.done = "1";
  status.textContent = tl.tracks.length + " tracks, " + tl.events.toLocaleString() + " events; first drawing done " +
    status.dataset.renderMs + " ms after the page started loading.";
})();
"""
