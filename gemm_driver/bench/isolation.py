"""Fault isolation: run a sweep's tasks in a worker process the parent can replace.

A kernel that faults (an illegal address, a trap) leaves its CUDA context in a sticky
error: every later call in that context fails, the next kernel's module load included. A
kernel that never ends blocks every synchronize after it. Neither may cost the results
measured before, or the cases after. So the sweep's GPU work runs in one worker process
(``spawn``ed: a fork after CUDA initialisation is not safe) while the parent holds the
results:

- the parent sends one task at a time and the worker answers with its result; the worker
  checks its context after every task (``cuCtxSynchronize``) and, if the context is dead,
  says so and exits;
- the parent replaces a worker that died, said its context is dead, or went silent for
  longer than the watchdog, marks the task in flight FAILED under its own name with the
  reason, and goes on with the next task in a fresh worker (a new context);
- the worker ignores Ctrl-C; the parent stops it and keeps what finished.

The worker sends a heartbeat (``beat``) when a task's GPU work starts, and the watchdog
times from the last message: preparing a case (drawing data, the float64 reference,
compiling) is CPU work under a separate, longer limit.

The cost when nothing fails is one process start (imports, context creation) and one
pickled message per case; the in-process ``Inline`` runner runs the same handlers for a
run without isolation (``--isolation off``).

A task handler is a module-level function ``handler(session, state, payload, beat)``;
``state`` is a dict kept for the worker's life (a prepared case, a timer) and ``close``
in it, if present, is called at the end. ``finish(session, state)`` handlers give the
worker's last word (e.g. the clock snapshot).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ..cuda.errors import GemmDriverError, GpuUnavailableError

PREPARE_LIMIT_S = 1800.0  # CPU phase of a task: a 16384^3 float64 reference, cold compiles
DEFAULT_WATCHDOG_S = 120.0  # GPU phase: far above any verified-then-timed case of the sweep
START_LIMIT_S = 300.0  # a worker's imports and context creation


class WorkerError(GemmDriverError):
    """The worker could not start (no GPU, no driver): the same for every task, so it stops the run."""


@dataclass
class TaskFailure:
    """A task that did not return: the worker faulted, hung, or raised."""

    reason: str


Handler = Callable[[Any, dict, Any, Callable[[], None]], Any]


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def kept(state: dict, key: Any, make: Callable[[], Any]) -> Any:
    """The prepared case (any closable value) for ``key``, made once and kept in the
    worker's ``state`` while consecutive tasks share ``key``; the one before is closed."""
    if state.get("kept_key") != key:
        if state.get("kept") is not None:
            state.pop("kept").close()
        state["kept_key"] = None  # a ``make`` that raises leaves nothing half-kept
        state["kept"] = make()
        state["kept_key"] = key
    return state["kept"]


def release_kept(state: dict) -> None:
    if state.get("kept") is not None:
        state.pop("kept").close()


