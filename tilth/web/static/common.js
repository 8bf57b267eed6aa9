// Shared by every page: the token, the JSON API client, DOM building, toasts.
// Model-written text is only ever placed with textContent / text nodes (see el()).
"use strict";

const T = (() => {
  const meta = document.querySelector('meta[name="tilth-token"]');
  const token = meta ? meta.getAttribute("content") : "";
  // The token came in the URL once; keep it out of the address bar and history.
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }

  class ApiError extends Error {
    constructor(status, error, hint) {
      super(error || "request failed (" + status + ")");
      this.status = status;
      this.hint = hint || null;
    }
  }

  async function api(method, path, body) {
    const options = { method, headers: { Authorization: "Bearer " + token } };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (err) {
      throw new ApiError(0, "the tilth server cannot be reached", "is `tilth serve` still running?");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    if (!response.ok) {
      if (response.status === 401) stale();
      throw new ApiError(response.status, data && data.error, data && data.hint);
    }
    return data;
  }

  // The server no longer takes this page's token (it was restarted: a new token per start).
  // Said once, where it stays: every later request would fail the same way.
  function stale() {
    if (document.getElementById("stale")) return;
    const banner = el(
      "div",
      { id: "stale", role: "alert", "data-test": "stale" },
      "This page's key no longer works: `tilth serve` was restarted (each start makes a new key) ",
      "or this tab was opened from an old address. Open the address `tilth serve` printed ",
      "(127.0.0.1:<port>/?token=…) to go on."
    );
    document.body.prepend(banner);
    const live = document.getElementById("live");
    if (live) { live.textContent = "○ disconnected"; live.className = "live off"; }
  }

  // el("div", {class: "x", "data-test": "y"}, "text", otherNode): strings become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "onclick") node.addEventListener("click", value);
      else if (key === "hidden") node.hidden = true;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  let toastTimer = null;
  function toast(message, kind, link) {
    const box = document.getElementById("toast");
    if (!box) return;
    clear(box);
    box.className = "show " + (kind || "ok");
    box.append(el("span", { "data-test": "toast-text" }, message));
    if (link) box.append(" ", el("a", { href: link.href, "data-test": "toast-link" }, link.text));
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { box.className = ""; }, kind === "error" ? 12000 : 6000);
  }

  function showError(err) {
    const hint = err && err.hint ? " — " + err.hint : "";
    toast((err && err.message ? err.message : String(err)) + hint, "error");
  }

  function time(ts) {
    return ts ? String(ts).replace("T", " ").slice(0, 19) : "";
  }

  function sessionHref(id) {
    return "/s/" + encodeURIComponent(id);
  }

  function short(text, limit) {
    const s = typeof text === "string" ? text : JSON.stringify(text);
    if (s === undefined) return "";
    return s.length > limit ? s.slice(0, limit - 1) + "…" : s;
  }

  // A menu under ``anchor``: items [{label, test, stage?, run}]. The first item takes the
  // focus; ↑/↓ (and Home/End) move, Enter or Space chooses, Escape or Tab closes it, and
  // the focus goes back to the button that opened it.
  let closeMenu = null;

  // Focus ``node``, or the node that replaced it (same id) when the page was redrawn.
  function refocus(node) {
    if (!node || !node.focus) return;
    const now = document.contains(node) ? node : (node.id ? document.getElementById(node.id) : null);
    if (now) now.focus();
  }

  function popover(anchor, items, width) {
    if (closeMenu) closeMenu(false);
    const box = document.getElementById("popover");
    clear(box);
    box.setAttribute("role", "menu");
    const buttons = items.map((item) => el("button", {
      type: "button", role: "menuitem", "data-test": item.test, "data-stage": item.stage,
      onclick: () => { close(true); item.run(); },
    }, item.label));
    box.append(...buttons);
    const rect = anchor.getBoundingClientRect();
    box.style.top = (window.scrollY + rect.bottom + 4) + "px";
    box.style.left = Math.max(8, window.scrollX + rect.right - (width || 240)) + "px";
    box.hidden = false;
    anchor.setAttribute("aria-expanded", "true");
    function onKey(e) {
      const at = buttons.indexOf(document.activeElement);
      if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); close(false); }
      else if (e.key === "Tab") close(false);
      else if (e.key === "ArrowDown") { e.preventDefault(); buttons[(at + 1) % buttons.length].focus(); }
      else if (e.key === "ArrowUp") { e.preventDefault(); buttons[(at - 1 + buttons.length) % buttons.length].focus(); }
      else if (e.key === "Home") { e.preventDefault(); buttons[0].focus(); }
      else if (e.key === "End") { e.preventDefault(); buttons[buttons.length - 1].focus(); }
    }
    function onClick(e) { if (!box.contains(e.target) && e.target !== anchor) close(false); }
    function close(chosen) {
      box.hidden = true;
      anchor.setAttribute("aria-expanded", "false");
      document.removeEventListener("keydown", onKey, true);
      document.removeEventListener("click", onClick, true);
      closeMenu = null;
      // back to the button that opened it (a dialog the choice opens returns there too)
      refocus(anchor);
    }
    closeMenu = close;
    document.addEventListener("keydown", onKey, true);
    setTimeout(() => document.addEventListener("click", onClick, true), 0);
    if (buttons.length) buttons[0].focus();
  }

  return { token, api, ApiError, el, clear, toast, showError, time, sessionHref, short, stale, popover, refocus };
})();
