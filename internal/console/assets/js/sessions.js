// The Sessions page: the open code sessions (the store's rows, by the hash
// of their ids), and End, which asks the server that holds a session to
// end it (at its next poll). Offered only when the server has sessions on:
// otherwise its API answers 404 and the page stays hidden.
import { api, clear, el, flash, formatBytes, formatTime } from "./api.js";

let endWithin = 2;

// offered reports whether the server has the Sessions page (and shows its
// link when it does).
export async function offered() {
  try {
    await api("/console/api/sessions");
  } catch (e) {
    if (e.status === 404) return false;
    throw e;
  }
  document.querySelector('#nav a[data-page="sessions"]').hidden = false;
  return true;
}

export function init() {}

export async function enter() {
  await load();
}

async function load() {
  const page = await api("/console/api/sessions");
  endWithin = page.end_within_seconds;
  const body = clear(document.querySelector("#sessions-table tbody"));
  if (page.sessions.length === 0) {
    body.append(el("tr", {}, el("td", { colspan: 8, class: "hint" }, "No open session.")));
  }
  for (const s of page.sessions) body.append(row(s));
}

function row(s) {
  const short = s.id_hash.slice(0, 12);
  const actions = el("div", { class: "cell-actions" });
  const tr = el("tr", { "data-session-hash": s.id_hash },
    el("td", { "data-label": "Session" }, el("code", {}, short)),
    el("td", { "data-label": "Key" }, s.key_name || s.key_id || "(no key)"),
    el("td", { "data-label": "Runtime" }, s.runtime),
    el("td", { "data-label": "Worker" }, s.worker || "–"),
    el("td", { "data-label": "Created" }, formatTime(s.created)),
    el("td", { "data-label": "Expires" }, formatTime(s.expires)),
    el("td", { class: "num", "data-label": "Memory" }, s.memory_bytes === null ? "–" : formatBytes(s.memory_bytes)),
    el("td", {}, actions));
  if (s.end_requested) {
    actions.append(el("span", { class: "hint" }, "ending…"));
    return tr;
  }
  const end = el("button", { type: "button", class: "small quiet", "data-action": "end" }, "End");
  actions.append(end);
  // Two steps, as a key's revoke: the session's files and state are lost.
  end.addEventListener("click", () => {
    const confirm = el("button", { type: "button", class: "small danger", "data-action": "confirm-end" }, "End " + short + " now");
    const keep = el("button", { type: "button", class: "small quiet" }, "Keep");
    clear(actions).append(confirm, keep);
    keep.addEventListener("click", () => load().catch((e) => flash(e.message)));
    confirm.addEventListener("click", async () => {
      try {
        await api(`/console/api/sessions/${encodeURIComponent(s.id_hash)}/end`, { method: "POST" });
        flash(`Session ${short} ends within ${endWithin} s (its server's next poll).`, true);
        await load();
      } catch (e) {
        flash(e.message);
      }
    });
  });
  return tr;
}
