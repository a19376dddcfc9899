"""Streams and events: the ones this process owns (Stream, Event) and the callers' (ExternalStream)."""

from __future__ import annotations

import weakref
from typing import Any

from .base import Resource, api
from .errors import check


class Stream(Resource):
    """A non-blocking stream: it never synchronises implicitly with the legacy stream."""

    def __init__(self):
        d = api()
        flags = d.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.handle = check(d.cuStreamCreate(flags), "cuStreamCreate")
        self._finalizer = weakref.finalize(self, api().cuStreamDestroy, self.handle)

    def synchronize(self) -> None:
        check(api().cuStreamSynchronize(self.handle), "cuStreamSynchronize")


class Event(Resource):
    """A timing event; ``elapsed_ms(start, end)`` reads the GPU time between two."""

    def __init__(self):
        d = api()
        self.handle = check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
        self._finalizer = weakref.finalize(self, api().cuEventDestroy, self.handle)

    def record(self, stream: Stream) -> None:
        check(api().cuEventRecord(self.handle, stream.handle), "cuEventRecord")

    def synchronize(self) -> None:
        check(api().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def query(self) -> bool:
        """True once the work before the event has completed (never blocks)."""
        d = api()
        (status,) = d.cuEventQuery(self.handle)
        if status == d.CUresult.CUDA_ERROR_NOT_READY:
            return False
        check(status, "cuEventQuery")
        return True

    @staticmethod
    def elapsed_ms(start: "Event", end: "Event") -> float:
        d = api()
        # CUDA 13 retired the v1 entry point; 12.x bindings have both.
        elapsed = getattr(d, "cuEventElapsedTime_v2", None) or d.cuEventElapsedTime
        return float(check(elapsed(start.handle, end.handle), "cuEventElapsedTime"))


# --- memory and streams this process does not own (the caller's arrays and streams) -------
class ExternalStream:
    """A CUDA stream owned by someone else (torch, CuPy, a raw handle): used, never destroyed.

    ``handle`` is the raw ``CUstream`` as an int (0: the legacy default stream; 1 and 2 are
    CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, the values the CUDA array interface and
    DLPack use too). It may be reassigned: a Plan points one ExternalStream at each caller's
    stream in turn, so the launches it packed once follow the stream of every call."""

    __slots__ = ("handle",)

    def __init__(self, handle: int = 0):
        self.handle = int(handle)

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol (version 0, the handle): how CuPy and others take it in."""
        return 0, self.handle

    def synchronize(self) -> None:
        check(api().cuStreamSynchronize(self.handle), "cuStreamSynchronize")


def stream_wait(stream: Any, event: "Event") -> None:
    """Make ``stream`` (anything with ``handle``: Stream, ExternalStream) wait for ``event``."""
    check(api().cuStreamWaitEvent(stream.handle, event.handle, 0), "cuStreamWaitEvent")


def stream_is_capturing(handle: int) -> bool:
    """Whether stream ``handle`` is being captured into a CUDA graph (torch.cuda.graph, CuPy,
    cuStreamBeginCapture) right now: such a stream may not wait on work recorded outside it."""
    d = api()
    status = check(d.cuStreamIsCapturing(int(handle)), "cuStreamIsCapturing")
    return status == d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE


