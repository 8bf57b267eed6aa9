// The confirmation dialog: shows a dry-run plan from the API before anything changes.
"use strict";

const Dialog = (() => {
  const { el, clear } = T;

  function section(title, items, test) {
    if (!items || !items.length) return null;
    return el(
      "section",
      { class: "plan-part", "data-test": test },
      el("h3", {}, title + " (" + items.length + ")"),
      el("ul", {}, items.slice(0, 50).map((item) => el("li", { class: "mono" }, item))),
      items.length > 50 ? el("p", { class: "muted" }, "… and " + (items.length - 50) + " more") : null,
    );
  }

  // The parts of a plan a person decides on, each from the plan's own data.
  function planParts(response, opts) {
    const plan = response.plan || {};
    const parts = [];
    parts.push(el("p", { class: "headline", "data-test": "plan-headline" }, plan.headline || ""));
    if (plan.details && plan.details.length) {
      parts.push(el("ul", { class: "details", "data-test": "plan-details" },
        plan.details.map((line) => el("li", {}, line))));
    }
    // A plan changes code when it has a head to reset to ("" for a chat's snapshots) or
    // files to write back (a chat's undo restores files with no head).
    const code = (plan.head !== null && plan.head !== undefined) || (plan.files || []).length > 0;
    if (code) {
      parts.push(section("files restored or deleted", (plan.files || []).map(([a, p]) => a + " " + p), "plan-files")
        || el("p", { class: "muted", "data-test": "plan-files" }, "files: unchanged"));
      parts.push(section("commits rolled back", (plan.commits_dropped || []).map(([s, m]) => s.slice(0, 10) + " " + m), "plan-commits"));
      parts.push(section("commits restored", (plan.commits_restored || []).map(([s, m]) => s.slice(0, 10) + " " + m), "plan-commits-restored"));
    } else if (plan.op === "fork") {
      parts.push(el("p", { class: "muted" }, "code: this session's files are not touched; the fork gets a copy of its own"));
    } else if (plan.op) {
      parts.push(el("p", { class: "muted" }, "code: files are kept as they are"));
    }
    parts.push(section("tasks", (plan.task_changes || []).map(([t, a, b]) => t + ": " + a + " → " + b), "plan-tasks"));
    const dropped = Object.entries(plan.messages_dropped || {}).filter(([, n]) => n).map(([k, n]) => k + ": " + n + " message(s)");
    parts.push(section("conversation dropped", dropped.concat((plan.threads_deleted || []).map((k) => k + ": whole thread")), "plan-conversation"));
    if (plan.conflicts && plan.conflicts.length) {
      let title = "uncommitted changes, LOST (not on any checkpoint)";
      if (plan.stash_message) title = "uncommitted changes, saved before anything changes";
      if (plan.keep && Object.keys(plan.keep).length) title = "files you changed, kept as they are";
      parts.push(section(title, plan.conflicts, "plan-stash"));
    }
    if (plan.events_dropped) parts.push(el("p", { class: "muted" }, "events dropped: " + plan.events_dropped));
    parts.push(section("warnings", plan.warnings || [], "plan-warnings"));
    if (response.live_run) {
      parts.push(el("p", { class: "warning", "data-test": "plan-live" },
        opts.liveText || ("a run (pid " + response.live_run + ") is driving this session: stop it first")));
    }
    parts.push(section("notes", response.notes || [], "plan-notes"));
    parts.push(undoLine(response));
    return parts.filter(Boolean);
  }

  // How to take it back, in every dialog and never folded away.
  function undoLine(response) {
    const plan = response.plan || {};
    const said = (response.text || "").split("\n").find((line) => line.startsWith("undo: "));
    if (said) return el("p", { class: "undo-line", "data-test": "plan-undo" }, said);
    if (plan.op === "reset_to_seed") return el("p", { class: "warning", "data-test": "plan-undo" }, "undo: none — this cannot be undone");
    if (plan.op === "fork") return el("p", { class: "undo-line", "data-test": "plan-undo" }, "undo: nothing to undo here — this session is left as it is; delete the fork to be rid of it");
    if (!plan.op) return null;
    return el("p", { class: "undo-line", "data-test": "plan-undo" }, "undo: the Undo button returns to the state before this");
  }

  // open({title, response?, lines?, warning?, confirmLabel?, danger?}) → Promise<boolean>
  function open(opts) {
    const dialog = document.getElementById("dialog");
    document.getElementById("dialog-title").textContent = opts.title;
    const warning = document.getElementById("dialog-warning");
    warning.hidden = !opts.warning;
    warning.textContent = opts.warning || "";
    const content = clear(document.getElementById("dialog-content"));
    if (opts.response) content.append(...planParts(opts.response, opts));
    for (const line of opts.lines || []) content.append(el("p", {}, line));
    const full = document.getElementById("dialog-full");
    const text = opts.response && opts.response.text;
    full.hidden = !text;
    document.getElementById("dialog-text").textContent = text || "";
    document.getElementById("dialog-error").hidden = true;
    const confirm = document.getElementById("dialog-confirm");
    confirm.textContent = opts.confirmLabel || "Confirm";
    confirm.className = opts.danger ? "danger" : "primary";
    const opener = document.activeElement;
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => {
        // Escape, Cancel or Confirm: the focus goes back where it was
        T.refocus(opener);
        resolve(dialog.returnValue === "confirm");
      }, { once: true });
      dialog.returnValue = "";
      dialog.showModal();
      // Open at the top (title, warning, headline), not scrolled to where the browser's
      // first focus landed; Cancel has the focus, so Enter never confirms by accident.
      document.querySelector("[data-test=dialog-cancel]").focus({ preventScroll: true });
      dialog.scrollTop = 0;
    });
  }

  return { open };
})();
