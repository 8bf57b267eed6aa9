// A best-of-N task's attempts under it: each attempt's figures, the winner and why, and
// "pick this one" behind the plan and a confirmation (the summary's Undo reverses it).
"use strict";

const Attempts = (() => {
  const { el } = T;

  // Not decided yet (a stop cut the run short): what it has done so far, never its figures.
  function undecided(row) {
    return row.decided === false;
  }

  function figure(row) {
    if (undecided(row)) return row.so_far ? row.so_far.summary : "undecided";
    return [
      row.passed ? "passed" : "failed",
      row.accepted ? "accepted" : "not accepted",
      row.failed_gates + " failed gate(s)",
      row.diff_lines + " diff line(s)",
      row.tokens + " token(s)",
    ].join(" · ");
  }

  function pick(row, act) {
    return () => act("pick", { session: row.session }, {
      title: "Pick attempt " + row.number + " (" + row.session + ") for " + row.task_id,
      lines: ["The session goes back to the task's start and this attempt's work takes the winner's place. Later tasks run again on Resume; Undo returns to the current winner."],
      confirmLabel: "Pick this one",
      doneText: row.session + " is now the winner of " + row.task_id + " (Undo reverses it)",
    });
  }

  // block(task, rows, act): act(path, body, dialog) is the page's plan → confirm → execute.
  function block(task, rows, act) {
    const mine = rows.filter((r) => r.task_id === task.id);
    if (!mine.length) return null;
    return el("section", { class: "attempts", "data-test": "attempts" },
      el("h3", {}, mine.length + " attempts"),
      el("ol", {}, mine.map((row) => el("li", { class: "attempt attempt-" + (undecided(row) ? "undecided" : row.state), "data-test": "attempt", "data-session": row.session },
        el("span", { class: "mono" }, "#" + row.number + " " + row.session),
        " ",
        el("strong", { "data-test": "attempt-state" }, row.state === "winner" ? "★ winner" : undecided(row) ? "undecided" : row.state),
        " ",
        el("span", { class: "muted", "data-test": undecided(row) ? "attempt-so-far" : "attempt-figures" }, figure(row)),
        row.reason ? el("p", { class: "reason", "data-test": "attempt-reason" }, row.reason) : null,
        row.state === "lost" ? el("button", { type: "button", "data-test": "pick-attempt", onclick: pick(row, act) }, "Pick this one") : null))));
  }

  return { block };
})();
