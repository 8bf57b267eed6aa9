// One session's page: load it, pick the view (run timeline or chat), follow its event log.
"use strict";

(() => {
  const { api, showError } = T;
  const id = decodeURIComponent(location.pathname.split("/")[2] || "");
  const root = document.getElementById("app");
  document.getElementById("crumb-id").textContent = id;
  const base = "/api/sessions/" + encodeURIComponent(id);
  let view = null;
  let pending = null;
  let running = false;
  let loading = null;

  async function refresh() {
    if (loading) return loading;
    loading = (async () => {
      try {
        const [session, checkpoints] = await Promise.all([api("GET", base), api("GET", base + "/checkpoints")]);
        const next = session.kind === "chat" ? Chat : Timeline;
        if (view !== next) {
          view = next;
          view.mount({ id, root, refresh, base });
        }
        // A chat turn ends with no event after its last one (the server clears turn_running
        // a moment later): keep looking while one is shown as running, or its page would
        // keep Send disabled.
        running = Boolean(session.locked_by) || Boolean(session.run && session.run.running) ||
          Boolean(session.turn_running);
        view.update(session, checkpoints);
        document.body.dataset.loaded = "1";
      } catch (err) {
        showError(err);
      } finally {
        loading = null;
      }
    })();
    return loading;
  }

  // Many events arrive in bursts: one refresh for each burst.
  function soon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; refresh(); }, 250);
  }

  function follow() {
    const live = document.getElementById("live");
    const source = new EventSource(base + "/events");
    source.onopen = () => { live.textContent = "● live"; live.className = "live on"; };
    source.onerror = () => {
      live.textContent = "○ reconnecting";
      live.className = "live off";
      // A refused stream is not retried by the browser: ask why (a stale key says so).
      if (source.readyState === EventSource.CLOSED) {
        live.textContent = "○ disconnected";
        api("GET", base).then(() => setTimeout(follow, 3000), () => {});
      }
    };
    source.onmessage = (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch (err) { return; }
      if (view) view.onEvent(event);
      document.body.dataset.lastSeq = String(event.seq || 0);
      soon();
    };
    source.addEventListener("reset", () => { if (view) view.onReset(); soon(); });
  }

  refresh().then(follow);
  // A run can stop without writing an event (a crash): look again now and then while one is live.
  setInterval(() => { if (running) refresh(); }, 3000);
})();
