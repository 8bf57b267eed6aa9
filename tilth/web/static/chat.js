// A chat session's page: the conversation, a composer, the reply streamed as it is written,
// and a hover rewind menu on each of your messages. Text is only ever set with textContent.
"use strict";

const Chat = (() => {
  const { api, el, clear, toast, showError, sessionHref } = T;
  let app = null;
  let view = null;      // {list, input, send, status}
  let sending = false;
  let turns = new Map(); // turn number → {checkpoint, label, files_changed}

  function apiPath(verb) {
    return "/api/sessions/" + encodeURIComponent(app.id) + "/" + verb;
  }

  // ---- the transcript -------------------------------------------------------------------
  function userMessage(text, turn) {
    const node = el("div", { class: "msg user", "data-test": "chat-user", "data-turn": turn || "" },
      el("span", { class: "text" }, text));
    if (turn) {
      node.append(el("button", { type: "button", id: "rewind-turn-" + turn, class: "rewind menu-button", "data-test": "chat-rewind", title: "rewind or fork from this message", "aria-haspopup": "menu", "aria-label": "rewind or fork from turn " + turn, onclick: (e) => menu(e, turn) }, "⟲"));
    }
    return node;
  }

  function assistantMessage(text, tree) {
    const node = el("div", { class: "msg assistant", "data-test": "chat-assistant" }, el("div", { class: "text" }));
    if (tree) {
      node.replyText = text;
      node.classList.add("markdown");
      node.firstChild.append(...tree.map(markdownNode));
    } else setReply(node, text || "");
    return node;
  }

  // The server's Markdown tree (tilth/web/markdown.py): known tags, text set as text.
  const TAGS = new Set("p h1 h2 h3 h4 h5 h6 strong em s code pre ul ol li blockquote table thead tbody tr th td hr br a".split(" "));
  function markdownNode(item) {
    if (typeof item === "string") return document.createTextNode(item);
    const tag = TAGS.has(item.t) ? item.t : "span";
    const attrs = {};
    if (tag === "a" && typeof item.href === "string" && /^(https?:|mailto:)/i.test(item.href)) {
      attrs.href = item.href;
      attrs.rel = "noopener noreferrer";
      attrs.target = "_blank";
    }
    const made = el(tag, attrs);
    for (const child of item.c || []) made.append(markdownNode(child));
    return made;
  }

  // A reply's fenced code blocks (``` or ~~~) are set as code, in monospace with their
  // indentation; the rest stays as written. Everything is placed as text, never as HTML.
  function setReply(node, text) {
    node.replyText = text;
    const box = clear(node.firstChild);
    let prose = [];
    let code = null;
    const addProse = () => {
      const chunk = prose.join("\n").replace(/^\n+|\n+$/g, "");
      if (chunk) box.append(el("div", { class: "prose" }, chunk));
      prose = [];
    };
    const addCode = () => box.append(el("pre", { class: "code" }, el("code", {}, code.lines.join("\n"))));
    for (const line of text.split("\n")) {
      const fence = /^\s*(`{3,}|~{3,})/.exec(line);
      if (code === null && fence) { addProse(); code = { marker: fence[1], lines: [] }; continue; }
      if (code !== null && fence && line.trim() === fence[1] && fence[1].startsWith(code.marker)) { addCode(); code = null; continue; }
      (code === null ? prose : code.lines).push(line);
    }
    if (code !== null) addCode(); // a block still streaming
    addProse();
  }

  function toolLine(text, test) {
    return el("div", { class: "msg tool", "data-test": test || "chat-tool" }, text);
  }

  function errorLine(text) {
    return el("div", { class: "msg error", "data-test": "chat-error" }, "error: " + text + " (the turn stopped; the chat goes on)");
  }

  // The newest message stays in view (above the composer) unless the person scrolled up to
  // read: a page opens at its end, and a reply follows its text while it streams.
  function atEnd() {
    const page = document.documentElement;
    return window.innerHeight + window.scrollY >= page.scrollHeight - 80;
  }

  function toEnd() {
    window.scrollTo(0, document.documentElement.scrollHeight);
  }

  function render(history) {
    const follow = !view.shown || atEnd();
    const active = document.activeElement;  // kept across the redraw (the keyboard's place)
    view.shown = true;
    const list = clear(view.list);
    // a turn's model error goes after the turn's last message
    const errors = new Map();
    for (const e of history.errors || []) errors.set(e.turn, (errors.get(e.turn) || []).concat(e.error));
    let current = null;
    let calls = [];  // calls of the last reply whose results have not come yet
    const pending = () => { for (const call of calls) list.append(toolLine("→ " + call)); calls = []; };
    const flush = () => { pending(); for (const text of errors.get(current) || []) list.append(errorLine(text)); errors.delete(current); };
    for (const m of history.messages) {
      if (m.turn !== undefined && m.turn !== current) { flush(); current = m.turn; }
      if (m.role !== "tool") pending();
      if (m.role === "user" && !m.kind) list.append(userMessage(m.text, m.turn));
      else if (m.role === "user") list.append(toolLine(m.text, "chat-note"));
      else if (m.role === "assistant") {
        if (m.text) list.append(assistantMessage(m.text, m.markdown));
        calls = (m.calls || m.tools || []).slice();
      } else if (m.role === "tool") {
        // each result right under its own call
        if (calls.length) list.append(toolLine("→ " + calls.shift()));
        list.append(toolLine("  " + T.short(m.text, 300), "chat-tool-result"));
      }
    }
    flush();
    if (active && active.id && !document.contains(active)) T.refocus(active);
    if (follow) toEnd();
  }

  // ---- sending: the reply arrives as server-sent events in the POST's own response ------------
  async function send() {
    const text = view.input.value;
    if (!text.trim() || sending) return;
    sending = true;
    view.send.disabled = true;
    view.stop.disabled = false;
    view.status.textContent = "sending…";
    toEnd();
    let reply = null;
    let taken = false;
    try {
      const response = await fetch(apiPath("messages"), {
        method: "POST",
        headers: { Authorization: "Bearer " + T.token, "Content-Type": "application/json" },
        body: JSON.stringify({ text }),
      });
      if (!response.ok) {
        let data = null;
        try { data = await response.json(); } catch (err) { data = null; }
        throw new T.ApiError(response.status, data && data.error, data && data.hint);
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (!data) continue;
          const event = JSON.parse(data);
          if (event.type === "turn_started" && !taken) {
            taken = true;  // the server has the prompt now: the composer is free
            if (view.input.value === text) view.input.value = "";
          }
          reply = onChatEvent(event, reply);
        }
      }
    } catch (err) {
      showError(err);
    } finally {
      // A message the server refused stays in the composer, to fix and send again.
      if (!taken && !view.input.value) view.input.value = text;
      const follow = atEnd();
      sending = false;
      view.send.disabled = false;
      view.stop.disabled = true;
      view.status.textContent = "";
      if (follow) toEnd();
      await app.refresh();
    }
  }

  function onChatEvent(event, reply) {
    const list = view.list;
    const follow = atEnd();
    switch (event.type) {
      case "turn_started":
        list.append(userMessage(event.prompt, null));
        view.status.textContent = "turn " + event.turn + "…";
        reply = null;
        break;
      case "text":
        if (!reply) { reply = assistantMessage(""); list.append(reply); }
        setReply(reply, reply.replyText + event.text);
        document.body.dataset.streamed = String(Number(document.body.dataset.streamed || 0) + 1);
        break;
      case "tool_started":
        list.append(toolLine("→ " + (event.summary || event.name)));
        reply = null; // text after a tool call is a new reply
        break;
      case "tool_finished":
        list.append(toolLine("  " + (event.ok ? "" : "✗ ") + T.short(event.result || "", 300), "chat-tool-result"));
        break;
      case "notice":
        list.append(toolLine("note: " + event.text, "chat-note"));
        break;
      case "error":
        showError(new T.ApiError(0, event.error, event.hint));
        break;
      case "turn_finished":
        if (event.outcome === "error") list.append(errorLine(event.error || "the model call failed"));
        break;
      default:
        break;
    }
    if (follow) toEnd();
    return reply;
  }

  // Stop: the turn is interrupted as Ctrl-C interrupts it in a terminal; its reply stream
  // then ends with turn_finished (cancelled).
  async function stopTurn() {
    view.stop.disabled = true;
    view.status.textContent = "stopping…";
    try {
      await api("POST", apiPath("stop"), {});
    } catch (err) {
      showError(err);
    }
  }

  // ---- going back -----------------------------------------------------------------------
  function menu(e, turn) {
    const info = turns.get(turn);
    if (!info) return;
    T.popover(e.currentTarget, [
      { label: "Rewind code to before this message", test: "chat-rewind-code", run: () => rewind(info, "code") },
      { label: "Rewind conversation to before this message", test: "chat-rewind-conversation", run: () => rewind(info, "conversation") },
      { label: "Rewind both", test: "chat-rewind-both", run: () => rewind(info, "both") },
      { label: "Fork from here", test: "chat-fork", run: () => fork(info) },
    ], 300);
  }

  async function rewind(info, scope) {
    let preview;
    try {
      preview = await api("POST", apiPath("rewind"), { to: info.checkpoint, scope, dry_run: true });
    } catch (err) {
      showError(err);
      return;
    }
    const ok = await Dialog.open({ title: "Go back to before turn " + info.turn + " (" + scope + ")", response: preview, confirmLabel: "Rewind " + scope });
    if (!ok) return;
    try {
      const done = await api("POST", apiPath("rewind"), { to: info.checkpoint, scope });
      // after a conversation rewind the prompt of that turn comes back into the composer
      if (done.prompt) { view.input.value = done.prompt; view.input.focus(); }
      toast("back to before turn " + info.turn);
      await app.refresh();
    } catch (err) {
      showError(err);
    }
  }

  async function fork(info) {
    let preview;
    try {
      preview = await api("POST", apiPath("fork"), { at: info.checkpoint, dry_run: true });
    } catch (err) {
      showError(err);
      return;
    }
    const ok = await Dialog.open({
      title: "Fork a new chat at turn " + info.turn,
      response: preview,
      lines: ["A new chat session starts from the instant before turn " + info.turn + ", in a directory of its own; this one is left as it is."],
      confirmLabel: "Fork",
    });
    if (!ok) return;
    try {
      const made = await api("POST", apiPath("fork"), { at: info.checkpoint });
      toast("forked into " + made.id, "ok", { href: sessionHref(made.id), text: "open it" });
    } catch (err) {
      showError(err);
    }
  }

  async function undo() {
    let preview;
    try {
      preview = await api("POST", apiPath("undo"), { dry_run: true });
    } catch (err) {
      showError(err);
      return;
    }
    if (!(await Dialog.open({ title: "Undo the last go-back", response: preview, confirmLabel: "Undo" }))) return;
    try {
      await api("POST", apiPath("undo"), {});
      toast("undone");
      await app.refresh();
    } catch (err) {
      showError(err);
    }
  }

  // ---- the page ---------------------------------------------------------------------------
  function build(session) {
    const cp = session.checkpoint || {};
    const input = el("textarea", { "data-test": "composer", placeholder: "Ask for a change… (Ctrl+Enter sends)", rows: 3 });
    input.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); } });
    const sendButton = el("button", { type: "button", class: "primary", "data-test": "send", onclick: send }, "Send");
    const stopButton = el("button", { type: "button", "data-test": "stop-turn", title: "interrupt the running turn", disabled: true, onclick: stopTurn }, "Stop");
    const status = el("span", { class: "muted", "data-test": "chat-status" });
    const header = el("section", { class: "summary", "data-test": "summary" },
      el("h1", {}, el("span", { class: "mono" }, session.id), " ", el("span", { class: "status status-" + (session.state || session.status), "data-test": "session-status" }, session.state || session.status), " ", el("span", { class: "muted" }, "chat")),
      session.title ? el("p", { class: "about", "data-test": "session-title" }, session.title) : null,
      el("dl", {}, el("dt", {}, "directory"), el("dd", { class: "mono" }, cp.workspace || ""), el("dt", {}, "tokens"), el("dd", { "data-test": "tokens" }, String(cp.tokens_used || 0))),
      el("div", { class: "actions" }, el("button", { type: "button", "data-test": "undo", onclick: undo }, "Undo"), status));
    const list = el("div", { class: "chat", "data-test": "transcript" });
    clear(app.root).append(header, el("h2", {}, "conversation"), list, el("div", { class: "composer" }, input, sendButton, stopButton));
    view = { list, input, send: sendButton, stop: stopButton, status, shown: false };
  }

  async function update(session) {
    if (!view || !app.root.contains(view.list)) build(session);
    // the header's texts can change height; a page at its end stays there
    const follow = view.shown && atEnd();
    const status = app.root.querySelector("[data-test=session-status]");
    status.textContent = session.state || session.status;
    status.className = "status status-" + (session.state || session.status);
    app.root.querySelector("[data-test=tokens]").textContent = String((session.checkpoint || {}).tokens_used || 0);
    if (!sending) {
      // a turn another page sent (or one left running by a reload) can be stopped from here
      const busy = Boolean(session.turn_running);
      view.send.disabled = busy;
      view.stop.disabled = !busy;
      view.status.textContent = busy ? "a turn is running (sent from another page)…" : "";
    }
    if (follow) toEnd();
    if (sending) return;
    try {
      const history = await api("GET", apiPath("messages"));
      // A message sent while the history was on its way streams into the list: redrawing it
      // from a history without that reply would drop the reply from the page mid-turn (the
      // turn's end draws everything again).
      if (sending) return;
      turns = new Map(history.turns.map((t) => [t.turn, t]));
      render(history);
    } catch (err) {
      showError(err);
    }
  }

  function mount(ctx) { app = ctx; view = null; }
  function onEvent() {}
  function onReset() {}
  return { mount, update, onEvent, onReset };
})();
