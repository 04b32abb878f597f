// The Usage page: runs per key over time, outcomes, durations and bytes,
// refused calls, a table of recent runs and the CSV export, all for one
// selection (period, key, runtime, outcome).
import { api, clear, el, flash, formatBytes, formatCount, formatMs, formatTime, outcomeNames, tile } from "./api.js";
import { colorOf, drawRunsChart } from "./chart.js";

let runtimesLoaded = false;

export function init() {
  document.getElementById("usage-filter").addEventListener("change", () => load().catch((e) => flash(e.message)));
  document.getElementById("usage-filter").addEventListener("submit", (ev) => ev.preventDefault());
}

export async function enter() {
  if (!runtimesLoaded) {
    const info = await api("/console/api/runtimes");
    const sel = document.getElementById("usage-runtime");
    for (const rt of info.runtimes || []) sel.append(el("option", { value: rt.name }, rt.name));
    runtimesLoaded = true;
  }
  await load();
}

function query() {
  const f = document.getElementById("usage-filter").elements;
  const q = new URLSearchParams();
  for (const name of ["since", "key", "runtime", "outcome"]) {
    if (f[name].value) q.set(name, f[name].value);
  }
  return q;
}

async function load() {
  const q = query();
  document.getElementById("usage-csv").href = "/console/api/runs.csv?" + q.toString();
  const [rep, recent] = await Promise.all([api("/console/api/usage?" + q), api("/console/api/runs?" + q)]);
  const name = (id) => rep.key_names[id] || id;
  fillKeySelect(rep.key_names);

  const t = clear(document.getElementById("usage-tiles"));
  const o = rep.outcomes;
  const refused = rep.refused ? Object.values(rep.refused).reduce((a, b) => a + b, 0) : null;
  t.append(
    tile("Runs", formatCount(rep.runs), "", "runs"),
    tile("OK", formatCount(o.success), "good", "ok"),
    tile("Error (exit ≠ 0)", formatCount(o.nonzero_exit), o.nonzero_exit ? "warn" : "", "error"),
    tile("Timeout", formatCount(o.timeout), o.timeout ? "bad" : "", "timeout"),
    tile("Memory limit", formatCount(o.memory_limit), o.memory_limit ? "bad" : "", "memory"),
    tile("Refused", refused === null ? "–" : formatCount(refused), refused ? "bad" : "", "refused"),
    tile("Sandbox failure", formatCount(o.error), o.error ? "bad" : "", "failure"),
    tile("Cancelled", formatCount(o.cancelled), "", "cancelled"),
    tile("p50 duration", formatMs(rep.p50_ms), "", "p50"),
    tile("p95 duration", formatMs(rep.p95_ms), "", "p95"),
    tile("Bytes in", formatBytes(rep.bytes_in), "", "bytes-in"),
    tile("Bytes out", formatBytes(rep.bytes_out), "", "bytes-out"),
  );
  if (rep.refused && refused) {
    const parts = Object.entries(rep.refused).filter(([, n]) => n).map(([r, n]) => `${r.replaceAll("_", " ")}: ${n}`);
    t.append(el("div", { class: "hint" }, "Refused by reason — " + parts.join(", ")));
  }

  const keys = rep.per_key.filter((k) => k.runs > 0).map((k) => k.key_id);
  drawRunsChart(document.getElementById("usage-chart"), { series: rep.series, since: rep.since, until: rep.until, stepMs: rep.step_ms, keys, name });

  const kb = clear(document.querySelector("#usage-keys tbody"));
  for (const k of rep.per_key) {
    const sw = el("span", { class: "swatch" });
    const idx = keys.indexOf(k.key_id);
    if (idx >= 0) sw.style.background = colorOf(idx);
    kb.append(el("tr", {},
      el("td", { "data-label": "Key" }, sw, " ", name(k.key_id)),
      num("Runs", k.runs), num("OK", k.outcomes.success || 0), num("Error", k.outcomes.nonzero_exit || 0),
      num("Timeout", k.outcomes.timeout || 0), num("Memory", k.outcomes.memory_limit || 0),
      num("Refused", rep.refused ? k.refused : null),
      el("td", { class: "num", "data-label": "Bytes in" }, formatBytes(k.bytes_in)),
      el("td", { class: "num", "data-label": "Bytes out" }, formatBytes(k.bytes_out))));
  }
  if (rep.per_key.length === 0) kb.append(el("tr", {}, el("td", { colspan: 9, class: "hint" }, "Nothing in this period.")));

  const rb = clear(document.querySelector("#usage-runs tbody"));
  for (const r of recent.runs) {
    rb.append(el("tr", { "data-outcome": r.outcome },
      el("td", { "data-label": "Started" }, formatTime(r.started)),
      el("td", { "data-label": "Key" }, recent.key_names[r.key_id] || r.key_id),
      el("td", { "data-label": "Runtime" }, r.runtime),
      el("td", { "data-label": "Outcome" }, outcomeNames[r.outcome] || r.outcome),
      el("td", { class: "num", "data-label": "Exit" }, String(r.exit_code)),
      el("td", { class: "num", "data-label": "Duration" }, formatMs(r.duration_ms)),
      el("td", { class: "num", "data-label": "In" }, formatBytes(r.bytes_in)),
      el("td", { class: "num", "data-label": "Out" }, formatBytes(r.bytes_out)),
      el("td", { "data-label": "Worker" }, r.worker)));
  }
  if (recent.runs.length === 0) rb.append(el("tr", {}, el("td", { colspan: 9, class: "hint" }, "No runs match.")));
}

function num(label, v) {
  return el("td", { class: "num", "data-label": label }, v === null || v === undefined ? "–" : formatCount(v));
}

// fillKeySelect offers every key (and the console), keeping the choice.
function fillKeySelect(names) {
  const sel = document.getElementById("usage-key");
  const chosen = sel.value;
  clear(sel).append(el("option", { value: "" }, "all keys"));
  for (const [id, n] of Object.entries(names).sort((a, b) => a[1].localeCompare(b[1]))) {
    if (id === "") continue;
    sel.append(el("option", { value: id }, id.startsWith("key_") ? `${n} (${id})` : n));
  }
  sel.value = chosen;
}
