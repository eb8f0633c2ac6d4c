// Keeps the page current without reloading it: every data-refresh seconds it
// fetches this page's panels (?panels: {"now", "panels": {id: html}}) and
// replaces each panel's content in place, keeping open tracebacks open; every
// few seconds it moves the relative times ("3m ago") on, from the database
// clock the server last reported. A failed refresh keeps what is shown and
// says since when it is stale.
"use strict";
(function () {
  const body = document.body;
  const refresh = (parseFloat(body.dataset.refresh) || 10) * 1000;
  let offset = Date.parse(body.dataset.now) - Date.now(); // database clock - browser clock

  function span(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 48 * 3600) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  }

  function relative(iso, now) {
    const seconds = (Date.parse(iso) - now) / 1000;
    if (Math.abs(seconds) < 1) return "now";
    return seconds > 0 ? "in " + span(seconds) : span(-seconds) + " ago";
  }

  function tick() {
    const now = Date.now() + offset;
    for (const el of document.querySelectorAll(".rel[data-t]")) {
      const text = relative(el.dataset.t, now);
      el.textContent = el.closest("#updated") ? text : "(" + text + ")";
    }
  }

  function openDetails() {
    return new Set(Array.from(document.querySelectorAll("details[open][id]"), d => d.id));
  }

  async function update() {
    const stale = document.getElementById("stale");
    try {
      const url = location.pathname + "?panels";
      const response = await fetch(url, {headers: {Accept: "application/json"}, cache: "no-store"});
      const document_ = await response.json();
      if (!response.ok) throw new Error(document_.error || response.statusText);
      const opened = openDetails();
      for (const [id, html] of Object.entries(document_.panels)) {
        const panel = document.getElementById(id);
        if (panel) panel.innerHTML = html;
      }
      for (const id of opened) {
        const details = document.getElementById(id);
        if (details) details.open = true;
      }
      offset = Date.parse(document_.now) - Date.now();
      const updated = document.querySelector("#updated .rel");
      updated.dataset.t = document_.now;
      document.getElementById("now").textContent =
        document_.now.replace("T", " ").replace("Z", "");
      stale.hidden = true;
      body.dataset.refreshed = String((parseInt(body.dataset.refreshed || "0", 10)) + 1);
    } catch (error) {
      stale.hidden = false;
      stale.textContent = "· not refreshed: " + error.message;
    }
    tick();
  }

  tick();
  setInterval(tick, 5000);
  setInterval(update, refresh);
})();
