"""Plans: one GEMM configuration resolved once, then launched on the caller's device arrays.

``Plan(session, m, n, k, dtype=..., kernel=...)`` does, once, everything that does not
depend on where the operands are: the kernel or provider (the dtype's cuBLAS by default)
and its precision against the dtype, the operand swap for transposed layouts, the
tunables (a tuned kernel's table is read here, once), the build and load of the module.
Calling the plan reads the three arrays in place (arrays.py: pointer, shape, strides,
dtype), takes the Launch made for those addresses from a small LRU (a Launch packs its
kernel arguments once; a loop over the same buffers never packs again; at new addresses a
Hopper kernel's or a cuBLAS/cuBLASLt Launch is re-pointed from the last one, Launch.repoint)
and enqueues it on the caller's stream. No host copy, no synchronisation. ``run_pointers`` is the same launch
on raw addresses for a caller that has checked its operands once (the torch op): no array
object is read per call.

Streams: a Plan's launches are made on one ``ExternalStream`` whose handle is set to the
caller's stream before each launch, so a Launch made once serves every stream. Work that
uses the Session's scratch (split-K, packed operands, cuBLASLt's workspace) is ordered
after the previous such work when the stream changes (an event), so two streams never
share scratch at the same time. cuBLASLt runs the GEMM while its launcher is made (it
times its candidates): that runs on the Session's stream between two events, with C
saved and restored around it when beta != 0.

The operand swap: row-major C = A B is C^T = B^T A^T, so a transposed out (column-major)
is computed as the row-major (n, m, k) problem on (B^T, A^T), and transposed A or B become
row-major there; what stays transposed runs only on kernels that read transposed operands
(``Provider.transposes``: cuBLAS GemmEx, PyTorch), else a one-line error says what to do.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, NamedTuple


from . import arrays, fp8_scales, kernels
from .arrays import DeviceArray
from .cuda.driver import Event, ExternalStream, copy_2d_async, memset_2d32_async, stream_is_capturing, stream_wait
from .cuda.errors import UnsupportedProblem
from .kernels.spec import KernelSpec
from .kernels.target import check_capabilities
from .call import OUT_CODES, check_precision, default_kernel, dtype_name, epilogue_of, operand_dtypes
from .fp8 import check_scaling
from .problem import GemmProblem, fp8_types_of

LAUNCHES_KEPT = 16  # Launches per plan, one per (A, B, C) addresses and leading dimensions



class Operand(NamedTuple):
    """A caller's matrix as a launch reads it (kernels.launch.Operand, plus ``trans``)."""

    ptr: int
    ld: int
    itemsize: int
    trans: bool = False


def swapped_layout(trans_a: bool, trans_b: bool, trans_c: bool) -> tuple[bool, tuple[bool, bool]]:
    """(swap, (first operand stored transposed, second operand stored transposed)) of the
    row-major problem actually run: with a transposed C it is (n, m, k) on (B^T, A^T)."""
    if trans_c:
        return True, (not trans_b, not trans_a)
    return False, (trans_a, trans_b)


def plan_key(session, m: int, n: int, k: int, dtype: str, kernel: str, alpha: float, beta: float,
             layout: tuple[bool, bool, bool], lds: tuple, tunables: dict) -> tuple:
    """Everything a plan depends on: gemm()'s plan cache is keyed on it."""
    return (id(session), m, n, k, dtype, kernel, float(alpha), float(beta), tuple(map(bool, layout)), tuple(lds),
            tuple(sorted(tunables.items())))


class _SessionState:
    """What the plans of one Session share: a lock (launches of every plan share the
    session's cuBLAS handle for callers' streams and its scratch; a launch is queued in
    microseconds, so holding it costs nothing), the stream that last used the scratch, and
    an event to order the next user after it when that is another stream."""

    def __init__(self):
        self.lock = threading.Lock()
        self.scratch_stream: int | None = None
        self.event: Event | None = None


_STATES: "weakref.WeakKeyDictionary[Any, _SessionState]" = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state_of(session) -> _SessionState:
    with _STATES_LOCK:
        state = _STATES.get(session)
        if state is None:
            state = _STATES[session] = _SessionState()
        return state
_current = threading.local()  # the context made current on this thread


def ensure_current(session) -> None:
    """Make the session's context current on this thread, once per thread (the caller's
    thread may be one the session was not made on; torch and CuPy use the same primary
    context, so they leave it current)."""
    if getattr(_current, "context", None) is not session.context:
        session.context.make_current()
        _current.context = session.context


