// The Playground: a request built from the form, run through the server's
// gate (recorded as the console), its output streamed while it runs and
// its result shown: exit code, outcome, stdout, stderr, notes, and
// returned images inline.
import { api, clear, currentSession, el, flash, formatBytes, formatMs, outcomeNames, tile } from "./api.js";

let info = null;
let running = null; // the AbortController of the run in flight
let objectURLs = [];

export function init() {
  document.getElementById("run-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run().catch((e) => finish("", e.message));
  });
  document.getElementById("run-cancel").addEventListener("click", () => running && running.abort());
  document.getElementById("run-add-file").addEventListener("click", () => addFileRow());
}

export async function enter() {
  if (info) return;
  info = await api("/console/api/runtimes");
  const sel = clear(document.getElementById("run-runtime"));
  for (const rt of info.runtimes || []) {
    sel.append(el("option", { value: rt.name }, rt.version ? `${rt.name} (${rt.version})` : rt.name));
  }
  const timeout = document.getElementById("run-timeout");
  Object.assign(timeout, { min: info.min_timeout_ms, max: info.max_timeout_ms, placeholder: String(info.default_timeout_ms) });
  const memory = document.getElementById("run-memory");
  Object.assign(memory, { min: info.min_memory_mb, max: info.max_memory_mb, placeholder: String(info.default_memory_mb) });
  if (!info.egress_allowed) {
    document.querySelector('#run-network option[value="egress"]').disabled = true;
  }
}

// addFileRow adds a file to send: a path and its text, or a file from this
// computer (sent as base64, so binary files arrive intact).
function addFileRow() {
  const path = el("input", { type: "text", placeholder: "/tmp/data.csv", "aria-label": "path in the sandbox", class: "file-path" });
  const text = el("textarea", { rows: 3, placeholder: "file content (or choose a file)", spellcheck: "false", class: "file-text" });
  const upload = el("input", { type: "file", "aria-label": "file from this computer", class: "file-upload" });
  const remove = el("button", { type: "button", class: "small quiet" }, "Remove");
  const row = el("div", { class: "file-row" }, path, remove, text, upload);
  remove.addEventListener("click", () => row.remove());
  upload.addEventListener("change", () => {
    text.disabled = upload.files.length > 0;
    if (upload.files.length && !path.value) path.value = "/tmp/" + upload.files[0].name;
  });
  document.getElementById("run-files").append(row);
}

async function buildRequest() {
  const req = {
    runtime: document.getElementById("run-runtime").value,
    code: document.getElementById("run-code").value,
  };
  const limits = {};
  const timeout = document.getElementById("run-timeout").value;
  const memory = document.getElementById("run-memory").value;
  if (timeout !== "") limits.timeout_ms = Number(timeout);
  if (memory !== "") limits.memory_mb = Number(memory);
  if (Object.keys(limits).length) req.limits = limits;
  const network = document.getElementById("run-network").value;
  if (network) req.network = network;

  const env = {};
  for (const line of document.getElementById("run-env").value.split("\n")) {
    if (!line.trim()) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`environment: "${line}" is not NAME=value`);
    env[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  if (Object.keys(env).length) req.env = env;

  const files = {};
  const binary = {};
  for (const row of document.querySelectorAll("#run-files .file-row")) {
    const path = row.querySelector(".file-path").value.trim();
    const upload = row.querySelector(".file-upload");
    if (!path) continue;
    if (upload.files.length) {
      binary[path] = await toBase64(upload.files[0]);
    } else {
      files[path] = row.querySelector(".file-text").value;
    }
  }
  if (Object.keys(files).length) req.files = files;
  if (Object.keys(binary).length) req.files_base64 = binary;

  const ret = document.getElementById("run-return").value.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
  if (ret.length) req.return_files = ret;
  return req;
}

function toBase64(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result).replace(/^data:[^,]*,/, ""));
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

