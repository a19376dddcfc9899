"""A sweep spread over every visible GPU: one isolated worker per GPU, one shared queue of tasks.

Tuning a corpus is hours of GPU time on one card; a host with N GPUs should take 1/N of it.
``Spread`` runs one ``Isolated`` worker (isolation.py: it survives faults and hangs) per GPU,
each on its own thread in this process, and all of them take their next task from one queue,
so a fast GPU simply takes more. Every task is run exactly once and its result yielded
once, tagged with the GPU that produced it:

- a task whose kernel faults or hangs is FAILED on its GPU, as in a one-GPU sweep (the
  kernel's fault, not the GPU's), and that GPU's worker is replaced;
- a GPU whose worker cannot start (or restart) leaves the sweep: the task it had taken goes
  back to the queue, and the other GPUs take that and the rest;
- when no GPU is left, each task still queued is FAILED with the reasons the GPUs gave.

Results arrive in completion order, each with its index in the task list. ``Journal``
makes a sweep resumable: it appends each finished result to a JSON-lines file, keyed by
the caller, and a later run skips the keys it holds.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from .isolation import DEFAULT_WATCHDOG_S, RUNNERS, Isolated, TaskFailure


# The thread pools of the BLAS NumPy loads (OpenBLAS, MKL, OpenMP) size themselves to every core, once
# per process, and their threads spin between calls: with one worker per GPU each worker gets its
# share of the cores for the host's float64 references and checks, so that N workers do not run N
# times the cores' threads. Where the caller has set one of these, the caller's value stands.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_share(workers: int, cores: int | None = None) -> dict[str, str]:
    """The worker environment that gives each of ``workers`` processes its share of the cores."""
    share = max(1, (cores or os.cpu_count() or 1) // max(1, workers))
    return {name: str(share) for name in BLAS_THREADS}


def session_on(device: int):
    """A worker's Session on GPU ``device`` (module level: ``spawn`` pickles it by name)."""
    from ..session import Session

    return Session(device)


@dataclass(frozen=True)
class Done:
    """One task's result and the GPU (ordinal) whose worker produced it."""

    index: int
    result: Any
    device: int


_STOP = object()


class Spread:
    """``run(payloads)`` yields a ``Done`` for every payload, each once, over ``devices``."""

    def __init__(self, handler: Callable, finish: Callable | None = None, *, devices: Sequence[int],
                 watchdog_s: float = DEFAULT_WATCHDOG_S, session_factory: Callable[[int], Any] = session_on):
        if not devices:
            raise ValueError("Spread needs at least one GPU ordinal")
        self.handler, self.finish, self.watchdog_s = handler, finish, watchdog_s
        self.devices, self.session_factory = list(devices), session_factory
        self.workers_started: dict[int, int] = {}
        self.last_words: dict[int, Any] = {}
        self.lost: dict[int, str] = {}  # GPUs that left the sweep, with why
        self._in_flight = 0  # tasks taken and not yet answered or given back
        self._lock = threading.Lock()

    def run(self, payloads: Sequence[Any], groups: Sequence[Sequence[int]] | None = None) -> Iterator[Done]:
        """``groups``: task indices that must run on one GPU, in order (a shape's kernels share
        its prepared operands and reference); default, each task alone."""
        self._in_flight = 0
        tasks: queue.Queue = queue.Queue()
        for group in groups if groups is not None else [[i] for i in range(len(payloads))]:
            tasks.put(list(group))
        results: queue.Queue = queue.Queue()
        threads = [threading.Thread(target=self._serve, args=(device, payloads, tasks, results), daemon=True)
                   for device in self.devices]
        for thread in threads:
            thread.start()
        running = len(threads)
        while running:
            item = results.get()
            if item is _STOP:
                running -= 1
            else:
                yield item
        reason = "; ".join(f"GPU {d}: {why}" for d, why in sorted(self.lost.items())) or "no GPU took it"
        while not tasks.empty():
            for index in tasks.get():
                yield Done(index, TaskFailure(f"no GPU left to run it ({reason})"), -1)

    def _serve(self, device: int, payloads: Sequence[Any], tasks: queue.Queue, results: queue.Queue) -> None:
        """One GPU's thread: its worker takes tasks from the shared queue until it is empty."""
        runner = Isolated(self.handler, self.finish, watchdog_s=self.watchdog_s,
                          session_factory=functools.partial(self.session_factory, device),
                          worker_env=blas_share(len(self.devices)))
        handed: list[int] = []  # global index of each task taken by this runner, in order

        def take() -> Iterable[Any]:
            while True:
                with self._lock:
                    try:
                        group = tasks.get_nowait()
                        self._in_flight += len(group)
                    except queue.Empty:
                        if not self._in_flight:
                            return  # nothing queued, and no GPU can give a task back
                        group = None
                if group is None:
                    time.sleep(0.05)  # another GPU may yet leave and give its tasks back
                    continue
                handed.extend(group)  # the whole group: what is not yet run goes back with it
                for index in group:
                    yield payloads[index]

        answered = 0
        try:
            for local, result in runner.run(take()):
                answered = local + 1
                results.put(Done(handed[local], result, device))
                with self._lock:
                    self._in_flight -= 1
            self.last_words[device] = runner.last_word
        except Exception as exc:  # noqa: BLE001 - this GPU leaves; the others go on
            self.lost[device] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            with self._lock:
                unanswered = handed[answered:]  # taken (with the rest of its group), never run
                if unanswered:
                    tasks.put(unanswered)  # another GPU takes them
                self._in_flight -= len(unanswered)
        finally:
            self.workers_started[device] = runner.workers_started
            results.put(_STOP)


