// The chat view: placeholder until the chat engine is wired in.
"use strict";

const Chat = (() => {
  let app = null;
  function mount(ctx) { app = ctx; }
  function update(session) {
    T.clear(app.root).append(T.el("p", { class: "muted" }, "chat session " + session.id));
  }
  function onEvent() {}
  function onReset() {}
  return { mount, update, onEvent, onReset };
})();
