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

  return { token, api, ApiError, el, clear, toast, showError, time, sessionHref, short, stale };
})();
