// The console's calls to its own API, and small helpers every page uses.
// Text from the server only ever goes into the page through textContent
// (el() below), never as HTML.

let session = null;

// ApiError is a non-2xx answer: the API's {"error": {code, message, field}}.
export class ApiError extends Error {
  constructor(status, detail) {
    super(detail.message || `HTTP ${status}`);
    this.status = status;
    this.code = detail.code || "";
    this.field = detail.field || "";
    this.reason = detail.reason || "";
  }
}

// loadSession reads the session (its CSRF token, this server's URL); a
// browser without one goes to the sign-in page.
export async function loadSession() {
  session = await api("/console/api/session");
  return session;
}

export function currentSession() {
  return session;
}

// api calls the console's API: GETs as they are, other methods with the
// session's CSRF token and a JSON body.
export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, credentials: "same-origin", signal, headers: {} };
  if (method !== "GET") {
    init.headers["X-CSRF-Token"] = session ? session.csrf : "";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body === undefined ? {} : body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 401) {
    window.location.assign("/console/signin");
    throw new ApiError(401, { message: "signed out" });
  }
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    throw new ApiError(resp.status, data.error || {});
  }
  return data;
}

// el builds an element: attributes (class, data-*, on... as listeners),
// then children (strings become text).
export function el(tag, attrs = {}, ...children) {
  const node = tag.includes(":") ? document.createElementNS("http://www.w3.org/2000/svg", tag.split(":")[1]) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      node.addEventListener(k.slice(2), v);
    } else if (k === "text") {
      node.textContent = v;
    } else {
      node.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// flash shows a message above the page (an error unless ok).
export function flash(message, ok = false) {
  const f = document.getElementById("flash");
  f.textContent = message;
  f.classList.toggle("ok", ok);
  f.hidden = !message;
  if (message) window.scrollTo({ top: 0 });
}

export function formatBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  return (ms / 60000).toFixed(1) + " min";
}

export function formatTime(iso) {
  if (!iso) return "never";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function formatCount(n) {
  return (n || 0).toLocaleString();
}

// tile is one figure in a grid of tiles.
export function tile(label, value, kind = "", id = "") {
  return el("div", { class: "tile " + kind, "data-tile": id || undefined }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

// copyButton copies text to the clipboard, saying when it did.
export function copyButton(getText, label = "Copy", id) {
  const b = el("button", { type: "button", class: "small quiet", id });
  b.textContent = label;
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(getText());
      b.textContent = "Copied";
    } catch {
      // No clipboard (a page not on https or localhost): select it instead.
      b.textContent = "Select and copy";
    }
    setTimeout(() => (b.textContent = label), 1500);
  });
  return b;
}

// Names of outcomes on the pages.
export const outcomeNames = {
  success: "ok",
  nonzero_exit: "error",
  timeout: "timeout",
  memory_limit: "memory",
  error: "sandbox failure",
  cancelled: "cancelled",
};