class Plan:
    """D = act(alpha * A @ B + beta * out + bias) for (m, n, k) in ``dtype`` with ``kernel``,
    resolved once.

    ``plan(A, B, out=None, bias=None, stream=None)`` launches on device arrays and returns
    out (made of A's kind when not given; beta != 0 reads out as C). ``trans_a``/``trans_b``/
    ``trans_c`` say which operands are transposed views; ``lda``/``ldb``/``ldc`` (None: any)
    pin their leading dimensions. ``out_dtype`` (float32, bfloat16, float16) is out's type,
    ``bias`` whether a vector of n in out_dtype is added (True, or the vector itself, then
    used when a call passes none) and ``activation`` None, "relu" or "gelu" (tanh form).
    FP8 (``dtype="float8_e4m3fn"`` or ``"float8_e5m2"``, or A's and B's as a pair, e.g.
    ``("float8_e5m2", "float8_e4m3fn")`` for a gradient times a weight): A row-major, B a
    transposed view (``W.t()``), out
    row-major in float32 or bfloat16, ``scaling`` "tensor" (default), "row" or "block", and
    each call passes ``scales=(A's, B's)`` (float32 device tensors: fp8_scales.py). ``pdl``:
    None launches as the kernel's choice says; False (True) without (with) programmatic
    dependent launch, for a kernel that has the PDL tunable (the others ignore it)."""

    def __init__(self, session, m: int, n: int, k: int, *, dtype="float32", kernel: str | None = None,
                 alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
                 trans_c: bool = False, lda: int | None = None, ldb: int | None = None, ldc: int | None = None,
                 out_dtype="float32", bias=False, activation: str | None = None, tunables: dict | None = None,
                 scaling: str | None = None, pdl: bool | None = None):
        self.session = session
        self.dtypes = operand_dtypes(dtype)  # A's and B's: one dtype, or FP8 formats that may differ
        self.dtype = self.dtypes[0]  # the precision's: what the kernel computes in
        scaling = self._check_scaling(scaling, (bool(trans_a), bool(trans_b), bool(trans_c)))
        fp8_types = fp8_types_of(*(arrays.FP8_FORMATS[d] for d in self.dtypes)) if scaling != "none" else "e4m3"
        self.out_dtype = dtype_name(out_dtype)
        self._bias_default = None if isinstance(bias, bool) or bias is None else bias
        epilogue = epilogue_of(self._bias_default is not None or bool(bias), activation)
        self.activation, self._zero_bias = activation, epilogue != "none" and not bias
        if epilogue != "none" and k == 0:
            raise UnsupportedProblem("K = 0 with a bias or activation: nothing to multiply; compute it outside")
        if epilogue != "none" and trans_c:
            raise UnsupportedProblem("a bias or activation adds along out's rows: pass a row-major out "
                                     "(trans_c=False)")
        self.layout, self.lds = (bool(trans_a), bool(trans_b), bool(trans_c)), (lda, ldb, ldc)
        self.swap, stored = swapped_layout(*self.layout)
        code = OUT_CODES[self.out_dtype]
        self.problem = GemmProblem(m, n, k, float(alpha), float(beta), trans_a=self.layout[0],
                                   trans_b=self.layout[1], out_dtype=code, epilogue=epilogue, scaling=scaling,
                                   fp8_types=fp8_types)
        self.run_problem = GemmProblem(*((n, m, k) if self.swap else (m, n, k)), float(alpha), float(beta),
                                       trans_a=stored[0], trans_b=stored[1], out_dtype=code, epilogue=epilogue,
                                       scaling=scaling, fp8_types=fp8_types)
        self.kernel = kernel or default_kernel(self.dtype, self.run_problem, session.device.compute_capability)
        self.target = target = kernels.get(self.kernel)
        if target.runs_on_host:
            raise UnsupportedProblem(f"{self.kernel} runs on the CPU; a plan launches on the GPU "
                                     "(use gemm() with NumPy arrays)")
        check_precision(self.kernel, target, self.dtype)
        self.stored = stored
        self.tunables, self.note = self._resolve(dict(tunables or {}), stored, pdl)
        self._want = {"A": (m, k, self.layout[0], self.dtypes[0]), "B": (k, n, self.layout[1], self.dtypes[1]),
                      "out": (m, n, self.layout[2], self.out_dtype)}
        self._out_itemsize = arrays.ITEMSIZE[self.out_dtype]
        self._launches: OrderedDict[tuple, Any] = OrderedDict()
        self.launches_made = 0  # one per new set of addresses: a loop that keeps making them repacks each call
        self.launches_repointed = 0  # of those, made from the previous one (_repointed)
        self._stream = ExternalStream(0)  # pointed at each caller's stream in turn
        self._state = _state_of(session)
        self._event: Event | None = None
        self._uses_scratch = target.uses_scratch

    def _check_scaling(self, scaling: str | None, layout: tuple[bool, bool, bool]) -> str:
        """The problem's scaling: FP8's mode ("tensor" by default) in the nt layout with a
        row-major out, "none" for every other dtype; one line otherwise."""
        if self.dtype not in arrays.FP8_FORMATS:
            if scaling not in (None, "none"):
                raise ValueError(f"scaling={scaling!r} goes with FP8 (float8_e4m3fn, float8_e5m2) A and B; these are "
                                 f"{self.dtype}")
            return "none"
        scaling = scaling or "tensor"
        check_scaling(scaling)
        if layout != (False, True, False):
            raise UnsupportedProblem("FP8 takes A row-major (M x K), B as a transposed view of an N x K row-major "
                                     "matrix (W.t(): the nt layout, the only one FP8 tensor cores read) and a "
                                     f"row-major out; got trans_a={layout[0]}, trans_b={layout[1]}, "
                                     f"trans_c={layout[2]}")
        return scaling

    def _resolve(self, tunables: dict, stored: tuple[bool, bool], pdl: bool | None) -> tuple[dict, str]:
        """Check the target against this GPU, the layout, output type and epilogue; choose
        and validate its tunables (PDL as ``pdl`` says, where it is one) and load it
        (KernelSpec), once."""
        target, session, name, problem = self.target, self.session, self.kernel, self.run_problem
        if stored != (False, False) and not target.transposes:
            which = " and ".join(x for x, t in zip(("A", "B") if not self.swap else ("B", "A"), stored) if t)
            raise UnsupportedProblem(f"{name} reads row-major operands only, and here {which} would be read "
                                     "transposed: pass contiguous copies, use a transposed out= for transposed A "
                                     "and B, or a kernel that takes transposed operands "
                                     f"({arrays.DEFAULT_KERNEL[self.dtype]})")
        check_capabilities(target, problem)
        target.check_device(tuple(session.device.compute_capability))
        if not isinstance(target, KernelSpec):  # a library: it chooses its own algorithm
            return target.check_tunables(tunables), ""
        note = ""
        if target.choose is not None and not tunables:
            tunables, note = target.choose(problem, session.device.name)  # the tuned table, read once
        if pdl is not None and any(t.name == "PDL" for t in target.tunables):
            tunables = {**tunables, "PDL": int(pdl)}
            note += f"{'; ' if note else ''}PDL {'on' if pdl else 'off'} (pdl={pdl})"
        resolved = target.validate(problem, tunables)
        if not problem.is_empty:
            session.load(target, resolved)
        return resolved, note

    # --- calls ---------------------------------------------------------------------------
    def __call__(self, a, b, out=None, *, bias=None, scales=None, stream=None):
        """Launch on device arrays ``a`` (m x k), ``b`` (k x n) into ``out`` (m x n in
        out_dtype; made of a's kind when None), adding ``bias`` (n, out_dtype) when the plan
        has one, with ``scales`` (A's, B's) when it is FP8, on ``stream`` (None: the current
        stream of a's library)."""
        raw = arrays.stream_handle(stream) if stream is not None else None
        A = arrays.device_array("A", a, raw or 0)
        if raw is None:
            raw = arrays.current_stream(A)
        return self.run(A, arrays.device_array("B", b, raw), out, raw, bias=bias, scales=scales)

    def run(self, A: DeviceArray, B: DeviceArray, out, raw: int, C: DeviceArray | None = None, bias=None,
            scales=None):
        """Launch on parsed operands (gemm() parses once); ``C``: out parsed, if it was."""
        lda, ldb, ldc = self.lds
        if (A.rows, A.cols, A.trans, A.dtype) != self._want["A"] or (lda is not None and A.ld != lda):
            self._refuse("A", A)
        if (B.rows, B.cols, B.trans, B.dtype) != self._want["B"] or (ldb is not None and B.ld != ldb):
            self._refuse("B", B)
        if out is None:
            if self.problem.beta != 0:
                raise ValueError(f"beta={self.problem.beta} reads C from out=, but no out was given")
            out = arrays.allocate(A, self.problem.m, self.problem.n, trans=self.layout[2], stream=raw,
                                  dtype=self.out_dtype)
        if C is None:
            C = arrays.device_array("out", out, raw)
        if (C.rows, C.cols, C.trans, C.dtype) != self._want["out"] or (ldc is not None and C.ld != ldc):
            self._refuse("out", C)
        ordinal = self.session.device.ordinal
        if not A.device == B.device == C.device == ordinal:
            raise ValueError(f"A, B and out are on GPUs {A.device}, {B.device} and {C.device}; this plan's session "
                             f"runs on GPU {ordinal}")
        bias_ptr = self._bias_pointer(bias, raw) if self.run_problem.has_bias else self._no_bias(bias)
        scale_ops = self._scale_operands(scales, raw)
        ensure_current(self.session)
        if self.problem.is_empty:
            self._empty(C, raw)
            return out
        first, second = (B, A) if self.swap else (A, B)
        key = (first.ptr, first.ld, second.ptr, second.ld, C.ptr, C.ld, bias_ptr, scale_ops)
        with self._state.lock:
            launch = self._launches.get(key)
            if launch is None:
                launch = self._make(key, first, second, C, raw, bias_ptr, scale_ops)
            else:
                self._launches.move_to_end(key)
            if A.producer_stream is not None or B.producer_stream is not None or C.producer_stream is not None:
                for producer in (A.producer_stream, B.producer_stream, C.producer_stream):
                    if producer is not None and producer != raw:  # array interface v3: still being written there
                        self._order(producer, raw)
            self._enqueue(launch, raw)
        return out

    def run_pointers(self, a: int, b: int, out: int, stream: int, *, lda: int, ldb: int, ldc: int,
                     bias: int = 0) -> None:
        """The launch of ``run`` on raw device addresses (ints), for a caller that has checked
        its operands against this plan (a first call through ``run`` does) and since passes
        only arrays of the same shapes, dtypes, layouts and device: the torch op keys its
        plans on all of those. Nothing here reads an array object or checks an operand; the
        addresses, leading dimensions (in elements, of A, B and out as the caller stores them)
        and ``stream`` (a raw CUstream) are taken as they come. ``bias``: the vector's address;
        0 is none, or the plan's zero vector when it has an activation without a bias.
        Empty problems (M, N or K = 0) are refused: they go through ``run``."""
        if self.problem.is_empty:
            raise ValueError("run_pointers launches a GEMM; an empty problem (M, N or K = 0) goes through run()")
        if self.problem.scaling != "none":
            raise ValueError("run_pointers takes no scales; an FP8 plan runs through plan(a, b, out, scales=...)")
        if self.run_problem.has_bias:
            bias = bias or self._bias_pointer(None, stream)
        elif bias:
            self._no_bias(bias)
        ensure_current(self.session)
        key = (b, ldb, a, lda, out, ldc, bias, None) if self.swap else (a, lda, b, ldb, out, ldc, bias, None)
        with self._state.lock:
            launch = self._launches.get(key)
            if launch is None:
                launch = self._make(key, *self._arrays_at(key), stream, bias)
            else:
                self._launches.move_to_end(key)
            self._enqueue(launch, stream)

    def _arrays_at(self, key: tuple) -> tuple[DeviceArray, DeviceArray, DeviceArray]:
        """(first, second, out) of the problem run, as ``run`` would have parsed them, from a
        launch key of ``run_pointers`` (the shapes, layouts and dtypes are the plan's)."""
        first_ptr, first_ld, second_ptr, second_ld, out_ptr, out_ld, _, _ = key
        first_name, second_name = ("B", "A") if self.swap else ("A", "B")
        ordinal = self.session.device.ordinal

        def array(name: str, ptr: int, ld: int) -> DeviceArray:
            rows, cols, trans, dtype = self._want[name]
            return DeviceArray(None, "pointer", ptr, rows, cols, ld, trans, dtype, ordinal)

        return (array(first_name, first_ptr, first_ld), array(second_name, second_ptr, second_ld),
                array("out", out_ptr, out_ld))

    def _enqueue(self, launch, raw: int) -> None:
        """``launch`` on stream ``raw``, after the last user of the session's scratch on
        another stream when it uses the scratch (held under the session's lock)."""
        scratch = self._uses_scratch and launch.uses_scratch
        capturing = self._order_scratch(raw) if scratch else False
        self._stream.handle = raw
        launch()
        if scratch:
            self._scratch_used(raw, capturing)

    def _scale_operands(self, scales, raw: int) -> tuple | None:
        """An FP8 plan's scales as launch Operands (fp8_scales.py); None for other dtypes,
        which take none."""
        p = self.problem
        if p.scaling == "none":
            if scales is not None:
                raise ValueError(f"scales= goes with FP8 (float8_e4m3fn, float8_e5m2) A and B; this plan computes "
                                 f"{self.dtype}")
            return None
        if scales is None:
            raise ValueError(f"this FP8 plan ({p.scaling} scaling) needs scales=(A's, B's): float32 device tensors")
        return fp8_scales.scale_operands(p.scaling, scales, p.m, p.n, p.k, raw, self.session.device.ordinal)

    def _no_bias(self, bias) -> int:
        if bias is not None:
            raise ValueError("bias= was given to a plan made without one: make it with plan(..., bias=True)")
        return 0

    def _bias_pointer(self, bias, raw: int) -> int:
        """The device address of the n-vector added to each row of out (zeros for an
        activation without a bias)."""
        n, itemsize = self.run_problem.n, self._out_itemsize
        if bias is None:
            bias = self._bias_default
        if bias is None:
            if not self._zero_bias:
                raise ValueError(f"this plan adds a bias: pass bias= (a vector of {n} {self.out_dtype} elements)")
            return self.session.workspace(f"zero_bias_{itemsize}", max(n, 1) * itemsize, zeroed=True)
        vector = bias if isinstance(bias, arrays.DeviceVector) else arrays.device_vector("bias", bias, raw)
        if vector.length != n or vector.dtype != self.out_dtype:
            raise ValueError(f"bias must be a vector of {n} {self.out_dtype} elements (out's type), got "
                             f"{vector.length} {vector.dtype}")
        if vector.device != self.session.device.ordinal:
            raise ValueError(f"bias is on GPU {vector.device}; this plan's session runs on GPU "
                             f"{self.session.device.ordinal}")
        return vector.ptr

    def _refuse(self, name: str, x: DeviceArray) -> None:
        """The one-line error for an operand that does not fit this plan."""
        rows, cols, trans, want_dtype = self._want[name]
        ld = self.lds[("A", "B", "out").index(name)]
        if x.dtype != want_dtype:
            if name == "out":
                raise TypeError(f"out has dtype {x.dtype}; this plan writes {want_dtype} (plan(..., "
                                f"out_dtype={x.dtype!r}) where the kernel declares it)")
            raise TypeError(f"{name} has dtype {x.dtype}; this call takes {want_dtype}")
        if (x.rows, x.cols) != (rows, cols):
            raise ValueError(f"{name} must be {rows}x{cols}, got {x.rows}x{x.cols}")
        if x.trans != trans:
            layouts = {False: "row-major", True: "a transposed view"}
            flag = {"A": "trans_a", "B": "trans_b", "out": "trans_c"}[name]
            raise ValueError(f"{name} is {layouts[x.trans]}; this plan was made for {layouts[trans]} ({flag}={trans})")
        raise ValueError(f"{name} has leading dimension {x.ld}; this plan was made for {ld}")

    def _make(self, key: tuple, first: DeviceArray, second: DeviceArray, C: DeviceArray, raw: int, bias_ptr: int,
              scales: tuple | None = None):
        """The Launch for these addresses (and FP8 scales), made once and kept (LRU)."""
        t1, t2 = self.stored
        ops = (Operand(first.ptr, first.ld, first.itemsize, t1), Operand(second.ptr, second.ld, second.itemsize, t2),
               Operand(C.ptr, C.ld, self._out_itemsize))
        bias = Operand(bias_ptr, 1, self._out_itemsize) if bias_ptr else None
        session, extra = self.session, ({"bias": bias} if bias is not None else {})
        if scales is not None:
            extra["scales"] = scales
        # From the last Launch where it can be re-pointed (a measuring library's only where it
        # would measure nothing: cuBLASLt at the same alignments), else made anew.
        launch = self._repointed(ops, bias_ptr) if scales is None else None
        if launch is None and not self.target.measures:
            launch = session.launcher(self.kernel, self.run_problem, *ops, self.tunables, stream=self._stream, **extra)
        elif launch is None:  # it runs the GEMM now: on the Session's stream (capturable), after and before the caller's work
            own = session.stream
            self._order(raw, int(own.handle))
            saved = self._save_c(C, own) if self.problem.beta != 0 else None
            self._stream.handle = int(own.handle)
            launch = session.launcher(self.kernel, self.run_problem, *ops, self.tunables, stream=self._stream, **extra)
            if saved is not None:
                copy_2d_async(C.ptr, C.ld * self._out_itemsize, saved, self._c_width(C), self._c_width(C),
                              self._c_height(C), own)
            self._order(int(own.handle), raw)
        self._launches[key] = launch
        self.launches_made += 1
        if len(self._launches) > LAUNCHES_KEPT:
            self._launches.popitem(last=False)
        return launch

    def _repointed(self, ops: tuple, bias_ptr: int):
        """The most recent Launch re-pointed at these operands (Launch.repoint: a Hopper launch
        copies its arguments and encodes only the moved operands' tensor maps, a cuBLAS one
        makes its argument tuple again), or None where it cannot."""
        if not self._launches:
            return None
        launch = next(reversed(self._launches.values())).repoint(*ops, bias_ptr)
        self.launches_repointed += launch is not None
        return launch

    def _c_width(self, C: DeviceArray) -> int:
        """Bytes of one stored row of out."""
        return (C.rows if C.trans else C.cols) * self._out_itemsize

    def _c_height(self, C: DeviceArray) -> int:
        return C.cols if C.trans else C.rows

    def _save_c(self, C: DeviceArray, stream) -> int:
        saved = self.session.workspace("plan_saved_c", self._c_width(C) * self._c_height(C))
        copy_2d_async(saved, self._c_width(C), C.ptr, C.ld * self._out_itemsize, self._c_width(C), self._c_height(C),
                      stream)
        return saved

    def _order(self, before: int, after: int) -> None:
        """Work queued on stream ``after`` from now on waits for what ``before`` holds now."""
        if before == after:
            return
        if self._event is None:
            self._event = Event()
        self._event.record(ExternalStream(before))
        stream_wait(ExternalStream(after), self._event)

    def _order_scratch(self, raw: int) -> bool:
        """Make ``raw`` wait for the last scratch user on another stream; returns whether
        ``raw`` is being captured. A stream under graph capture may not wait on work outside
        the capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION), and nothing runs while capturing:
        the replays use the scratch whenever they run (README: "CUDA graphs")."""
        state = self._state
        capturing = stream_is_capturing(raw)
        if state.scratch_stream is not None and state.scratch_stream != raw and not capturing:
            stream_wait(ExternalStream(raw), state.event)
        return capturing

    def _scratch_used(self, raw: int, capturing: bool) -> None:
        """Record the scratch's last use right after the launch, while ``raw`` surely lives (a
        caller's stream remembered for later may be destroyed by then)."""
        state = self._state
        if capturing:
            state.scratch_stream = None  # a captured record orders nothing outside the graph
            return
        if state.event is None:
            state.event = Event()
        state.event.record(ExternalStream(raw))
        state.scratch_stream = raw

    def _empty(self, C: DeviceArray, raw: int) -> None:
        """M or N = 0: nothing; K = 0: out = beta * out (0 when beta == 0, out not read)."""
        p = self.problem
        if p.m == 0 or p.n == 0 or p.beta == 1:
            return
        stream = ExternalStream(raw)
        if p.beta == 0 and self._out_itemsize == 4:
            memset_2d32_async(C.ptr, C.ld * 4, 0, self._c_width(C) // 4, self._c_height(C), stream)
        elif C.kind == "torch":
            import torch

            with torch.cuda.stream(torch.cuda.ExternalStream(raw, device=C.obj.device)):
                C.obj.mul_(p.beta)  # 0 * out is not 0 for NaN or inf: zero it outright then
                if p.beta == 0:
                    C.obj.zero_()
        elif C.kind == "cupy":
            import cupy

            with cupy.cuda.ExternalStream(raw):
                cupy.multiply(C.obj, p.beta, out=C.obj)
                if p.beta == 0:
                    C.obj.fill(0)
        else:
            raise ValueError(f"K = 0 with beta={p.beta} scales out, which is done for torch and CuPy arrays only")

    def __repr__(self) -> str:
        p, (ta, tb, tc) = self.problem, self.layout
        flags = "".join(f", trans_{x}=True" for x, t in zip("abc", (ta, tb, tc)) if t)
        return (f"Plan({p.m}x{p.n}x{p.k}, {self.dtype}, kernel={self.kernel!r}, alpha={p.alpha}, beta={p.beta}"
                f"{flags}, out_dtype={self.out_dtype!r}, epilogue={p.epilogue!r}"
                f"{'' if p.scaling == 'none' else f', scaling={p.scaling!r}'}, tunables={self.tunables})")
