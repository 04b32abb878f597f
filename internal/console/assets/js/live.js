// The Live page: what the server does now (runs in flight, the queue, warm
// pools, admission), refreshed every two seconds while it is shown.
import { api, clear, el, flash, formatBytes, formatCount, tile } from "./api.js";

const refreshEvery = 2000;
let timer = null;

export function init() {}

export async function enter() {
  await refresh();
  clearInterval(timer);
  timer = setInterval(() => refresh().catch((e) => flash(e.message)), refreshEvery);
}

export function leave() {
  clearInterval(timer);
  timer = null;
}

async function refresh() {
  const l = await api("/console/api/live");
  const a = l.admission;
  document.getElementById("live-updated").textContent = "updated " + new Date().toLocaleTimeString();
  clear(document.getElementById("live-tiles")).append(
    tile("Runs in flight", formatCount(l.in_flight), "", "in-flight"),
    tile("Queued", formatCount(l.queued), l.queued ? "warn" : "", "queued"),
    tile("Capacity", formatCount(l.capacity), "", "capacity"),
    tile("Free now", formatCount(a.free), a.free ? "good" : "warn", "free"),
    tile("Warm sandboxes", formatCount(l.pools.reduce((s, p) => s + p.ready, 0)), "", "warm"),
    tile("State", l.draining ? "draining" : "serving", l.draining ? "bad" : "good", "state"),
  );

  if (a.mode !== "resources") {
    fillKV(document.querySelector("#live-admission tbody"), [
      ["Mode", "decided by the service this server forwards calls to"],
      ["Calls in flight here", formatCount(a.running)],
    ]);
  }
  const rows = [
    ["Mode", "by resources (memory and CPU measured)"],
    ["Running", formatCount(a.running) + (a.starting ? ` (${a.starting} starting)` : "") + (a.cpu_bound ? `, ${a.cpu_bound} computing` : "")],
    ["Waiting", `${formatCount(a.waiting)} of at most ${formatCount(a.max_queue)}`],
    ["Queue wait", a.queue_wait_ms ? `${a.queue_wait_ms / 1000} s` : "none (refused at once when full)"],
    ["Capacity", formatCount(a.capacity) + " (an upper bound; memory and CPU decide first)"],
  ];
  if (a.memory_budget_bytes) {
    rows.push(["Memory used / reserved / budget",
      `${formatBytes(a.memory_used_bytes)} / ${formatBytes(a.memory_reserved_bytes)} / ${formatBytes(a.memory_budget_bytes)}`]);
  } else {
    rows.push(["Memory", "not measured by admission"]);
  }
  if (a.cpu_threshold) {
    rows.push(["CPU pressure", `${(a.cpu_pressure * 100).toFixed(0)}% (admits below ${(a.cpu_threshold * 100).toFixed(0)}%, from ${a.cpu_gauge})`]);
  } else {
    rows.push(["CPU", "not measured by admission"]);
  }
  for (const [reason, n] of Object.entries(a.rejections || {})) {
    rows.push(["Refused: " + reason.replaceAll("_", " "), formatCount(n)]);
  }
  if (a.mode === "resources") {
    fillKV(document.querySelector("#live-admission tbody"), rows);
  }

  const pb = clear(document.querySelector("#live-pools tbody"));
  for (const p of l.pools) {
    pb.append(el("tr", {},
      el("td", { "data-label": "Runtime" }, p.runtime),
      el("td", { "data-label": "Network" }, p.network),
      el("td", { "data-label": "Variant" }, p.variant || "–"),
      el("td", { class: "num", "data-label": "Ready" }, formatCount(p.ready))));
  }
  if (l.pools.length === 0) pb.append(el("tr", {}, el("td", { colspan: 4, class: "hint" }, "No warm pool.")));

  fillKV(document.querySelector("#live-rejections tbody"),
    Object.entries(l.rejections || {}).sort().map(([r, n]) => [r.replaceAll("_", " "), formatCount(n)]));
}

function fillKV(body, rows) {
  clear(body);
  for (const [k, v] of rows) body.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
}
