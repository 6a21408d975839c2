// The whole-run timeline of report.html: one lane per client slot, nodes above, on a canvas that
// zooms and pans. The data (results/timeline.go) is flat delta-coded tuples in microseconds.
(function () {
  "use strict";
  var el = document.getElementById("tl-data");
  if (!el) return;
  var D = JSON.parse(el.textContent);
  var root = document.getElementById("whole-run");
  var canvas = root.querySelector("canvas.tl"), axis = root.querySelector("canvas.tl-axis");
  var tip = root.querySelector(".tip"), rangeEl = root.querySelector(".tl-range");
  var C = { ok: "#2e9e4f", hold: "#3b6fd1", merged: "#7f9fde", fail: "#9aa0a6", err: "#b03030", info: "#e88a1a",
    fault: "rgba(245,166,35,", viol: "rgba(208,2,27,", overrun: "#8e44ad", stale: "#d0021b", lost: "#d0021b", token: "#8a5a00", early: "#d0021b", late: "#d0021b", deadlock: "#d0021b" };
  var LABEL = 92, NODE_H = 18, LANE_H = D.clients > 40 ? 10 : 18;
  // A fault window is drawn at least MIN_FAULT px wide (a 5ms restart in a minute is a hairline);
  // the tooltip gives its real times.
  var MIN_FAULT = 6;
  // What the last draw put where: the text labels and the fault windows of the node lanes, so that
  // labels never collide (and the browser test can check they do not); axis.drawn has the axis's.
  var drawn = { labels: [], faults: [] };
  canvas.drawn = drawn;

  // Decode each slot's tuples into absolute times.
  function decode(flat, n, acc) {
    var out = [], prev = 0;
    for (var i = 0; i + n <= flat.length; i += n) {
      var t = flat.slice(i, i + n);
      prev += t[0];
      t[0] = prev;
      out.push(t);
    }
    return out;
  }
  var slots = D.slots.map(function (s) {
    return { ok: decode(s.ok || [], 5), fail: decode(s.fail || [], 3), info: decode(s.info || [], 4) };
  });
  var marksBySlot = {};
  (D.marks || []).forEach(function (m) { (marksBySlot[m.slot] = marksBySlot[m.slot] || []).push(m); });
  var nodes = D.nodes || [], faults = D.faults || [], viol = D.viol || [];
  var topH = nodes.length * NODE_H + (nodes.length ? 6 : 0);
  var height = topH + D.clients * LANE_H;
  var v0 = 0, v1 = Math.max(D.end, 1), width = 0, dpr = window.devicePixelRatio || 1, pending = false, violIdx = -1;

  function size() {
    width = canvas.clientWidth;
    canvas.width = width * dpr; canvas.height = height * dpr; canvas.style.height = height + "px";
    axis.width = axis.clientWidth * dpr; axis.height = 26 * dpr;
    draw();
  }
  function X(t) { return LABEL + (t - v0) / (v1 - v0) * (width - LABEL - 4); }
  function T(x) { return v0 + (x - LABEL) / (width - LABEL - 4) * (v1 - v0); }
  function laneY(s) { return topH + s * LANE_H; }
  function fmt(us) { return (us / 1e6).toFixed(3) + "s"; }
  function span(us) { return us < 1000 ? (us / 1000).toFixed(3) + "ms" : us < 1e6 ? (us / 1000).toFixed(1) + "ms" : (us / 1e6).toFixed(3) + "s"; }
  function schedule() { if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; draw(); }); } }

  function rect(g, t0, t1, y, h, color, minW) {
    var x0 = X(t0), x1 = X(t1);
    if (x1 < LABEL || x0 > width) return;
    x0 = Math.max(x0, LABEL);
    g.fillStyle = color;
    g.fillRect(x0, y, Math.max(x1 - x0, minW || 1), h);
  }

  function draw() {
    var g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    drawn.labels = []; drawn.faults = [];
    g.font = "11px system-ui, sans-serif";
    for (var s = 0; s < D.clients; s++) if (s % 2) { g.fillStyle = "#f4f6f9"; g.fillRect(0, laneY(s), width, LANE_H); }
    drawFaults(g);
    drawViolations(g);
    for (s = 0; s < D.clients; s++) drawSlot(g, s);
    drawMarks(g);
    g.fillStyle = "#fff"; g.fillRect(0, 0, LABEL - 2, height);
    g.fillStyle = "#1d2330"; g.textBaseline = "middle";
    nodes.forEach(function (n, i) { label(g, fitText(g, "node " + n.name, LABEL - 8), 4, i * NODE_H, NODE_H, LABEL - 4); });
    if (LANE_H >= 10) for (s = 0; s < D.clients; s++) if (LANE_H >= 14 || s % 5 === 0) label(g, "slot " + s, 4, laneY(s), LANE_H, LABEL - 4);
    if (topH) { g.fillStyle = "#b7bec8"; g.fillRect(0, topH - 3, width, 1); }
    drawAxis();
    rangeEl.textContent = fmt(v0) + " – " + fmt(v1) + " (" + span(v1 - v0) + ")";
  }

  // faultBox is where a fault window is drawn: at least MIN_FAULT wide, inside the plot.
  function faultBox(f) {
    var x0 = Math.max(X(f.s), LABEL), x1 = Math.min(X(f.e), width);
    if (X(f.e) < LABEL || X(f.s) > width) return null;
    if (x1 - x0 < MIN_FAULT) { x0 = Math.min(x0, width - MIN_FAULT); x1 = x0 + MIN_FAULT; }
    return [x0, x1];
  }

  function drawFaults(g) {
    var ends = nodes.map(function () { return LABEL; }); // where each node lane's last label ends
    faults.forEach(function (f) {
      var box = faultBox(f);
      if (!box) return;
      g.fillStyle = C.fault + "0.13)"; g.fillRect(box[0], topH, box[1] - box[0], height - topH);
      nodes.forEach(function (n, i) {
        if (f.nodes && f.nodes.length && f.nodes.indexOf(n.name) < 0) return;
        g.fillStyle = C.fault + "0.75)"; g.fillRect(box[0], i * NODE_H + 2, box[1] - box[0], NODE_H - 4);
        drawn.faults.push([box[0], i * NODE_H + 2, box[1], i * NODE_H + NODE_H - 2]);
        // The name only inside its window, and only clear of the lane's last label.
        var x = box[0] + 3, w = g.measureText(f.name).width;
        if (x + w <= box[1] - 2 && x >= ends[i] + 4) {
          g.fillStyle = "#5a3b00"; label(g, f.name, x, i * NODE_H, NODE_H, box[1]);
          ends[i] = x + w;
        }
      });
      (f.slots || []).forEach(function (s) { g.fillStyle = C.fault + "0.55)"; g.fillRect(box[0], laneY(s), box[1] - box[0], LANE_H); });
    });
    nodes.forEach(function (n, i) {
      (n.offsets || []).forEach(function (o) {
        if (o[2]) return;
        var x = X(o[0]);
        if (x < LABEL || x > width) return;
        g.fillStyle = C.overrun; g.fillRect(x, i * NODE_H, 1.5, NODE_H);
        var txt = "clock " + (o[1] >= 0 ? "+" : "") + (o[1] / 1e9).toFixed(3) + "s", w = g.measureText(txt).width;
        // Right of the step where it fits, else left of it; left out when both would collide.
        var lx = x + 3 + w <= width - 2 ? x + 3 : x - 3 - w;
        if (lx >= ends[i] + 4 && lx >= LABEL) { label(g, txt, lx, i * NODE_H, NODE_H, width); ends[i] = lx + w; }
      });
    });
  }

  // label writes text at x, centred in the lane [y, y+h), and records its box.
  function label(g, text, x, y, h, limit) {
    var w = g.measureText(text).width;
    if (x + w > limit) return;
    g.textBaseline = "middle";
    g.fillText(text, x, y + h / 2);
    drawn.labels.push([x, y + h / 2 - 6, x + w, y + h / 2 + 6, text]);
  }

  // fitText shortens text with an ellipsis to at most w px.
  function fitText(g, text, w) {
    if (g.measureText(text).width <= w) return text;
    while (text.length > 1 && g.measureText(text + "…").width > w) text = text.slice(0, -1);
    return text + "…";
  }

  function drawViolations(g) {
    viol.forEach(function (v) {
      [v.a, v.b].forEach(function (h) { rect(g, v.s, v.e, laneY(h[0]), LANE_H, C.viol + "0.35)", 3); });
      rect(g, v.s, v.e, topH, height - topH, C.viol + "0.07)", 2);
    });
  }

  function drawSlot(g, s) {
    var sl = slots[s], y = laneY(s), h = LANE_H, i, t;
    if (D.bin > 0) {
      for (i = 0; i < sl.fail.length; i++) {
        t = sl.fail[i];
        var a = Math.min(0.25 + Math.log(1 + t[1]) / 5, 1);
        g.globalAlpha = a;
        rect(g, t[0] * D.bin, (t[0] + 1) * D.bin, y + h * 0.6, h * 0.4, t[2] ? C.err : C.fail, 1);
      }
      g.globalAlpha = 1;
    } else {
      for (i = 0; i < sl.fail.length; i++) {
        t = sl.fail[i];
        rect(g, t[0], t[0] + t[1], y + h * 0.6, h * 0.4, t[2] ? C.err : C.fail, 1);
      }
    }
    for (i = 0; i < sl.info.length; i++) {
      t = sl.info[i];
      rect(g, t[0], t[0] + t[1], y + h * 0.55, h * 0.45, C.info, 1.5);
    }
    for (i = 0; i < sl.ok.length; i++) {
      t = sl.ok[i];
      var comp = t[0] + t[1];
      rect(g, t[0], comp, y + h * 0.55, h * 0.45, C.ok, 1);
      rect(g, comp, comp + t[2], y + h * 0.12, h * 0.6, t[3] === 3 ? C.merged : C.hold, 1);
      if (t[3] === 1) rect(g, comp + t[2], comp + t[2], y, h, C.overrun, 1.5);
    }
  }

  function drawMarks(g) {
    var glyph = { overrun: "▼", stale: "✕", lost: "◆", token: "▲", early: "◀", late: "▶", deadlock: "■" };
    g.textBaseline = "middle"; g.font = "bold " + Math.max(LANE_H, 11) + "px system-ui, sans-serif";
    (D.marks || []).forEach(function (m) {
      var x = X(m.t);
      if (x < LABEL || x > width) return;
      g.fillStyle = C[m.kind] || "#000";
      // Marks of one place side by side: overrun left, stale write middle, lost update right.
      var dx = { overrun: -11, stale: -4, lost: 4, token: -4, early: -4, late: -4 }[m.kind] || -4;
      var txt = glyph[m.kind] || "•";
      // A mark at the very end of the run stays whole inside the canvas.
      g.fillText(txt, Math.min(x + dx, width - g.measureText(txt).width - 1), laneY(m.slot) + LANE_H / 2);
    });
    g.font = "11px system-ui, sans-serif";
  }

  function drawAxis() {
    var g = axis.getContext("2d"), w = axis.clientWidth, boxes = [];
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, 26);
    g.font = "11px system-ui, sans-serif"; g.fillStyle = "#5f6877"; g.textAlign = "left"; g.textBaseline = "middle";
    function put(text, x) {
      var tw = g.measureText(text).width;
      if (boxes.length && x < boxes[boxes.length - 1][2] + 4) return;
      g.fillText(text, x, 10);
      boxes.push([x, 4, x + tw, 16, text]);
    }
    put("run time →", 2);
    var raw = (v1 - v0) / 10, p = Math.pow(10, Math.floor(Math.log10(raw))), step = p;
    [1, 2, 5, 10].some(function (m) { step = m * p; return step >= raw; });
    var dec = Math.max(0, Math.ceil(-Math.log10(step / 1e6)));
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var x = X(t), text = (t / 1e6).toFixed(dec) + "s", tw = g.measureText(text).width;
      g.fillRect(x, 18, 1, 8);
      // Centred on its tick, but never past the right edge (the run's last tick is at it).
      put(text, Math.min(x - tw / 2, w - 2 - tw));
    }
    axis.drawn = boxes;
  }

  function zoom(factor, at) {
    var c = at === undefined ? (v0 + v1) / 2 : at;
    var w = Math.min(Math.max((v1 - v0) * factor, 20), D.end * 1.1 + 1);
    var f = (c - v0) / (v1 - v0);
    v0 = c - f * w; v1 = v0 + w;
    schedule();
  }

  // Hover: the mark, hold, acquire or fault under the pointer.
  function hit(x, y) {
    var t = T(x), tol = (v1 - v0) / (width - LABEL) * 3, i;
    if (y < topH) {
      var n = nodes[Math.floor(y / NODE_H)];
      if (!n) return "";
      var out = [];
      faults.forEach(function (f) {
        var b = faultBox(f), over = b && x >= b[0] && x <= b[1];
        if ((over || t >= f.s - tol && t <= f.e + tol) && (!f.nodes || !f.nodes.length || f.nodes.indexOf(n.name) >= 0))
          out.push(f.name + " " + (f.nodes || []).join(" ") + " [" + fmt(f.s) + ", " + fmt(f.e) + "], " + span(f.e - f.s) + (f.healed ? "" : " not healed"));
      });
      return out.join("\n");
    }
    var s = Math.floor((y - topH) / LANE_H), sl = slots[s];
    if (!sl) return "";
    var ms = marksBySlot[s] || [];
    for (i = 0; i < ms.length; i++) if (Math.abs(ms[i].t - t) <= tol * 2) return ms[i].kind + ": " + ms[i].text;
    var lines = [];
    viol.forEach(function (v) {
      if ((v.a[0] === s || v.b[0] === s) && t >= v.s - tol && t <= v.e + tol) lines.push("VIOLATION: " + v.text);
    });
    sl.ok.forEach(function (o) {
      var comp = o[0] + o[1], end = comp + o[2];
      if (t < o[0] - tol || t > end + tol) return;
      if (o[3] === 3) lines.push(o[4] + " holds merged, " + fmt(o[0]) + " – " + fmt(end));
      else lines.push("p" + o[4] + " acquire ok: asked " + fmt(o[0]) + ", granted after " + span(o[1]) + "\nheld " + fmt(comp) + " – " + fmt(end) + " (" + span(o[2]) + "), ended by " + ["release", "expiry", "end of history"][o[3]]);
    });
    sl.info.forEach(function (o) {
      if (t >= o[0] - tol && t <= o[0] + o[1] + tol) lines.push("p" + o[3] + " acquire " + (o[2] ? "pending" : "info (unknown outcome)") + ": " + fmt(o[0]) + " for " + span(o[1]));
    });
    if (!lines.length) {
      var n2 = 0, first = null;
      sl.fail.forEach(function (o) {
        var a = D.bin > 0 ? o[0] * D.bin : o[0], b = D.bin > 0 ? a + D.bin : a + o[1];
        if (t >= a - tol && t <= b + tol) { n2 += D.bin > 0 ? o[1] : 1; first = first || o; }
      });
      if (n2) lines.push(n2 + " failed acquire" + (n2 > 1 ? "s" : "") + (D.bin > 0 ? " in this " + span(D.bin) + " bin" : ": asked " + fmt(first[0]) + ", answered after " + span(first[1])));
    }
    faults.forEach(function (f) {
      if (t >= f.s && t <= f.e) lines.push("during " + f.name + " " + (f.nodes || []).join(" "));
    });
    return lines.length ? "slot " + s + " at " + fmt(t) + "\n" + lines.join("\n") : "";
  }

  var drag = null;
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    var r = canvas.getBoundingClientRect();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, T(e.clientX - r.left));
  }, { passive: false });
  canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, v0: v0, v1: v1 }; });
  window.addEventListener("mouseup", function () { drag = null; });
  canvas.addEventListener("mousemove", function (e) {
    var r = canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    if (drag) {
      var dt = (e.clientX - drag.x) / (width - LABEL) * (drag.v1 - drag.v0);
      v0 = drag.v0 - dt; v1 = drag.v1 - dt; schedule(); tip.hidden = true; return;
    }
    var text = x > LABEL ? hit(x, y) : "";
    tip.hidden = !text;
    if (text) {
      var rr = root.getBoundingClientRect();
      tip.textContent = text;
      tip.style.left = Math.min(e.clientX - rr.left + 12, rr.width - 380) + "px";
      tip.style.top = (e.clientY - rr.top + 14) + "px";
    }
  });
  canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
  canvas.addEventListener("dblclick", function () { v0 = 0; v1 = D.end; schedule(); });
  root.querySelector(".tl-controls").addEventListener("click", function (e) {
    var act = e.target.getAttribute && e.target.getAttribute("data-act");
    if (act === "all") { v0 = 0; v1 = D.end; schedule(); }
    if (act === "in") zoom(0.5);
    if (act === "out") zoom(2);
    if (act === "viol" && viol.length) {
      violIdx = (violIdx + 1) % viol.length;
      var v = viol[violIdx], lo = Math.min(v.a[1], v.b[1]), hi = Math.max(v.a[2], v.b[2]), pad = (hi - lo) * 0.5 + 1000;
      v0 = lo - pad; v1 = hi + pad; schedule();
      var wrap = root.querySelector(".tl-wrap");
      wrap.scrollTop = Math.max(0, laneY(Math.min(v.a[0], v.b[0])) - 40);
    }
  });
  window.addEventListener("resize", size);
  size();
})();
