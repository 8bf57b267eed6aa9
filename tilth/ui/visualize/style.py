"""The inline stylesheet and script of ``chat.html`` (no external assets, no network)."""

from __future__ import annotations

CSS = """
:root {
  --bg: #f7f7f5; --fg: #1d1f21; --dim: #6b6f76; --card: #ffffff; --line: #dcdcd6;
  --agent: #eef3fb; --tool: #f3f3ef; --eval: #f6effa; --ok: #1e7a3c; --ok-bg: #e8f5ec;
  --bad: #b3261e; --bad-bg: #fbeaea; --warn: #8a5a00; --warn-bg: #fdf4e0; --accent: #2f5fb3;
  --code: #f0f0ec;
}
@media (prefers-color-scheme: dark) {
  :root:not([data-theme=light]) {
    --bg: #16181b; --fg: #e3e5e8; --dim: #9097a0; --card: #1f2226; --line: #33373d;
    --agent: #1d2736; --tool: #22252a; --eval: #2a2133; --ok: #6fcf8a; --ok-bg: #16291d;
    --bad: #f28b82; --bad-bg: #33191b; --warn: #f0c36a; --warn-bg: #30270f; --accent: #8ab4f8;
    --code: #25282d;
  }
}
:root[data-theme=dark] {
  --bg: #16181b; --fg: #e3e5e8; --dim: #9097a0; --card: #1f2226; --line: #33373d;
  --agent: #1d2736; --tool: #22252a; --eval: #2a2133; --ok: #6fcf8a; --ok-bg: #16291d;
  --bad: #f28b82; --bad-bg: #33191b; --warn: #f0c36a; --warn-bg: #30270f; --accent: #8ab4f8;
  --code: #25282d;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 980px; margin: 0 auto; padding: 16px 20px 80px; }
header.top { position: sticky; top: 0; z-index: 2; background: var(--bg);
  border-bottom: 1px solid var(--line); padding: 10px 20px; }
header.top .row { max-width: 980px; margin: 0 auto; display: flex; flex-wrap: wrap;
  gap: 6px 14px; align-items: baseline; }
header.top h1 { font-size: 18px; margin: 0 8px 0 0; }
.stat { color: var(--dim); }
.stat b { color: var(--fg); font-weight: 600; }
.controls { max-width: 980px; margin: 6px auto 0; display: flex; flex-wrap: wrap; gap: 4px 12px;
  font-size: 13px; color: var(--dim); }
.controls label { cursor: pointer; }
.controls button { font: inherit; background: var(--card); color: var(--fg);
  border: 1px solid var(--line); border-radius: 4px; padding: 0 8px; cursor: pointer; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px;
  border: 1px solid var(--line); background: var(--card); color: var(--dim); }
.badge.ok { color: var(--ok); background: var(--ok-bg); border-color: transparent; }
.badge.bad { color: var(--bad); background: var(--bad-bg); border-color: transparent; }
.badge.warn, .badge.scripted { color: var(--warn); background: var(--warn-bg);
  border-color: transparent; }
section.panel { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 14px; margin: 14px 0; }
section.panel h2 { font-size: 15px; margin: 0 0 6px; }
section.panel h3 { font-size: 13px; margin: 10px 0 2px; color: var(--dim);
  text-transform: uppercase; letter-spacing: .04em; }
.blockers { border-left: 3px solid var(--bad); padding-left: 8px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--dim); font-weight: 600; }
.card { border: 1px solid var(--line); border-radius: 8px; background: var(--card);
  padding: 8px 12px; margin: 8px 0; overflow-wrap: anywhere; }
.card .head { display: flex; flex-wrap: wrap; gap: 4px 10px; align-items: baseline; }
.card .title { font-weight: 600; }
.card .meta { color: var(--dim); font-size: 12px; }
.card .when { margin-left: auto; color: var(--dim); font-size: 12px; }
.card.agent { background: var(--agent); margin-right: 60px; }
.card.tool { background: var(--tool); margin-left: 40px; }
.card.evaluator { background: var(--eval); margin-left: 60px; }
.card.ok { border-left: 4px solid var(--ok); }
.card.bad { border-left: 4px solid var(--bad); background: var(--bad-bg); }
.card.warn { border-left: 4px solid var(--warn); background: var(--warn-bg); }
.card.info { border-left: 4px solid var(--accent); }
.card.dim { color: var(--dim); background: transparent; }
.card.unknown { border-style: dashed; }
.text { white-space: pre-wrap; margin: 6px 0 2px; }
pre { background: var(--code); border-radius: 6px; padding: 6px 8px; margin: 6px 0 2px;
  overflow-x: auto; white-space: pre-wrap; font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo,
  Consolas, monospace; max-height: 480px; overflow-y: auto; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
details > summary { cursor: pointer; color: var(--dim); font-size: 12px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 0 12px; margin: 4px 0;
  font-size: 13px; }
dl.kv dt { color: var(--dim); }
dl.kv dd { margin: 0; white-space: pre-wrap; }
ul { margin: 4px 0; padding-left: 20px; }
.divider { display: flex; align-items: center; gap: 10px; margin: 26px 0 10px; color: var(--dim);
  font-weight: 600; }
.divider::before, .divider::after { content: ""; flex: 1; border-top: 1px solid var(--line); }
.status-done { color: var(--ok); } .status-failed { color: var(--bad); }
.status-in_progress { color: var(--warn); } .status-pending { color: var(--dim); }
.cp { margin: 4px 0 4px 12px; padding: 2px 8px; border-left: 2px dashed var(--accent);
  font-size: 12px; color: var(--dim); }
.cp .flag { color: var(--accent); font-weight: 600; }
.empty { color: var(--dim); font-style: italic; }
.hidden { display: none; }
"""

# Filtering and collapsing only; the page is complete without it.
JS = """
(function () {
  var root = document.documentElement;
  var toggle = document.getElementById("theme-toggle");
  if (toggle) toggle.addEventListener("click", function () {
    var dark = root.getAttribute("data-theme") === "dark" ||
      (!root.getAttribute("data-theme") && matchMedia("(prefers-color-scheme: dark)").matches);
    root.setAttribute("data-theme", dark ? "light" : "dark");
  });
  function apply() {
    var off = {};
    document.querySelectorAll("input[data-kind]").forEach(function (box) {
      if (!box.checked) off[box.getAttribute("data-kind")] = true;
    });
    document.querySelectorAll(".card[data-kind], .cp[data-kind]").forEach(function (card) {
      card.classList.toggle("hidden", !!off[card.getAttribute("data-kind")]);
    });
  }
  document.querySelectorAll("input[data-kind]").forEach(function (box) {
    box.addEventListener("change", apply);
  });
  function openAll(open) {
    document.querySelectorAll("main details").forEach(function (d) { d.open = open; });
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) expand.addEventListener("click", function () { openAll(true); });
  if (collapse) collapse.addEventListener("click", function () { openAll(false); });
})();
"""
