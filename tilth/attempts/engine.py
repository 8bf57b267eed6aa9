"""The durable queue: attempts and queued sessions as DBOS Transact workflows.

One workflow drives one session to a stop (an attempt, or a session put on the queue
with ``tilth enqueue``). DBOS keeps only that the workflow exists, where it runs and
its result; Tilth's own journal and ``resume`` keep every stage exact inside it, so a
workflow DBOS starts again (its worker died) simply resumes the session, and no stage
commit is made twice. The system database is SQLite under ``$TILTH_HOME`` unless
``TILTH_DATABASE_URL`` names another (``postgresql://…``: shared between machines).

Each process is its own executor (``<host>-<pid>``). A worker that dies leaves its
workflows pending; any live process that sees one whose session nobody holds (its
lock is free twice in a row) hands that executor's workflows back to the queue.
DBOS is imported only here, and this module only when a queue is used.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID

from tilth.config import Settings
from tilth.errors import SessionLocked, TilthError
from tilth.session.events import utc_now
from tilth.session.store import Session
from tilth.stops import stops_deferred

QUEUE = "tilth-work"
"""Sessions put on the queue (``tilth enqueue``)."""
ATTEMPTS_QUEUE = "tilth-attempts"
"""The attempts of a task. Apart from ``QUEUE``: a queued session waits for its task's
attempts, so on one queue K such sessions took all K places and their attempts never
started (a ``tilth worker --parallel K`` with ``TILTH_ATTEMPTS`` > 1 hung for good)."""
QUEUES = (QUEUE, ATTEMPTS_QUEUE)
POLL_SECONDS = 0.05
"""How often the queue is polled while work put on it waits to start (DBOS's default, 1 s,
costs a second per wait)."""
IDLE_POLL_SECONDS = 0.5
"""How often it is polled once everything this process put on it has started: each poll is a
few queries holding the interpreter (at 50 ms, a tenth of a core that K attempts' threads
lack). A process that enqueues turns the fast polling back on first."""
WORKER_START_SECONDS = 5.0
"""How long a launch waits for DBOS to start the queue's worker thread (a look at the database
in a thread of DBOS's own, milliseconds unless the machine is busy; a second when the queue
was registered after DBOS looked). Past it the launch returns: DBOS looks again every second."""
TAKEOVER_SECONDS = 1.0
"""How often pending workflows are checked for a dead worker."""
PRUNE_SECONDS = 3600.0
"""How often a long-lived worker prunes the finished workflows again (``retention``)."""
STATUS_SECONDS = 0.5
"""How often a waiter reads its workflows' statuses while none of this process's ended (each
read is a query holding the interpreter ~2 ms: K attempts' threads are slowed by it)."""

Driver = Callable[[str, str], dict[str, Any]]
"""Drives the session ``(id, sessions_dir)`` to a stop; returns ``{reason, detail}``."""

_state: dict[str, Any] = {
    "launched": False,
    "driver": None,
    "url": None,
    "parallel": None,
    "poll": POLL_SECONDS,
}
_local: dict[str, Callable[[], dict[str, Any]]] = {}
_local_lock = threading.Lock()
_started_here: set[str] = set()
"""Workflows whose in-process driver started in this process (their ends are seen here)."""
_ended_here: dict[str, Any] = {}
"""What each of those returned (or raised), by workflow id: a waiter reads it here, at once,
instead of asking the database (each status read is a query holding the interpreter ~2-5 ms
that K attempts' threads lack; a waiter asking twice a second spent a third of a four-attempt
run's harness CPU on it)."""
_MISSING = object()
_suspects: dict[str, int] = {}
_ended = threading.Condition(_local_lock)
"""Notified when a workflow run by this process returns (every waiter looks at once)."""
_ends = [0]
"""How many workflows ended in this process (a waiter sleeps until it changes)."""


class QueueError(TilthError):
    """The durable queue cannot be used as asked."""


WORKFLOW = "tilth.drive_session"


@DBOS.workflow(name=WORKFLOW)
def drive_session(session_id: str, sessions_dir: str) -> dict[str, Any]:
    """Drive one session to a stop (a recovered workflow resumes it)."""
    workflow_id = DBOS.workflow_id or ""
    with _local_lock:
        local = _local.pop(session_id, None)
        if local is not None:
            _started_here.add(workflow_id)
    if local is not None:
        outcome: Any = None
        try:
            outcome = local()
            return outcome
        except BaseException as exc:  # the waiter gets it as DBOS would hand it back
            outcome = exc
            raise
        finally:
            with _ended:
                _ended_here[workflow_id] = outcome
                _ends[0] += 1
                _ended.notify_all()  # a waiter in this process takes it now
    driver: Driver | None = _state["driver"]
    if driver is None:
        raise QueueError("no driver: the queue was launched without one")
    return driver(session_id, sessions_dir)


def database_url(settings: Settings) -> str:
    """The system database: ``TILTH_DATABASE_URL``, else SQLite under ``$TILTH_HOME``."""
    if settings.database_url:
        return settings.database_url
    return f"sqlite:///{settings.home / 'queue.sqlite'}"


def launch(settings: Settings, driver: Driver, *, parallel: int | None) -> None:
    """Start DBOS in this process (once) with the queue taking ``parallel`` at a time."""
    _state["driver"] = driver
    url = database_url(settings)
    if _state["launched"] and _state["url"] == url:
        hurry()  # work is about to be put on it (the forks of a task's attempts)
        return
    shutdown()  # another database (a library user's second TILTH_HOME): start afresh
    settings.home.mkdir(parents=True, exist_ok=True)
    try:
        if url.startswith("sqlite:") and not (settings.home / "queue.sqlite").exists():
            _register_first(url, parallel or None)
        DBOS(
            config={
                "name": "tilth",
                "system_database_url": url,
                "executor_id": f"{socket.gethostname()}-{os.getpid()}",
                "log_level": "WARNING",
                "notification_listener_polling_interval_sec": POLL_SECONDS,
            }
        )
        earlier = _workers()  # a destroyed DBOS's, still ending
        DBOS.launch()
        _state.update(parallel=parallel or None, poll=None)
        hurry()
        _await_worker(earlier, time.monotonic() + WORKER_START_SECONDS)
    except TilthError:
        raise
    except Exception as exc:  # a database that cannot be reached or created
        raise QueueError(
            f"the durable queue could not start on {_shown(url)}: {type(exc).__name__}: {exc}",
            hint="check TILTH_DATABASE_URL (unset: SQLite under TILTH_HOME)",
        ) from None
    _state.update(launched=True, url=url)


def _workers() -> set[threading.Thread]:
    """DBOS's threads polling the queues (it names each ``queue-worker-<queue>``)."""
    names = {f"queue-worker-{name}" for name in QUEUES}
    return {thread for thread in threading.enumerate() if thread.name in names}


def _await_worker(earlier: set[threading.Thread], deadline: float) -> None:
    """Return once each queue has a thread polling it that is not one of ``earlier``, or at
    ``deadline``.

    ``DBOS.launch`` starts a thread that looks for queues in the database and then starts a
    polling thread for each: on a busy machine that look came after the launch returned, so
    the queue a launch promises polled was not yet (a caller checking found no poller).
    """
    while (
        len({thread.name for thread in _workers() - earlier}) < len(QUEUES)
        and time.monotonic() < deadline
    ):
        time.sleep(0.002)


def _register_first(url: str, parallel: int | None) -> None:
    """Create a new system database with the queue in it before DBOS starts: DBOS looks
    for queues when it starts and then once a second, so a queue registered after its
    launch (a first run on a new ``TILTH_HOME``) waited up to a second for its first poll."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=url)
    try:
        client._sys_db.run_migrations()  # a client does not create the tables
        for name in QUEUES:
            client.register_queue(
                name, worker_concurrency=parallel, polling_interval_sec=POLL_SECONDS
            )
    finally:
        client.destroy()


def hurry() -> None:
    """Poll the queue often: work put on it now starts within ``POLL_SECONDS``."""
    _poll(POLL_SECONDS)


def _poll(seconds: float) -> None:
    """Set how often the queue is polled (a row of the system database, which every
    process's queue thread reads before each poll; its sleep at the time still ends first)."""
    if _state["poll"] == seconds:
        return

    def register() -> None:
        for name in QUEUES:
            DBOS.register_queue(
                name,
                worker_concurrency=_state["parallel"],
                polling_interval_sec=seconds,
                on_conflict="always_update",
            )

    with stops_deferred():
        _off_the_loop(register)
    _state["poll"] = seconds


def _off_the_loop(call: Callable[[], object]) -> None:
    """Make a synchronous DBOS call, which DBOS refuses in a thread whose event loop is
    running (a notebook's, a web app's): there, in a short-lived thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        call()
        return
    failed: list[BaseException] = []

    def make() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller below
            failed.append(exc)

    thread = threading.Thread(target=make, name="tilth-queue-call")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _shown(url: str) -> str:
    """``url`` without a password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://…@{rest.split('@', 1)[1]}"
    return url


def shutdown() -> None:
    """Stop DBOS in this process (tests, a worker asked to stop)."""
    if _state["launched"]:
        DBOS.destroy(destroy_registry=False)
        _state["launched"] = False


def enqueue_from_outside(settings: Settings, sessions: list[Session]) -> list[str]:
    """Put ``sessions`` on the queue from a process that takes no work (``tilth enqueue``):
    a DBOS client, so nothing here starts running them. Their workflow ids."""
    from dbos import DBOSClient

    settings.home.mkdir(parents=True, exist_ok=True)
    client = DBOSClient(system_database_url=database_url(settings))
    try:
        # A client does not create the tables; the first enqueue may come before any worker.
        client._sys_db.run_migrations()
        ids = []
        for session in sessions:
            stamp = utc_now().replace(":", "").replace(".", "").replace("-", "")
            workflow_id = f"session-{session.id}-{stamp}"
            client.enqueue(
                {"queue_name": QUEUE, "workflow_name": WORKFLOW, "workflow_id": workflow_id},
                session.id,
                str(session.dir.parent),
            )
            ids.append(workflow_id)
        return ids
    finally:
        client.destroy()


def enqueue_attempt(
    session: Session, *, local: Callable[[], dict[str, Any]] | None, again: bool
) -> str:
    """The attempt ``session``'s workflow: the one queued before while it is pending (a
    parent that crashed waits for it, never runs it twice) or when it ended and ``again``
    is False; a new one when it ended and ``again`` (it was interrupted mid-task)."""
    base = f"attempt-{session.id}"
    with stops_deferred():
        found = DBOS.list_workflows(workflow_id_prefix=base, load_input=False, load_output=False)
    workflow_id = base
    if found:
        latest = max(found, key=lambda status: status.created_at or 0)
        workflow_id = latest.workflow_id
        if again and latest.status not in ("PENDING", "ENQUEUED"):
            # Numbered past every one kept: pruning may have deleted earlier ones, and a
            # number taken again would hand back that workflow's old result, not run it.
            taken = [_suffix(base, status.workflow_id) for status in found]
            workflow_id = f"{base}-{max(taken) + 1}"
    return _enqueue(session, workflow_id, local)


def _suffix(base: str, workflow_id: str) -> int:
    """The number of the workflow ``<base>-<n>`` (0 for ``base`` itself)."""
    tail = workflow_id[len(base) + 1 :]
    return int(tail) if tail.isdigit() else 0


def _enqueue(session: Session, workflow_id: str, local: Callable[[], dict[str, Any]] | None) -> str:
    if local is not None:
        with _local_lock:
            _local[session.id] = local
    hurry()
    queue = DBOS.retrieve_queue(ATTEMPTS_QUEUE)
    if queue is None:
        raise QueueError("the durable queue is not running in this process")
    with SetWorkflowID(workflow_id), stops_deferred():
        queue.enqueue(drive_session, session.id, str(session.dir.parent))
    return workflow_id


def wait(workflow_ids: list[str], *, seconds: float | None = None) -> list[Any]:
    """Wait for every workflow to end, at most ``seconds`` (handing a dead worker's back
    meanwhile); their results, the exception each raised, or None for one still going.

    A workflow this process runs is followed here, without a query (``_ended_here``); the
    database is asked only about the others (still queued, or taken by another worker)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    done: dict[str, Any] = {}
    last_check = 0.0
    next_look = 0.0
    hot_until = 0.0
    while True:
        with _ended:
            seen = _ends[0]  # an end after this wakes the sleep below
            for wid in workflow_ids:
                if wid in _ended_here and wid not in done:
                    done[wid] = _ended_here[wid]
            elsewhere = [w for w in workflow_ids if w not in done and w not in _started_here]
        now = time.monotonic()
        if not elsewhere:
            _poll(IDLE_POLL_SECONDS)  # all of them run here: nothing of ours to hand out
        elif now >= next_look:
            if not _look(elsewhere, done):
                _poll(IDLE_POLL_SECONDS)  # all of them started: nothing to hand out soon
            # Right after one ended its status is written within moments: look often.
            next_look = now + (POLL_SECONDS if now < hot_until else STATUS_SECONDS)
        if elsewhere and time.monotonic() - last_check > TAKEOVER_SECONDS:
            take_over_dead()  # one of ours may sit with a worker that died
            last_check = time.monotonic()
        if len(done) == len(workflow_ids):
            break
        pause = POLL_SECONDS if elsewhere else TAKEOVER_SECONDS
        if deadline is not None:
            if time.monotonic() >= deadline:
                break
            pause = min(pause, deadline - time.monotonic())
        if _await_an_end(seen, pause):
            hot_until = time.monotonic() + 2.0
            next_look = 0.0
    with _ended:
        # Handed out: forget them, so a long-lived process (a worker, `tilth serve`) does not
        # keep every result it ever saw; a later wait for one asks the database.
        for wid in done:
            if _ended_here.pop(wid, _MISSING) is not _MISSING:
                _started_here.discard(wid)
    return [done.get(wid) for wid in workflow_ids]


def _await_an_end(seen: int, seconds: float) -> bool:
    """Sleep until more than ``seen`` workflows ended here or ``seconds`` pass; True when
    one did."""
    with _ended:
        return _ended.wait_for(lambda: _ends[0] != seen, timeout=max(seconds, 0.0))


def _look(workflow_ids: list[str], done: dict[str, Any]) -> bool:
    """Note the result (or raised exception) of every workflow that ended since last time,
    its status read in one query for all; True while one of them waits on the queue."""
    waiting = False
    with stops_deferred():
        found = DBOS.list_workflows(workflow_ids=workflow_ids, load_input=False, load_output=False)
    for status in found:
        wid = status.workflow_id
        waiting = waiting or status.status == "ENQUEUED"
        if status.status in ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            try:
                done[wid] = DBOS.retrieve_workflow(wid).get_result()
            except Exception as exc:  # the workflow's own failure, reported per attempt
                done[wid] = exc
    return waiting


def take_over_dead() -> list[str]:
    """Hand back to the queue the workflows of workers that died; the executors freed."""
    mine = DBOS.executor_id
    freed: list[str] = []
    pending = [
        status
        for name in QUEUES
        for status in DBOS.list_workflows(status="PENDING", queue_name=name)
    ]
    for status in pending:
        executor = status.executor_id or ""
        if executor == mine or executor in freed:
            continue
        args = status.input.get("args") if isinstance(status.input, dict) else None
        if not args or len(args) < 2:
            continue
        session = Session(str(args[0]), _path(str(args[1])) / str(args[0]))
        if not _unheld(session):
            _suspects.pop(status.workflow_id, None)
            continue
        seen = _suspects.get(status.workflow_id, 0) + 1
        _suspects[status.workflow_id] = seen
        if seen >= 2:  # free twice in a row: not a worker about to take the lock
            DBOS._recover_pending_workflows([executor])
            freed.append(executor)
    return freed


def _path(text: str) -> Path:
    return Path(text)


def _unheld(session: Session) -> bool:
    """True when no process holds ``session``'s lock (nobody is driving it)."""
    if not session.dir.is_dir():
        return False
    try:
        with session.lock():
            return True
    except SessionLocked:
        return False


FINISHED = ["SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"]


def finished(*, ended_before: str | None = None, past: int = 0) -> list[Any]:
    """The finished workflows (statuses, with their input) that ended before the ISO time
    ``ended_before``, or, without it, all but the newest ``past``."""
    found: list[Any] = []

    def look() -> None:
        if ended_before is not None:
            query: dict[str, Any] = {"completed_before": ended_before}
        else:
            query = {"sort_desc": True, "offset": past}
        found.extend(DBOS.list_workflows(status=FINISHED, load_output=False, **query))

    with stops_deferred():
        _off_the_loop(look)
    return found


def delete(workflow_ids: list[str]) -> None:
    """Delete these workflows from the system database (DBOS's own ``delete_workflows``)."""
    with stops_deferred():
        _off_the_loop(lambda: DBOS.delete_workflows(workflow_ids))


def work(
    settings: Settings, driver: Driver, *, parallel: int | None, stop: threading.Event
) -> None:
    """Take work from the queue until ``stop`` is set (``tilth worker``), pruning finished
    workflows when it starts and every ``PRUNE_SECONDS``."""
    from tilth.attempts.retention import tidy

    launch(settings, driver, parallel=parallel)
    tidy(settings)
    pruned = time.monotonic()
    while not stop.wait(TAKEOVER_SECONDS):
        take_over_dead()
        if time.monotonic() - pruned > PRUNE_SECONDS:
            tidy(settings)
            pruned = time.monotonic()
