// A stacked bar chart of runs per key over time, drawn as SVG.
import { clear, el } from "./api.js";

const palette = ["#2357c6", "#e07b00", "#1f9d55", "#c0392b", "#8e44ad", "#16a2b8", "#b7950b", "#6c7a89", "#d35400", "#2e86c1"];

export function colorOf(i) {
  return palette[i % palette.length];
}

// drawRunsChart fills box with bars for each interval of stepMs from since
// to until, stacked by key (keys in the order given, colored by index).
export function drawRunsChart(box, { series, since, until, stepMs, keys, name }) {
  clear(box);
  const start = Math.floor(Date.parse(since) / stepMs) * stepMs;
  const end = Date.parse(until);
  const n = Math.max(1, Math.ceil((end - start) / stepMs));
  const stacks = Array.from({ length: n }, () => new Map());
  for (const p of series) {
    const i = Math.floor((Date.parse(p.start) - start) / stepMs);
    if (i >= 0 && i < n) stacks[i].set(p.key_id, (stacks[i].get(p.key_id) || 0) + p.runs);
  }
  const totals = stacks.map((m) => [...m.values()].reduce((a, b) => a + b, 0));
  // Whole-number gridlines: runs are counted.
  const step = niceStep(Math.max(1, ...totals) / 4);
  const top = step * Math.max(1, Math.ceil(Math.max(1, ...totals) / step));

  // Drawn at the width it is shown at, so that its text keeps its size on
  // a phone.
  const W = Math.max(320, Math.min(900, box.clientWidth || 900)), H = W < 500 ? 200 : 260;
  const left = 36, right = 12, topPad = 10, bottom = 28;
  const plotW = W - left - right, plotH = H - topPad - bottom;
  const barW = plotW / n;
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "runs per key over time", id: "runs-chart" });

  for (let v = 0; v <= top; v += step) {
    const y = topPad + plotH - (v / top) * plotH;
    svg.append(el("svg:line", { class: "grid", x1: left, x2: W - right, y1: y, y2: y }));
    svg.append(el("svg:text", { x: left - 6, y: y + 4, "text-anchor": "end" }, formatTick(v)));
  }
  svg.append(el("svg:line", { class: "axis", x1: left, x2: W - right, y1: topPad + plotH, y2: topPad + plotH }));

  stacks.forEach((m, i) => {
    let y = topPad + plotH;
    keys.forEach((key, k) => {
      const v = m.get(key) || 0;
      if (!v) return;
      const h = (v / top) * plotH;
      y -= h;
      const rect = el("svg:rect", {
        x: left + i * barW + Math.min(1, barW * 0.1), y, width: Math.max(1, barW - Math.min(2, barW * 0.2)), height: h,
        fill: colorOf(k), "data-key": key,
      });
      rect.append(el("svg:title", {}, `${name(key)}: ${v} run${v === 1 ? "" : "s"} from ${new Date(start + i * stepMs).toLocaleString()}`));
      svg.append(rect);
    });
  });

  const ticks = Math.min(W < 500 ? 3 : 6, n);
  for (let t = 0; t < ticks; t++) {
    const i = Math.round((t * (n - 1)) / Math.max(1, ticks - 1));
    const x = left + i * barW + barW / 2;
    // The outer labels lean inwards, so that neither is cut at the edge.
    const anchor = ticks > 1 && t === 0 ? "start" : ticks > 1 && t === ticks - 1 ? "end" : "middle";
    svg.append(el("svg:text", { x: anchor === "start" ? left : anchor === "end" ? W - right : x, y: H - 8, "text-anchor": anchor },
      formatDate(start + i * stepMs, stepMs)));
  }
  box.append(svg);
  const legend = el("div", { class: "legend" });
  keys.forEach((key, k) => {
    const sw = el("span", { class: "swatch" });
    sw.style.background = colorOf(k); // CSSOM, which the page's policy allows (no inline style attributes)
    legend.append(el("span", {}, sw, name(key)));
  });
  if (keys.length === 0) legend.append(el("span", { class: "hint" }, "No runs in this period."));
  box.append(legend);
}

// niceStep is the smallest of 1, 2 and 5 times a power of ten that is at
// least v, and at least 1.
function niceStep(v) {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(1, v))));
  for (const m of [1, 2, 5, 10]) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

function formatTick(v) {
  return v.toLocaleString();
}

function formatDate(ms, stepMs) {
  const d = new Date(ms);
  if (stepMs < 24 * 3600 * 1000) {
    return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  }
  return d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
}
