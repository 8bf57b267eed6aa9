// The sessions list: one row per session, newest first, refreshed every few seconds.
"use strict";

(() => {
  const { api, el, clear, showError, sessionHref } = T;

  function row(s) {
    const tasks = s.tasks_total ? s.tasks_done + "/" + s.tasks_total : "";
    const run = s.run && s.run.running ? " · running" : "";
    return el(
      "tr",
      { "data-test": "session-row", "data-session": s.id },
      el("td", {}, el("a", { href: sessionHref(s.id), class: "mono", "data-test": "session-link" }, s.id)),
      el("td", {}, s.kind),
      el("td", {}, el("span", { class: "status status-" + (s.state || s.status), "data-test": "session-state" }, (s.state || s.status) + run)),
      el("td", {}, tasks),
      el("td", { class: "about" }, s.title || "", s.parent ? el("span", { class: "muted" }, " (fork of " + s.parent + ")") : null),
      el("td", { class: "mono muted" }, s.source || ""),
      el("td", {}, s.last_stop || ""),
    );
  }

  async function load() {
    try {
      const data = await api("GET", "/api/sessions");
      const table = document.getElementById("sessions");
      const body = clear(table.querySelector("tbody"));
      for (const s of data.sessions) body.append(row(s));
      table.hidden = false;
      const loading = document.getElementById("loading");
      loading.textContent = data.sessions.length ? "" : "no sessions yet — start one with `tilth prep-feature <repo>` or `tilth chat`";
    } catch (err) {
      showError(err);
    }
  }

  load();
  setInterval(load, 5000);
})();