def _close_state(state: dict) -> None:
    close = state.pop("close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - the context may be dead; nothing to save
            pass


# --- the worker side --------------------------------------------------------------------
def new_session():
    """The worker's Session (a module-level function: ``spawn`` pickles it by name)."""
    from ..session import Session

    return Session()


def _worker_main(conn, handler: Handler, finish: Callable | None, session_factory) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C does
    try:
        session = session_factory()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        message = str(exc).splitlines()[0] if isinstance(exc, GemmDriverError) and str(exc) else _one_line(exc)
        conn.send(("fatal", message, isinstance(exc, GpuUnavailableError)))
        return
    state: dict = {}
    conn.send(("ready", None))
    try:
        while True:
            message = conn.recv()
            if message is None:
                break
            index, payload = message
            if index == "finish":
                conn.send(("finished", finish(session, state) if finish else None))
                continue
            try:
                result = handler(session, state, payload, lambda: conn.send(("beat", index)))
            except Exception as exc:  # noqa: BLE001 - a bug or an unexpected error: this task fails, the run goes on
                result = TaskFailure(f"error in the harness: {_one_line(exc)}")
            dead = None
            try:  # a sticky error (a fault) shows here; the result is sent with it
                session.context.synchronize()
            except Exception as exc:  # noqa: BLE001
                dead = _one_line(exc)
            conn.send(("done", index, result, dead))
            if dead:
                return  # this context is done; the parent starts a new worker
    finally:
        _close_state(state)
        try:
            session.close()
        except Exception:  # noqa: BLE001 - a dead context cannot be closed cleanly; the exit frees it
            pass


# --- the parent side --------------------------------------------------------------------
_SPAWN_LOCK = threading.Lock()  # os.environ is the process's: one worker spawned with extra variables at a time


@contextlib.contextmanager
def _environment(extra: dict[str, str]):
    """``extra`` in os.environ while a worker is spawned (it inherits the environment at its
    start), where the caller has not set them; as it was after."""
    with _SPAWN_LOCK:
        added = {name: value for name, value in extra.items() if name not in os.environ}
        os.environ.update(added)
        try:
            yield
        finally:
            for name in added:
                os.environ.pop(name, None)


class Isolated:
    """Runs tasks in a worker process; replaces it after a fault or a hang. ``worker_env``:
    variables the worker starts with (where this process has not set them)."""

    def __init__(self, handler: Handler, finish: Callable | None = None, *, watchdog_s: float = DEFAULT_WATCHDOG_S,
                 session_factory: Callable = new_session, worker_env: dict[str, str] | None = None):
        self.handler, self.finish, self.watchdog_s = handler, finish, watchdog_s
        self.session_factory, self.worker_env = session_factory, dict(worker_env or {})
        self._ctx = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self._exitcode = None
        self.workers_started = 0
        self.last_word: Any = None

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker_main, daemon=True,
                                    args=(child, self.handler, self.finish, self.session_factory))
        try:
            with _environment(self.worker_env):
                process.start()  # e.g. spawn refuses a script without an ``if __name__ == "__main__"`` guard
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self._process, self._conn = process, parent
        self.workers_started += 1
        reply = self._receive(START_LIMIT_S)
        if reply is None or reply[0] == "eof":
            reply = ("fatal", "the worker process ended before it was ready", False)
        if reply[0] != "ready":
            self._kill()
            raise (GpuUnavailableError if reply[2] else WorkerError)(reply[1])

    def _receive(self, limit_s: float):
        """The worker's next message; ("eof",) when it died; None when it stayed silent
        for ``limit_s``."""
        try:
            if self._conn.poll(limit_s):
                return self._conn.recv()
        except (EOFError, OSError):
            return ("eof",)
        return None

    def _stop(self) -> None:
        if self._process is None:
            return
        try:
            self._conn.send(None)
        except (OSError, ValueError):
            pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()  # a hung kernel: the driver ends it with the process
            self._process.join(timeout=30)
        self._conn.close()
        self._process = self._conn = None

    def _kill(self) -> None:
        if self._process is not None:
            self._exitcode = self._process.exitcode
            self._process.kill()
            self._process.join(timeout=30)
            self._conn.close()
            self._process = self._conn = None

    def run(self, payloads: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        """Yield (index, result or TaskFailure) for every payload, in order."""
        try:
            for index, payload in enumerate(payloads):
                yield index, self._run_one(index, payload)
            if self.finish is not None:
                if self._process is None:
                    self._start()
                self._conn.send(("finish", None))
                reply = self._receive(START_LIMIT_S)
                self.last_word = reply[1] if reply and reply[0] == "finished" else None
        finally:
            self.close()

    def _run_one(self, index: int, payload: Any) -> Any:
        if self._process is None:
            self._start()
        self._conn.send((index, payload))
        limit = PREPARE_LIMIT_S
        while True:
            started = time.monotonic()
            message = self._receive(limit)
            if message is None:  # silent: a hung kernel (or a hung library call)
                silent = time.monotonic() - started
                self._kill()
                return TaskFailure(f"hung: no progress for {silent:.0f} s (watchdog {limit:g} s); "
                                   "its worker process was stopped")
            if message[0] == "eof":  # the pipe closed: the worker died (a signal, os._exit)
                self._process.join(timeout=10)
                self._kill()
                return TaskFailure(f"the worker process died (exit code {self._exitcode}) while running it")
            if message[0] == "beat":
                limit = self.watchdog_s
                continue
            _, _, result, dead = message
            if dead:  # the task's own fault: its result says so; its worker is replaced
                self._kill()
                if not isinstance(result, TaskFailure) and getattr(result, "status", "FAILED") != "FAILED":
                    result = TaskFailure(f"left the context in an error: {dead}")
            return result

    def close(self) -> None:
        self._stop()


class Inline:
    """The same handlers in this process: no isolation, no watchdog (``--isolation off``)."""

    def __init__(self, handler: Handler, finish: Callable | None = None, *, session_factory: Callable = new_session,
                 **_: Any):
        self.handler, self.finish, self.session_factory = handler, finish, session_factory
        self.workers_started = 0
        self.last_word: Any = None

    def run(self, payloads: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        state: dict = {}
        with self.session_factory() as session:
            try:
                for index, payload in enumerate(payloads):
                    yield index, self.handler(session, state, payload, lambda: None)
                if self.finish is not None:
                    self.last_word = self.finish(session, state)
            finally:
                _close_state(state)


RUNNERS = {"process": Isolated, "off": Inline}
