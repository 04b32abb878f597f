// The console's entry point: the session, the pages and the navigation
// between them (#keys, #usage, #live, #sessions when offered, #playground).
import { api, flash, loadSession } from "./api.js";
import * as keys from "./keys.js";
import * as usage from "./usage.js";
import * as live from "./live.js";
import * as playground from "./playground.js";
import * as sessions from "./sessions.js";

const pages = { keys, usage, live, playground };
let current = null;

function show() {
  const name = (window.location.hash || "#keys").slice(1);
  const page = pages[name] ? name : "keys";
  flash("");
  for (const p of Object.keys(pages)) {
    document.getElementById("page-" + p).hidden = p !== page;
  }
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === page);
  }
  if (current && current !== page && pages[current].leave) pages[current].leave();
  current = page;
  pages[page].enter().catch((e) => flash(e.message));
}

async function start() {
  try {
    await loadSession();
  } catch (e) {
    flash(e.message);
    return;
  }
  try {
    if (await sessions.offered()) pages.sessions = sessions;
  } catch (e) {
    flash(e.message);
  }
  for (const p of Object.values(pages)) p.init();
  document.getElementById("signout").addEventListener("click", async () => {
    try {
      await api("/console/api/signout", { method: "POST" });
    } finally {
      window.location.assign("/console/signin");
    }
  });
  window.addEventListener("hashchange", show);
  show();
}

start();
