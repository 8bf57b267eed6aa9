// A run session's page: summary and actions, tasks → stages → turns, the live event feed.
// Every go-back asks the API for the dry-run plan, shows it, and only then executes it.
"use strict";

const Timeline = (() => {
  const { api, el, clear, toast, showError, time, short, sessionHref } = T;
  const FEED_LIMIT = 300;
  let app = null;        // {id, root, refresh}
  let data = null;       // {session, checkpoints}
  const openTurns = new Set();
  const openParts = new Set();  // other <details> a person opened ("out|T-001|planning", ...)
  const byTurn = new Map();     // "actor|task|stage|turn" → events
  const verdicts = new Map();   // "task|stage" → evaluator_verdict payloads
  let feed = null;

  // ---- events -------------------------------------------------------------------------
  function turnKey(actor, task, stage, turn) {
    return [actor || "", task || "", stage || "", turn === null || turn === undefined ? "" : turn].join("|");
  }

  function index(ev) {
    const p = ev.payload || {};
    if (ev.type === "evaluator_verdict") {
      const key = (p.task_id || "") + "|" + (p.stage || "");
      if (!verdicts.has(key)) verdicts.set(key, []);
      verdicts.get(key).push(p);
    }
    if (p.turn !== undefined && p.turn !== null && (ev.type === "tool_call" || ev.type === "tool_result" || ev.type === "model_call")) {
      const key = turnKey(p.actor, p.task_id, p.stage, p.turn);
      if (!byTurn.has(key)) byTurn.set(key, []);
      byTurn.get(key).push(ev);
    }
  }

  function summary(ev) {
    const p = ev.payload || {};
    switch (ev.type) {
      case "tool_call": return p.tool + " " + short(p.args, 240);
      case "tool_result": return (p.tool || "") + " → " + short(p.result_preview || "", 200);
      case "model_call": return (p.model || "") + (p.tool_calls ? " asked for " + p.tool_calls.join(", ") : "");
      case "evaluator_verdict": return p.verdict + (p.rejection_category ? " (" + p.rejection_category + ")" : "") + ": " + short(p.concern || "", 240);
      case "stage_completed": return (p.task_id || "") + " " + (p.stage || "") + " done";
      case "task_start": return (p.task_id || "") + " " + short(p.title || "", 120);
      case "task_failed": return (p.task_id || "") + " failed: " + (p.reason || "");
      case "stop": return (p.reason || "") + (p.detail ? ": " + short(p.detail, 200) : "");
      case "rewind": case "restart": case "undo": case "fork": return short(p, 200);
      case "prompt_assembled": return (p.actor || "") + " prompt, " + (p.chars || 0) + " chars";
      default: return short(p, 160);
    }
  }

  function feedRow(ev) {
    const p = ev.payload || {};
    const where = [p.task_id, p.stage, p.turn !== undefined && p.turn !== null ? "turn " + p.turn : null].filter(Boolean).join(" · ");
    return el("li", { class: "ev ev-" + ev.type, "data-test": "feed-event", "data-seq": ev.seq },
      el("span", { class: "seq" }, "#" + ev.seq),
      el("span", { class: "type" }, ev.type),
      el("span", { class: "who" }, p.actor || ""),
      el("span", { class: "where" }, where),
      el("span", { class: "what" }, summary(ev)));
  }

  function onEvent(ev) {
    index(ev);
    if (!feed) return;
    feed.prepend(feedRow(ev));
    while (feed.childNodes.length > FEED_LIMIT) feed.removeChild(feed.lastChild);
  }

  function onReset() {
    byTurn.clear();
    verdicts.clear();
    if (feed) clear(feed);
  }

  // ---- actions ------------------------------------------------------------------------
  async function act(path, body, dialog) {
    let preview;
    try {
      preview = await api("POST", path, { ...body, dry_run: true });
    } catch (err) {
      showError(err);
      return null;
    }
    const ok = await Dialog.open({ ...dialog, response: preview });
    if (!ok) return null;
    try {
      const done = await api("POST", path, { ...body, dry_run: false });
      toast(dialog.doneText || "done");
      await app.refresh();
      return done;
    } catch (err) {
      showError(err);
      return null;
    }
  }

  function rewind(cp, scope) {
    const what = { code: "code", conversation: "conversation", both: "code and conversation" }[scope];
    return act(apiPath("rewind"), { to: cp.id, scope }, {
      title: "Rewind " + what + " to " + cp.id,
      confirmLabel: "Rewind " + scope,
      doneText: "rewound " + what + " to " + cp.id,
    });
  }

  async function fork(cp) {
    let preview = null;
    try {
      preview = await api("POST", apiPath("fork"), { at: cp.id, dry_run: true });
    } catch (err) {
      showError(err);
      return;
    }
    const ok = await Dialog.open({
      title: "Fork a new session at " + cp.id,
      response: preview,
      lines: ["A new session (its own id, branch and worktree) starts from " + cp.id + " (" + cp.label + "). This session is left as it is."],
      confirmLabel: "Fork",
    });
    if (!ok) return;
    try {
      const made = await api("POST", apiPath("fork"), { at: cp.id });
      toast("forked into " + made.id, "ok", { href: sessionHref(made.id), text: "open it" });
    } catch (err) {
      showError(err);
    }
  }

  function restart(task, stage) {
    const body = { task: task.id };
    if (stage) body.from = stage;
    return act(apiPath("restart"), body, {
      title: "Restart " + task.id + (stage ? " from " + stage : " (the whole task)"),
      confirmLabel: "Restart",
      liveText: "a run is driving this session: confirming stops it first (it stays resumable)",
      doneText: task.id + " restarted; it is pending (Resume runs it)",
    });
  }

  function resetToSeed() {
    return (async () => {
      let preview;
      try {
        preview = await api("POST", apiPath("reset-to-seed"), { dry_run: true });
      } catch (err) {
        showError(err);
        return;
      }
      const ok = await Dialog.open({
        title: "Reset session " + app.id + " to its seed",
        warning: preview.warning,
        response: preview,
        confirmLabel: "Erase the run and reset",
        danger: true,
      });
      if (!ok) return;
      try {
        await api("POST", apiPath("reset-to-seed"), { dry_run: false });
        toast("session is back at its seed (status prepared)");
        await app.refresh();
      } catch (err) {
        showError(err);
      }
    })();
  }

  function undo() {
    return act(apiPath("undo"), {}, { title: "Undo the last go-back", confirmLabel: "Undo", doneText: "undone" });
  }

  async function resume() {
    try {
      const run = await api("POST", apiPath("resume"), {});
      toast("resuming in the background (pid " + run.pid + ")");
      await app.refresh();
    } catch (err) {
      showError(err);
    }
  }

  async function stop() {
    try {
      const result = await api("POST", apiPath("stop"), {});
      toast(result.stopped ? "stopped the run (pid " + result.stopped + ")" : "nothing was running");
      await app.refresh();
    } catch (err) {
      showError(err);
    }
  }

  function apiPath(verb) {
    return "/api/sessions/" + encodeURIComponent(app.id) + "/" + verb;
  }

  // ---- menus --------------------------------------------------------------------------
  function popover(anchor, items) {
    T.popover(anchor, items, 240);
  }

  function turnMenu(cp) {
    return (e) => popover(e.currentTarget, [
      { label: "Rewind code to here", test: "rewind-code", run: () => rewind(cp, "code") },
      { label: "Rewind conversation to here", test: "rewind-conversation", run: () => rewind(cp, "conversation") },
      { label: "Rewind code and conversation", test: "rewind-both", run: () => rewind(cp, "both") },
      { label: "Fork from here", test: "fork-here", run: () => fork(cp) },
    ]);
  }

  function restartMenu(task) {
    return (e) => {
      // Only the stages this task has completed are offered (the first stage = the whole task).
      const items = [{ label: "Restart the whole task", test: "restart-option", stage: "", run: () => restart(task, null) }];
      for (const stage of task.completed_stages || []) {
        if (stage === task.stages[0]) continue;
        items.push({ label: "Restart from " + stage, test: "restart-option", stage, run: () => restart(task, stage) });
      }
      popover(e.currentTarget, items);
    };
  }

  // ---- rendering ----------------------------------------------------------------------
  // A <details> that stays open across the rebuilds a live session causes.
  function keptOpen(key, attrs, ...children) {
    const details = el("details", attrs, ...children);
    if (openParts.has(key)) details.open = true;
    details.addEventListener("toggle", () => {
      if (details.open) openParts.add(key); else openParts.delete(key);
    });
    return details;
  }

  function turnDetails(cp) {
    const events = byTurn.get(turnKey(cp.actor, cp.task_id, cp.stage, cp.turn)) || [];
    if (!events.length) return el("p", { class: "muted" }, "no tool calls recorded for this turn");
    return el("ul", { class: "calls" }, events.filter((ev) => ev.type !== "model_call").map((ev) => {
      const p = ev.payload || {};
      if (ev.type === "tool_call") {
        return el("li", { "data-test": "tool-call" }, el("b", {}, p.tool || "tool"), el("pre", { class: "args" }, JSON.stringify(p.args, null, 2)));
      }
      return el("li", { class: "result" + (p.is_error ? " error" : "") }, "→ ", p.result_preview || "");
    }));
  }

  function turnRow(cp) {
    const details = el("details", { class: "turn", "data-test": "turn", "data-cp": cp.id });
    if (openTurns.has(cp.id)) details.open = true;
    const files = (cp.files_changed || []).length ? (cp.files_changed.length + " file(s): " + cp.files_changed.slice(0, 4).join(", ")) : "";
    details.append(el("summary", {},
      el("span", { class: "cp mono" }, cp.id),
      el("span", { class: "label" }, (cp.turn !== null ? "turn " + cp.turn + " · " : "") + cp.label),
      files ? el("span", { class: "files", "data-test": "turn-files" }, files) : null,
      (cp.gaps || []).length ? el("span", { class: "gaps", title: cp.gaps.join("\n") }, "gaps: " + cp.gaps.length) : null,
      el("button", { type: "button", class: "menu-button", id: "menu-turn-" + cp.id, "data-test": "turn-menu", title: "rewind or fork", onclick: (e) => { e.preventDefault(); turnMenu(cp)(e); } }, "⟲")));
    const body = el("div", { class: "turn-body" });
    if ((cp.gaps || []).length) body.append(el("p", { class: "gaps-list" }, "not captured: " + cp.gaps.join("; ")));
    details.append(body);
    const fill = () => { clear(body); if ((cp.gaps || []).length) body.append(el("p", { class: "gaps-list" }, "not captured: " + cp.gaps.join("; "))); body.append(turnDetails(cp)); };
    if (details.open) fill();
    details.addEventListener("toggle", () => {
      if (details.open) { openTurns.add(cp.id); fill(); } else openTurns.delete(cp.id);
    });
    return details;
  }

  function stageBlock(task, stage, cps) {
    const done = (task.completed_stages || []).includes(stage);
    const current = task.state && task.state.current_stage === stage && task.status === "in_progress";
    const stageCp = cps.filter((c) => c.kind === "stage" && c.stage === stage).pop();
    const turns = cps.filter((c) => c.kind === "turn" && c.stage === stage);
    const output = task.state && task.state.outputs ? task.state.outputs[stage] : undefined;
    const vs = verdicts.get(task.id + "|" + stage) || [];
    return el("li", { class: "stage" + (done ? " done" : current ? " current" : ""), "data-test": "stage", "data-stage": stage },
      el("div", { class: "stage-head", "data-cp": stageCp ? stageCp.id : null },
        el("span", { class: "stage-name" }, stage),
        el("span", { class: "stage-state" }, done ? "done" : current ? "running" : "pending"),
        stageCp ? el("span", { class: "mono muted" }, stageCp.id + " " + stageCp.head.slice(0, 10)) : null,
        stageCp && (stageCp.files_changed || []).length ? el("span", { class: "files" }, stageCp.files_changed.length + " file(s) changed") : null,
        stageCp ? el("button", { type: "button", class: "menu-button", id: "menu-stage-" + stageCp.id, "data-test": "turn-menu", title: "rewind or fork", onclick: turnMenu(stageCp) }, "⟲") : null),
      vs.map((v) => el("p", { class: "verdict verdict-" + v.verdict, "data-test": "verdict" },
        el("b", {}, v.verdict), v.rejection_category ? " (" + v.rejection_category + ")" : "", ": ", v.concern || "",
        v.next_step ? el("span", { class: "muted" }, " — next: " + v.next_step) : null,
        (v.evidence || []).length ? el("ul", {}, v.evidence.map((x) => el("li", {}, x))) : null)),
      output !== undefined && output !== null ? keptOpen("out|" + task.id + "|" + stage, { class: "output" }, el("summary", {}, "output"), el("pre", { "data-test": "stage-output" }, typeof output === "string" ? output : JSON.stringify(output, null, 2))) : null,
      turns.length ? el("div", { class: "turns" }, turns.map(turnRow)) : null);
  }

  function taskBlock(task) {
    const cps = data.checkpoints.filter((c) => c.task_id === task.id);
    const start = cps.find((c) => c.kind === "task_start");
    // restart goes back to where the task started: its task_start checkpoint or base commit
    const started = Boolean(start) || Boolean(task.state && task.state.base_commit);
    return el("article", { class: "task status-" + task.status, "data-test": "task", "data-task": task.id },
      el("header", { "data-cp": start ? start.id : null },
        el("span", { class: "task-id mono" }, task.id),
        el("span", { class: "task-title", "data-test": "task-title" }, task.title || ""),
        el("span", { class: "tier" }, task.tier),
        el("span", { class: "status status-" + task.status, "data-test": "task-status" }, task.status || "pending"),
        start ? el("button", { type: "button", class: "menu-button", id: "menu-start-" + start.id, "data-test": "turn-menu", title: "rewind or fork to the task's start", onclick: turnMenu(start) }, "⟲ start") : null,
        started
          ? el("button", { type: "button", class: "restart", id: "restart-" + task.id, "data-test": "restart-menu", onclick: restartMenu(task) }, "Restart ▾")
          : el("button", { type: "button", class: "restart", id: "restart-" + task.id, "data-test": "restart-menu", disabled: true, title: "not started yet: nothing to restart" }, "Restart ▾")),
      task.description ? el("p", { class: "description" }, task.description) : null,
      (task.acceptance_criteria || []).length ? el("ul", { class: "criteria" }, task.acceptance_criteria.map((c) => el("li", {}, c))) : null,
      el("ol", { class: "stages" }, task.stages.map((stage) => stageBlock(task, stage, cps))),
      Attempts.block(task, data.session.attempts || [], (path, body, dialog) => act(apiPath("attempts/" + path), body, dialog)));
  }

  function header(s) {
    const cp = s.checkpoint || {};
    const run = s.run;
    let runText = s.locked_by ? "in use by pid " + s.locked_by : "idle";
    if (run && run.running) runText = "running in the background (pid " + run.pid + ")";
    else if (run && run.exit_code !== null && run.exit_code !== undefined) runText = "last background run exited " + run.exit_code;
    const live = Boolean(s.locked_by) || Boolean(run && run.running);
    return el("section", { class: "summary", "data-test": "summary" },
      el("h1", {}, el("span", { class: "mono" }, s.id), " ", el("span", { class: "status status-" + (s.state || s.status), "data-test": "session-status" }, s.state || s.status)),
      s.title ? el("p", { class: "about", "data-test": "session-title" }, s.title) : null,
      el("dl", {},
        el("dt", {}, "source"), el("dd", { class: "mono" }, cp.source || ""),
        el("dt", {}, "branch"), el("dd", { class: "mono" }, cp.branch || ""),
        el("dt", {}, "tokens"), el("dd", {}, String(cp.tokens_used || 0)),
        el("dt", {}, "last stop"), el("dd", {}, s.last_stop || "—"),
        el("dt", {}, "run"), el("dd", { "data-test": "run-state" }, runText)),
      run && run.output ? keptOpen("run-output", { class: "run-output" }, el("summary", {}, "output of the last run"), el("pre", {}, run.output)) : null,
      el("div", { class: "actions" },
        el("button", { type: "button", class: "primary", id: "act-resume", "data-test": "resume", disabled: live, onclick: resume }, "Resume"),
        el("button", { type: "button", id: "act-stop", "data-test": "stop", disabled: !live, onclick: stop }, "Stop"),
        el("button", { type: "button", id: "act-undo", "data-test": "undo", onclick: undo }, "Undo"),
        el("button", { type: "button", class: "danger", id: "act-reset-seed", "data-test": "reset-seed", onclick: resetToSeed }, "Reset to seed…")));
  }

  function others(checkpoints) {
    const loose = checkpoints.filter((c) => !c.task_id);
    if (!loose.length) return null;
    return el("section", { class: "loose" }, el("h2", {}, "session checkpoints"),
      el("div", { class: "turns" }, loose.map((cp) => cp.kind === "turn" ? turnRow(cp) : el("div", { class: "cp-row", "data-test": "checkpoint", "data-cp": cp.id },
        el("span", { class: "cp mono" }, cp.id), el("span", { class: "label" }, cp.label), el("span", { class: "muted" }, time(cp.ts)),
        el("button", { type: "button", class: "menu-button", id: "menu-cp-" + cp.id, "data-test": "turn-menu", onclick: turnMenu(cp) }, "⟲")))));
  }

  function update(session, checkpoints) {
    data = { session, checkpoints: checkpoints.checkpoints || [] };
    // A redraw replaces every button: the one a keyboard user is on keeps the focus (by id).
    const active = document.activeElement;
    const focusedId = active && active.id && app.root.contains(active) ? active.id : null;
    const root = clear(app.root);
    root.append(header(session));
    if ((checkpoints.problems || []).length) root.append(el("p", { class: "warning" }, checkpoints.problems.join("; ")));
    root.append(others(data.checkpoints) || "");
    root.append(el("section", { class: "tasks" }, el("h2", {}, "tasks"), session.tasks.map(taskBlock)));
    if (!feed) feed = el("ol", { class: "feed", "data-test": "feed" });
    root.append(el("section", { class: "feed-box" }, el("h2", {}, "events (newest first)"), feed));
    if (focusedId) refocusId(focusedId);
  }

  function refocusId(id) {
    const again = document.getElementById(id);
    if (again) again.focus();
  }

  function mount(ctx) {
    app = ctx;
  }

  return { mount, update, onEvent, onReset };
})();
