"""CUDA graphs from stream capture: record launches once, replay them with one host call.

Used by the timing layer as an independent check that host launch overhead stays out of
the measured GPU time: a replayed graph runs its kernels back to back with no Python in
between. Written against the signatures common to cuda-bindings 12.x and 13.x
(``cuGraphInstantiate(graph, flags)``); older spellings are tried as a fallback.
"""

from __future__ import annotations

import weakref
from typing import Callable

from .driver import Resource, Stream, api
from .errors import check


def _instantiate(graph):
    d = api()
    try:
        return check(d.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    except TypeError:  # a bindings version whose cuGraphInstantiate wants other arguments
        return check(d.cuGraphInstantiateWithFlags(graph, 0), "cuGraphInstantiateWithFlags")


def _destroy(graph, graph_exec) -> None:
    d = api()
    if graph_exec is not None:
        d.cuGraphExecDestroy(graph_exec)
    if graph is not None:
        d.cuGraphDestroy(graph)


class Graph(Resource):
    """The work that ``record()`` enqueues on ``stream``, captured and instantiated."""

    def __init__(self, stream: Stream, record: Callable[[], None]):
        d = api()
        self.stream = stream
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(d.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
        try:
            record()
        finally:  # always end the capture, or the stream stays unusable
            graph = check(d.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        try:
            self.exec = _instantiate(graph)
        except Exception:
            d.cuGraphDestroy(graph)
            raise
        self.graph = graph
        self._finalizer = weakref.finalize(self, _destroy, graph, self.exec)

    def launch(self, stream: Stream | None = None) -> None:
        """Enqueue one replay of the whole graph."""
        target = stream or self.stream
        check(api().cuGraphLaunch(self.exec, target.handle), "cuGraphLaunch")