def runner_on(gpus: Sequence[int], handler: Callable, finish: Callable | None = None, *, isolation: str = "process",
              watchdog_s: float = DEFAULT_WATCHDOG_S):
    """One worker (``isolation``'s) on the one GPU of ``gpus``, or a Spread over several."""
    if len(gpus) > 1:
        if isolation != "process":
            raise ValueError("--gpus with several GPUs runs one worker process per GPU: it needs --isolation process")
        return Spread(handler, finish, devices=gpus, watchdog_s=watchdog_s)
    return RUNNERS[isolation](handler, finish, watchdog_s=watchdog_s,
                              session_factory=functools.partial(session_on, gpus[0]))


def completed(runner, tasks: Sequence, groups: Sequence[Sequence[int]], gpu: int) -> Iterator[tuple[int, Any, int]]:
    """(index, result, GPU ordinal) of every task as it finishes; ``groups``: the task indices
    that run on one GPU together; ``gpu``: the GPU of a runner that is not a Spread."""
    if not isinstance(runner, Spread):
        for index, result in runner.run(tasks):
            yield index, result, gpu
        return
    for done in runner.run(tasks, [list(g) for g in groups]):
        yield done.index, done.result, done.device


def in_order(runner, tasks: Sequence, groups: Sequence[Sequence[int]], gpu: int) -> Iterator[tuple[int, Any, int]]:
    """``completed``'s results in task order, whatever order several GPUs finish in."""
    arrived, upcoming = {}, 0
    for index, result, device in completed(runner, tasks, groups, gpu):
        arrived[index] = (result, device)
        while upcoming in arrived:
            yield (upcoming, *arrived.pop(upcoming))
            upcoming += 1


class Journal:
    """Finished results of a sweep, one JSON line each, so that a stopped sweep resumes."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def load(self) -> dict[str, Any]:
        """key -> result of every complete line (a line cut short by a crash is ignored)."""
        done: dict[str, Any] = {}
        if not self.path.exists():
            return done
        for line in self.path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "key" in entry:
                done[entry["key"]] = entry.get("result")
        return done

    def append(self, key: str, result: Any) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"key": key, "result": result}) + "\n")
            f.flush()
            os.fsync(f.fileno())
