/* fetchtool HTML report: draws the charts from the JSON blob with uPlot (inlined above this script).
   Every label from a capture is set with textContent, never as HTML. When done, each chart's box (page
   coordinates, CSS pixels) is written onto its element and <body data-ready="1">, so a headless browser test
   can find the drawn pixels. */
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push(String(e.message));
    document.body.dataset.errors = JSON.stringify(errors);
  });

  var data = JSON.parse(document.getElementById("fetchtool-data").textContent);
  var WIDTH = 1100, HEIGHT = 240;
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  var utc = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); };
  var stepped = uPlot.paths.stepped({ align: 1 });
  var noLine = function () { return null; };

  function place(id) {
    var el = document.getElementById(id);
    if (!el) { throw new Error("no chart element " + id); }
    return el;
  }

  function chart(id, title, series, values, extra) {
    var opts = {
      title: title, width: WIDTH, height: HEIGHT, tzDate: utc, series: [{}].concat(series),
      scales: { x: { time: true } }, axes: [{ label: "UTC" }, { label: "" }], legend: { live: false },
    };
    for (var k in (extra || {})) { opts[k] = extra[k]; }
    var u = new uPlot(opts, values, place(id));
    return u;
  }

  /* A step series on its own times -> values at every time of ``xs`` (the value holds until its next point). */
  function filled(xs, ts, vs) {
    var out = new Array(xs.length), j = -1, cur = 0;
    for (var i = 0; i < xs.length; i++) {
      while (j + 1 < ts.length && ts[j + 1] <= xs[i]) { j++; cur = vs[j]; }
      out[i] = j < 0 ? 0 : cur;
    }
    return out;
  }

  function union(lists) {
    var seen = {}, xs = [];
    lists.forEach(function (l) { l.forEach(function (t) { if (!seen[t]) { seen[t] = 1; xs.push(t); } }); });
    return xs.sort(function (a, b) { return a - b; });
  }

  function trafficChart(b) {
    var tl = b.timeline, xs = tl.fetches.map(function (_, i) { return tl.start + i * tl.bucket_s; });
    chart(b.traffic_id, "Fetches, errors and response times per " + tl.bucket_s + " s", [
      { label: "fetches", stroke: COLORS[0], paths: stepped, scale: "n" },
      { label: "error responses", stroke: COLORS[3], paths: stepped, scale: "n", width: 2 },
      { label: "partition errors", stroke: COLORS[1], paths: stepped, scale: "n" },
      { label: "p50 ms", stroke: COLORS[2], scale: "ms", spanGaps: true },
      { label: "p99 ms", stroke: COLORS[4], scale: "ms", spanGaps: true },
    ], [xs, tl.fetches, tl.errors, tl.partition_errors, tl.p50_ms, tl.p99_ms], {
      scales: { x: { time: true }, n: { range: function (u, lo, hi) { return [0, Math.max(1, hi)]; } } },
      axes: [{ label: "UTC" }, { scale: "n", label: "per bucket" },
             { scale: "ms", side: 1, label: "ms", grid: { show: false } }],
    });
  }

  function occupancyChart(b) {
    var oc = b.cache_occupancy, secs = function (l) { return l.map(function (t) { return t / 1000; }); };
    var lists = [secs(oc.total.t_ms)].concat(oc.per_shard.map(function (s) { return secs(s.t_ms); }));
    var xs = union(lists);
    var series = [{ label: "all shards", stroke: "#000", width: 2, paths: stepped }];
    var values = [xs, filled(xs, lists[0], oc.total.live)];
    oc.per_shard.forEach(function (s, i) {
      series.push({ label: "shard " + s.shard, stroke: COLORS[s.shard % COLORS.length], paths: stepped });
      values.push(filled(xs, lists[i + 1], s.live));
    });
    chart(b.occupancy_id, "Live sessions in the cache", series, values, {
      scales: { x: { time: true }, y: { range: function (u, lo, hi) { return [0, Math.max(1, hi + 1)]; } } },
    });
  }

  var KINDS = [["created", "#2ca02c", 7], ["incremental", "#1f77b4", 3], ["full", "#9467bd", 5],
               ["error", "#d62728", 8], ["end", "#000000", 7]];

  function sessionChart(c) {
    var xs = union(KINDS.map(function (k) { return c.points[k[0]].t; }));
    var at = {};
    xs.forEach(function (t, i) { at[t] = i; });
    var series = [], values = [xs];
    KINDS.forEach(function (k) {
      var ys = new Array(xs.length).fill(null), p = c.points[k[0]];
      for (var i = 0; i < p.t.length; i++) { ys[at[p.t[i]]] = p.lane[i]; }
      series.push({ label: k[0], stroke: k[1], paths: noLine, points: { show: true, size: k[2], fill: k[1] } });
      values.push(ys);
    });
    var lanes = c.lanes;
    var yAxis = { label: "session", size: 90, values: function (u, splits) {
      return splits.map(function (i) { return lanes[i] ? String(lanes[i].session_id) : ""; });
    } };
    if (lanes.length <= 20) {  // every lane named while they fit; beyond, uPlot's own ticks
      yAxis.splits = function () { return lanes.map(function (_, i) { return i; }); };
    }
    chart(c.id, "Sessions over time", series, values, {
      height: Math.min(600, 120 + 22 * lanes.length),
      scales: { x: { time: true }, y: { range: [-0.5, Math.max(lanes.length - 0.5, 0.5)] } },
      axes: [{ label: "UTC" }, yAxis],
      hooks: { drawClear: [function (u) {  // each session's life as a line under its points
        var ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = "#bbb";
        ctx.lineWidth = 2 * uPlot.pxRatio;
        lanes.forEach(function (l, i) {
          var y = u.valToPos(i, "y", true);
          ctx.beginPath();
          ctx.moveTo(u.valToPos(l.start, "x", true), y);
          ctx.lineTo(u.valToPos(l.end, "x", true), y);
          ctx.stroke();
        });
        ctx.restore();
      }] },
    });
  }

  data.brokers.forEach(function (b) {
    if (b.timeline) { trafficChart(b); }
    if (b.cache_occupancy && b.cache_occupancy.total.t_ms.length) { occupancyChart(b); }
  });
  data.clients.forEach(function (c) { if (c.lanes.length) { sessionChart(c); } });

  setTimeout(measure, 0);  // uPlot sizes its canvases in a microtask after construction: measure after it

  function measure() {
    var boxes = [];
    document.querySelectorAll(".chart").forEach(function (el) {
      var canvas = el.querySelector("canvas");
      if (!canvas) { return; }
      var r = canvas.getBoundingClientRect();
      var box = { id: el.id, x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height };
      el.dataset.box = JSON.stringify(box);
      boxes.push(box);
    });
    document.body.dataset.charts = String(boxes.length);
    document.body.dataset.height = String(Math.ceil(document.documentElement.scrollHeight));
    document.body.dataset.ready = "1";
  }
})();