async function run() {
  flash("");
  const req = await buildRequest();
  resetOutput();
  running = new AbortController();
  setRunning(true);
  const startedAt = performance.now();
  const status = document.getElementById("run-status");
  const tick = setInterval(() => (status.textContent = "running… " + formatMs(Math.round(performance.now() - startedAt))), 200);
  try {
    const resp = await fetch("/console/api/run", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": currentSession().csrf },
      body: JSON.stringify(req),
      signal: running.signal,
    });
    if (resp.status === 401) {
      window.location.assign("/console/signin");
      return;
    }
    if (!(resp.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      const data = await resp.json().catch(() => ({}));
      finish("", (data.error && data.error.message) || `HTTP ${resp.status}`);
      return;
    }
    await readEvents(resp.body);
  } catch (e) {
    finish("", e.name === "AbortError" ? "Cancelled: the sandbox was killed." : e.message);
  } finally {
    clearInterval(tick);
    setRunning(false);
    running = null;
  }
}

// readEvents reads the server-sent events of the run: output as it comes,
// then the result or an error.
async function readEvents(body) {
  const reader = body.getReader();
  const text = new TextDecoder();
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += text.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue; // a keepalive comment
      const payload = JSON.parse(data);
      if (event === "stdout" || event === "stderr") {
        const bytes = Uint8Array.from(atob(payload.b64 || ""), (c) => c.charCodeAt(0));
        document.getElementById("run-" + event).append(decoders[event].decode(bytes, { stream: true }));
      } else if (event === "started") {
        document.getElementById("run-status").dataset.started = "yes";
      } else if (event === "result") {
        showResult(payload.result, payload.preview_incomplete);
        return;
      } else if (event === "error") {
        finish("", payload.error.message);
        return;
      }
    }
  }
  finish("", "The server ended the stream without a result.");
}

function resetOutput() {
  for (const u of objectURLs) URL.revokeObjectURL(u);
  objectURLs = [];
  document.getElementById("run-output").hidden = false;
  clear(document.getElementById("run-summary"));
  clear(document.getElementById("run-stdout"));
  clear(document.getElementById("run-stderr"));
  clear(document.getElementById("run-images"));
  clear(document.getElementById("run-files-out"));
  const note = document.getElementById("run-note");
  note.hidden = true;
  note.textContent = "";
}

function setRunning(on) {
  document.getElementById("run-submit").disabled = on;
  document.getElementById("run-cancel").disabled = !on;
}

function finish(status, error) {
  document.getElementById("run-status").textContent = status;
  if (error) flash(error);
}

function showResult(res, previewIncomplete) {
  const kind = res.outcome === "success" ? "good" : res.outcome === "nonzero_exit" ? "warn" : "bad";
  clear(document.getElementById("run-summary")).append(
    tile("Exit code", String(res.exit_code), kind, "exit-code"),
    tile("Outcome", outcomeNames[res.outcome] || res.outcome, kind, "outcome"),
    tile("Time", formatMs(res.execution_ms), "", "time"),
    tile("Sandbox purged", res.state_purged ? "yes" : "no", res.state_purged ? "good" : "bad", "purged"),
  );
  // The result is complete; the streamed preview may not have been.
  document.getElementById("run-stdout").textContent = res.stdout;
  document.getElementById("run-stderr").textContent = res.stderr;
  const note = document.getElementById("run-note");
  note.textContent = res.note || "";
  note.hidden = !res.note;
  const images = document.getElementById("run-images");
  const others = document.getElementById("run-files-out");
  for (const [path, b64] of Object.entries(res.files || {})) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const type = imageType(path, bytes);
    const url = URL.createObjectURL(new Blob([bytes], { type: type || "application/octet-stream" }));
    objectURLs.push(url);
    const name = path.split("/").pop();
    if (type) {
      images.append(el("figure", {}, el("img", { src: url, alt: path, "data-path": path }), el("figcaption", {}, `${path} (${formatBytes(bytes.length)})`)));
    } else {
      others.append(el("p", {}, el("a", { href: url, download: name }, path), ` (${formatBytes(bytes.length)})`));
    }
  }
  finish(previewIncomplete ? "done (the live preview skipped some output; shown in full above)" : "done", "");
}

// imageType is the type of an image the page may show, from its first
// bytes (or its name, for SVG), or "" for any other file.
function imageType(path, b) {
  const starts = (...sig) => sig.every((v, i) => b[i] === v);
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif";
  if (starts(0x52, 0x49, 0x46, 0x46) && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50) return "image/webp";
  // An SVG in an <img> runs no script and loads nothing.
  if (/\.svg$/i.test(path)) return "image/svg+xml";
  return "";
}
