// The Keys page: list, create (the key shown once, with its snippets),
// revoke and change limits.
import { api, clear, copyButton, el, flash, formatTime } from "./api.js";

let secret = "";

export function init() {
  document.getElementById("key-create").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const form = ev.target;
    const body = {
      name: form.elements.name.value.trim(),
      rate_per_min: Number(form.elements.rate_per_min.value),
      concurrency: Number(form.elements.concurrency.value),
    };
    try {
      const created = await api("/console/api/keys", { method: "POST", body });
      showCreated(created);
      form.elements.name.value = "";
      await load();
    } catch (e) {
      flash(e.message);
    }
  });
  document.getElementById("key-created-close").addEventListener("click", hideCreated);
  document.getElementById("key-secret-copy").replaceWith(copyButton(() => secret, "Copy key", "key-secret-copy"));
}

export async function enter() {
  await load();
}

function showCreated(created) {
  secret = created.secret;
  document.getElementById("key-created-name").textContent = created.key.name + " (" + created.key.id + ")";
  document.getElementById("key-secret").textContent = created.secret;
  const box = clear(document.getElementById("key-snippets"));
  for (const s of created.snippets) {
    box.append(
      el("div", { class: "snippet" },
        el("div", { class: "snippet-head" },
          el("span", {}, el("strong", {}, s.client), " — ", el("span", { class: "hint" }, s.where)),
          copyButton(() => s.text)),
        el("pre", {}, s.text)),
    );
  }
  document.getElementById("key-created").hidden = false;
  flash("Key " + created.key.name + " created.", true);
}

function hideCreated() {
  secret = "";
  document.getElementById("key-secret").textContent = "";
  clear(document.getElementById("key-snippets"));
  document.getElementById("key-created").hidden = true;
}

async function load() {
  const { keys } = await api("/console/api/keys");
  const body = clear(document.querySelector("#keys-table tbody"));
  if (keys.length === 0) {
    body.append(el("tr", {}, el("td", { colspan: 8, class: "hint" }, "No keys yet: while none exists the API runs without keys (on loopback only).")));
  }
  for (const k of keys) body.append(row(k));
}

function row(k) {
  const active = !k.revoked;
  const rate = el("td", { class: "num", "data-label": "Runs/min" }, String(k.rate_per_min));
  const conc = el("td", { class: "num", "data-label": "At once" }, String(k.concurrency));
  const actions = el("div", { class: "cell-actions" });
  const tr = el("tr", { class: active ? "" : "revoked", "data-key-id": k.id, "data-key-name": k.name },
    el("td", { "data-label": "Name" }, el("strong", {}, k.name)),
    el("td", { "data-label": "ID" }, el("code", {}, k.id), " ", el("span", { class: "hint" }, k.prefix + "…")),
    el("td", { "data-label": "Created" }, formatTime(k.created)),
    el("td", { "data-label": "Last used" }, formatTime(k.last_used)),
    rate, conc,
    el("td", { "data-label": "Status" }, active ? "active" : "revoked " + formatTime(k.revoked)),
    el("td", {}, actions));
  if (!active) return tr;

  const edit = el("button", { type: "button", class: "small quiet", "data-action": "limits" }, "Limits");
  const revoke = el("button", { type: "button", class: "small quiet", "data-action": "revoke" }, "Revoke");
  actions.append(edit, revoke);

  edit.addEventListener("click", () => {
    const rateIn = el("input", { type: "number", min: 1, value: k.rate_per_min, name: "rate_per_min", "aria-label": "runs per minute" });
    const concIn = el("input", { type: "number", min: 1, value: k.concurrency, name: "concurrency", "aria-label": "at once" });
    clear(rate).append(rateIn);
    clear(conc).append(concIn);
    const save = el("button", { type: "button", class: "small", "data-action": "save" }, "Save");
    const cancel = el("button", { type: "button", class: "small quiet" }, "Cancel");
    clear(actions).append(save, cancel);
    cancel.addEventListener("click", () => load().catch((e) => flash(e.message)));
    save.addEventListener("click", async () => {
      try {
        await api(`/console/api/keys/${encodeURIComponent(k.id)}/limits`, {
          method: "POST",
          body: { rate_per_min: Number(rateIn.value), concurrency: Number(concIn.value) },
        });
        flash("Limits of " + k.name + " changed (calls in flight go on).", true);
        await load();
      } catch (e) {
        flash(e.message);
      }
    });
  });

  // Two steps rather than a dialog: a revoke cannot be undone.
  revoke.addEventListener("click", () => {
    const confirm = el("button", { type: "button", class: "small danger", "data-action": "confirm-revoke" }, "Revoke " + k.name + " now");
    const keep = el("button", { type: "button", class: "small quiet" }, "Keep");
    clear(actions).append(confirm, keep);
    keep.addEventListener("click", () => load().catch((e) => flash(e.message)));
    confirm.addEventListener("click", async () => {
      try {
        await api(`/console/api/keys/${encodeURIComponent(k.id)}/revoke`, { method: "POST" });
        flash("Key " + k.name + " revoked: its next request is refused.", true);
        await load();
      } catch (e) {
        flash(e.message);
      }
    });
  });
  return tr;
}
