"""Plans and gemm() on device arrays (gemm_driver/plans.py, api.py), checked without a GPU.

A stand-in Session records what a Plan asks of it (loads, launchers, the stream each
launch runs on); stand-in device arrays expose the CUDA array interface. What needs a
real GPU (results, streams honoured by the hardware) is in test_device_arrays_gpu.py."""

from __future__ import annotations

import ctypes
import importlib
import types

import numpy as np
import pytest

import gemm_driver
from gemm_driver import arrays, kernels, plans, precision
from gemm_driver.arrays import product_shape
from gemm_driver.call import dtype_name, operand_dtypes
from gemm_driver.plans import Plan, plan_key, swapped_layout
from gemm_driver.problem import GemmProblem

api = importlib.import_module("gemm_driver.api")


class CudaArray:
    """A stand-in GPU array: the CUDA array interface only (pointer, shape, strides)."""

    next_ptr = 0x10000

    def __init__(self, rows, cols, typestr="<f4", strides=None):
        CudaArray.next_ptr += 0x10000
        self.ptr = CudaArray.next_ptr
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": typestr, "data": (self.ptr, False),
                                         "strides": strides, "version": 2}

    @property
    def T(self):
        """The transposed view, as libraries make it: same memory, strides swapped."""
        cai = self.__cuda_array_interface__
        rows, cols = cai["shape"]
        itemsize = int(cai["typestr"][2:])
        strides = cai["strides"] or (cols * itemsize, itemsize)
        view = CudaArray.__new__(CudaArray)
        view.ptr = self.ptr
        view.__cuda_array_interface__ = dict(cai, shape=(cols, rows), strides=(strides[1], strides[0]))
        return view


class FakeLaunch:
    uses_scratch = True  # as a Launch whose recipe does not say (Launch.uses_scratch)

    def __init__(self, record, stream, repoints=None):
        self.record, self.stream, self.repoints = record, stream, repoints

    def __call__(self):
        self.record.append(self.stream.handle)  # the handle the launch runs on, read when it runs

    def repoint(self, a, b, c, bias=0):
        """As Launch.repoint: None unless the recipe re-points (``repoints``: a list to record in)."""
        if self.repoints is None:
            return None
        self.repoints.append((a, b, c, bias))
        return FakeLaunch(self.record, self.stream, self.repoints)


class FakeSession:
    """What a Plan uses of a Session: device facts, load(), launcher(), stream, context."""

    def __init__(self, cc=(9, 0)):
        self.device = types.SimpleNamespace(compute_capability=cc, name="NVIDIA H100 80GB HBM3", ordinal=0)
        self.context = types.SimpleNamespace(make_current=lambda: None)
        self.stream = types.SimpleNamespace(handle=0x5E55)
        self.loads, self.launchers, self.runs, self.biases, self.workspaces = [], [], [], [], []

    def load(self, spec, tunables):
        self.loads.append((spec.name, dict(tunables)))

    def launcher(self, name, problem, a, b, c, tunables=None, *, stream=None, bias=None):
        self.launchers.append((name, problem, a, b, c, dict(tunables or {})))
        self.biases.append(bias)
        return FakeLaunch(self.runs, stream)

    def workspace(self, name, nbytes, zeroed=False):
        self.workspaces.append((name, nbytes, zeroed))
        return 0xB1A5


@pytest.fixture
def on_gpu(monkeypatch):
    monkeypatch.setattr(arrays, "pointer_device", lambda ptr: 0)


@pytest.fixture
def fences(monkeypatch):
    """Events and stream waits recorded instead of made; streams in ``made.capturing`` are
    under graph capture."""

    class Made(list):
        capturing: set

    made = Made()
    made.capturing = set()

    class FakeEvent:
        def record(self, stream):
            made.append(("record", stream.handle))

    monkeypatch.setattr(plans, "Event", FakeEvent)
    monkeypatch.setattr(plans, "stream_wait", lambda stream, event: made.append(("wait", stream.handle)))
    monkeypatch.setattr(plans, "stream_is_capturing", lambda raw: raw in made.capturing)
    return made


def one_line(info) -> str:
    text = str(info.value)
    assert text and "\n" not in text, text
    return text


# --- pure pieces ------------------------------------------------------------------------------
@pytest.mark.parametrize("given, name", [
    ("float32", "float32"), ("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16"), ("half", "float16"),
    (np.float32, "float32"), (np.dtype(np.float16), "float16"), ("torch.bfloat16", "bfloat16"),
])
def test_dtype_names(given, name):
    assert dtype_name(given) == name


def test_dtype_names_of_ml_dtypes_and_torch_like_objects():
    torch_like = type("dtype", (), {"__str__": lambda self: "torch.float16"})()
    assert dtype_name(torch_like) == "float16"
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert dtype_name(ml_dtypes.bfloat16) == "bfloat16"


@pytest.mark.parametrize("bad", ["float64", np.int8, "e4m3fnuz"])
def test_other_dtypes_are_refused(bad):
    with pytest.raises(ValueError, match=r"^dtype must be float32, bfloat16, float16, float8_e4m3fn or float8_e5m2 "
                                         r"\(FP8, device "):
        dtype_name(bad)


def test_fp8_names():
    torch_like = type("dtype", (), {"__str__": lambda self: "torch.float8_e4m3fn"})()
    assert dtype_name(torch_like) == dtype_name("fp8") == dtype_name("e4m3") == "float8_e4m3fn"
    torch_e5m2 = type("dtype", (), {"__str__": lambda self: "torch.float8_e5m2"})()
    assert dtype_name(torch_e5m2) == dtype_name("e5m2") == "float8_e5m2"


def test_operand_dtypes_take_one_dtype_or_two_fp8_formats():
    assert operand_dtypes("bf16") == ("bfloat16", "bfloat16")
    assert operand_dtypes(("e5m2", "float8_e4m3fn")) == ("float8_e5m2", "float8_e4m3fn")
    with pytest.raises(ValueError, match="may differ only as two FP8 formats"):
        operand_dtypes(("bfloat16", "float16"))
    with pytest.raises(ValueError, match="one dtype or a pair"):
        operand_dtypes(("e4m3", "e4m3", "e4m3"))


def test_fp8_operands_may_mix_formats_other_dtypes_may_not():
    assert product_shape((4, 8), "float8_e5m2", (8, 3), "float8_e4m3fn") == (4, 3, 8)
    with pytest.raises(TypeError, match="FP8 A and B may mix"):
        product_shape((4, 8), "bfloat16", (8, 3), "float8_e4m3fn")


@pytest.mark.parametrize("layout, expected", [
    ((False, False, False), (False, (False, False))),
    ((True, False, False), (False, (True, False))),
    ((False, True, False), (False, (False, True))),
    ((True, True, True), (True, (False, False))),  # C^T = B^T A^T: everything row-major
    ((False, False, True), (True, (True, True))),
    ((True, False, True), (True, (True, False))),  # first is B^T: B row-major -> stored transposed
])
def test_operand_swap(layout, expected):
    assert swapped_layout(*layout) == expected


def test_plan_keys_hold_everything_that_matters():
    s = object()
    base = dict(session=s, m=64, n=32, k=16, dtype="float32", kernel="cublas", alpha=1.0, beta=0.0,
                layout=(False, False, False), lds=(), tunables={"TILE": 16, "PAD": 1})
    key = plan_key(**base)
    assert key == plan_key(**dict(base, tunables={"PAD": 1, "TILE": 16}))  # order does not matter
    assert key == plan_key(**dict(base, alpha=1))  # 1 and 1.0 are one plan
    changes = dict(session=object(), m=65, n=33, k=17, dtype="bfloat16", kernel="naive", alpha=2.0, beta=1.0,
                   layout=(True, False, False), lds=(64, None, None), tunables={"TILE": 32, "PAD": 1})
    for field, value in changes.items():
        assert plan_key(**dict(base, **{field: value})) != key, field


# --- a Plan over a stand-in session ------------------------------------------------------------------
def test_default_kernel_follows_the_dtype():
    s = FakeSession()
    assert Plan(s, 8, 8, 8).kernel == "cublas"
    assert Plan(s, 8, 8, 8, dtype="bfloat16").kernel == "cublas_bf16"
    assert Plan(s, 8, 8, 8, dtype=np.float16).kernel == "cublas_fp16"


def test_a_kernel_of_another_precision_is_one_line():
    with pytest.raises(ValueError) as info:
        Plan(FakeSession(), 8, 8, 8, dtype="bfloat16", kernel="smem_tiled")
    assert one_line(info) == ("kernel 'smem_tiled' computes in fp32 but A and B are bfloat16: choose a bf16 kernel "
                              "(e.g. cublas_bf16), or pass float32 A and B to smem_tiled")
    assert Plan(FakeSession(), 8, 8, 8, dtype="float32", kernel="cublas_tf32").kernel == "cublas_tf32"


def test_host_kernels_and_absent_providers_are_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"^numpy runs on the CPU; a plan launches on the GPU"):
        Plan(FakeSession(), 8, 8, 8, kernel="numpy")
    torch = kernels.get("torch")
    monkeypatch.setitem(kernels.ALL, "torch", type(torch)(**{**torch.__dict__, "unavailable": lambda: "no torch"}))
    with pytest.raises(ValueError) as info:
        Plan(FakeSession(), 8, 8, 8, kernel="torch")
    assert one_line(info) == "torch: no torch"


def test_architecture_and_tunables_are_checked_once_at_planning():
    with pytest.raises(ValueError, match=r"^hopper_bf16 runs on sm_90a only"):
        Plan(FakeSession(cc=(8, 0)), 256, 256, 256, dtype="bfloat16", kernel="hopper_bf16")
    with pytest.raises(ValueError, match=r"^cublas_bf16 needs sm_80 or newer; this GPU is sm_75$"):
        Plan(FakeSession(cc=(7, 5)), 8, 8, 8, dtype="bfloat16")
    with pytest.raises(ValueError, match=r"smem_tiled: TILE=12 is not allowed"):
        Plan(FakeSession(), 8, 8, 8, kernel="smem_tiled", tunables={"TILE": 12})
    with pytest.raises(ValueError, match=r"^cublas takes no tunables, got \['TILE'\]$"):
        Plan(FakeSession(), 8, 8, 8, tunables={"TILE": 16})
    s = FakeSession()
    p = Plan(s, 64, 64, 64, kernel="smem_tiled", tunables={"TILE": 32})
    assert s.loads == [("smem_tiled", {"TILE": 32, "PAD": p.tunables["PAD"]})] and p.tunables["TILE"] == 32


def test_pdl_overrides_the_choice_where_the_kernel_has_it():
    shape = dict(dtype="bfloat16", out_dtype="bfloat16", trans_b=True)
    chosen = Plan(FakeSession(), 4096, 2048, 2048, kernel="hopper_bf16", **shape)
    assert chosen.tunables["PDL"] == 1 and "PDL" not in chosen.note  # the pick has it (short_k_choice)
    s = FakeSession()
    off = Plan(s, 4096, 2048, 2048, kernel="hopper_bf16", pdl=False, **shape)
    assert {k: v for k, v in off.tunables.items() if k != "PDL"} == \
        {k: v for k, v in chosen.tunables.items() if k != "PDL"}
    assert off.tunables["PDL"] == 0 and off.note.endswith("; PDL off (pdl=False)") and s.loads[0][1]["PDL"] == 0
    fixed = Plan(FakeSession(), 4096, 2048, 2048, kernel="hopper_bf16", pdl=True, tunables={"BN": 128}, **shape)
    assert fixed.tunables["PDL"] == 1 and fixed.tunables["BN"] == 128 and fixed.note == "PDL on (pdl=True)"
    # a kernel without the tunable (a library, the SIMT ladder) ignores it
    assert Plan(FakeSession(), 64, 64, 64, dtype="bfloat16", pdl=False).tunables == {}
    assert "PDL" not in Plan(FakeSession(), 64, 64, 64, kernel="smem_tiled", pdl=False).tunables


def test_the_tuned_table_is_read_once(monkeypatch, on_gpu, fences):
    reads = []
    real = kernels.tuned.load_table
    monkeypatch.setattr(kernels.tuned, "load_table", lambda *a, **k: reads.append(a) or real(*a, **k))
    s = FakeSession()
    p = Plan(s, 256, 256, 256, kernel="autotuned")
    a, b, c = CudaArray(256, 256), CudaArray(256, 256), CudaArray(256, 256)
    for _ in range(5):
        p(a, b, c, stream=7)
    assert len(reads) == 1 and len(s.loads) == 1 and len(s.launchers) == 1 and s.runs == [7] * 5
    assert s.launchers[0][5] == p.tunables and ("nearest tuning shapes" in p.note or "no tuned table" in p.note)


def test_calls_reuse_the_launch_per_address_and_follow_the_callers_stream(on_gpu):
    s = FakeSession()
    p = Plan(s, 4, 3, 2)
    a, b, c, c2 = CudaArray(4, 2), CudaArray(2, 3), CudaArray(4, 3), CudaArray(4, 3)
    assert p(a, b, c, stream=11) is c
    p(a, b, c, stream=12)
    p(a, b, c2, stream=13)
    assert s.runs == [11, 12, 13] and len(s.launchers) == 2
    name, problem, opa, opb, opc, _ = s.launchers[0]
    assert (name, problem) == ("cublas", GemmProblem(4, 3, 2))
    assert (opa.ptr, opa.ld, opa.itemsize, opa.trans) == (a.ptr, 2, 4, False)
    assert (opb.ptr, opb.ld, opc.ptr, opc.ld) == (b.ptr, 3, c.ptr, 3)


def test_launches_kept_are_bounded(on_gpu):
    s = FakeSession()
    p = Plan(s, 2, 2, 2)
    a, b = CudaArray(2, 2), CudaArray(2, 2)
    outs = [CudaArray(2, 2) for _ in range(plans.LAUNCHES_KEPT + 1)]
    for out in outs:
        p(a, b, out, stream=1)
    p(a, b, outs[-1], stream=1)  # kept
    assert len(s.launchers) == plans.LAUNCHES_KEPT + 1
    p(a, b, outs[0], stream=1)  # the oldest was dropped: made again
    assert len(s.launchers) == plans.LAUNCHES_KEPT + 2


def test_transposed_operands_run_on_kernels_that_read_them(on_gpu):
    s = FakeSession()
    p = Plan(s, 4, 3, 2, trans_b=True)  # cuBLAS: op(B) = B^T through its flags
    a, bt, c = CudaArray(4, 2), CudaArray(3, 2), CudaArray(4, 3)
    p(a, bt.T, c, stream=1)
    _, problem, opa, opb, opc, _ = s.launchers[0]
    assert problem == GemmProblem(4, 3, 2, trans_b=True)
    assert not opa.trans and opb.trans and (opb.ptr, opb.ld) == (bt.ptr, 2)


def test_transposed_everything_is_the_operand_swap_on_any_kernel(on_gpu):
    """C^T = B^T A^T: A, B and out transposed views are the row-major (n, m, k) problem on (B^T, A^T)."""
    s = FakeSession()
    p = Plan(s, 4, 3, 2, kernel="naive", trans_a=True, trans_b=True, trans_c=True, alpha=2.0)
    at, bt, ct = CudaArray(2, 4), CudaArray(3, 2), CudaArray(3, 4)  # the row-major storage of each
    p(at.T, bt.T, ct.T, stream=1)
    _, problem, first, second, opc, _ = s.launchers[0]
    assert problem == GemmProblem(3, 4, 2, 2.0)
    assert (first.ptr, first.ld, first.trans) == (bt.ptr, 2, False)
    assert (second.ptr, second.ld, second.trans) == (at.ptr, 4, False)
    assert (opc.ptr, opc.ld) == (ct.ptr, 4)


@pytest.mark.parametrize("layout, named", [(dict(trans_a=True), "A"), (dict(trans_b=True), "B"),
                                           (dict(trans_c=True), "B and A")])
def test_transposed_operands_a_kernel_cannot_read_are_one_line(layout, named):
    with pytest.raises(ValueError) as info:
        Plan(FakeSession(), 4, 3, 2, kernel="smem_tiled", **layout)
    text = one_line(info)
    assert text.startswith(f"smem_tiled reads row-major operands only, and here {named} would be read transposed")
    assert text.endswith("or a kernel that takes transposed operands (cublas)")


def test_calls_check_shape_dtype_layout_and_leading_dimension(on_gpu):
    p = Plan(FakeSession(), 4, 3, 2, ldb=8)
    a, b, c = CudaArray(4, 2), CudaArray(2, 3, strides=(32, 4)), CudaArray(4, 3)
    p(a, b, c)
    cases = [
        ((CudaArray(4, 3), b, c), ValueError, "A must be 4x2, got 4x3"),
        ((CudaArray(4, 2, "<f2"), b, c), TypeError, "A has dtype float16; this call takes float32"),
        ((a, CudaArray(2, 3), c), ValueError, "B has leading dimension 3; this plan was made for 8"),
        ((a, b, CudaArray(4, 3, "<f2")), TypeError, "out has dtype float16; this plan writes float32 "
                                                        "(plan(..., out_dtype='float16') where the kernel declares it)"),
        ((a, b, CudaArray(3, 4).T), ValueError, "out is a transposed view; this plan was made for row-major "
                                                "(trans_c=False)"),
        ((np.zeros((4, 2), np.float32), b, c), TypeError, None),
    ]
    for args, error, message in cases:
        with pytest.raises(error) as info:
            p(*args)
        assert message is None or one_line(info) == message


def test_beta_reads_out_so_out_is_required(on_gpu):
    p = Plan(FakeSession(), 4, 3, 2, beta=1.0)
    with pytest.raises(ValueError) as info:
        p(CudaArray(4, 2), CudaArray(2, 3))
    assert one_line(info) == "beta=1.0 reads C from out=, but no out was given"


def test_operands_on_another_gpu_are_refused(monkeypatch):
    monkeypatch.setattr(arrays, "pointer_device", lambda ptr: 1)
    with pytest.raises(ValueError) as info:
        Plan(FakeSession(), 2, 2, 2)(CudaArray(2, 2), CudaArray(2, 2), CudaArray(2, 2))
    assert one_line(info) == "A, B and out are on GPUs 1, 1 and 1; this plan's session runs on GPU 0"


def test_scratch_is_ordered_across_streams_only_for_kernels_that_use_it(on_gpu, fences):
    a, b, c = CudaArray(64, 64), CudaArray(64, 64), CudaArray(64, 64)
    s = FakeSession()
    uses = Plan(s, 64, 64, 64, kernel="warptiled")  # split-K scratch from the Session
    uses(a, b, c, stream=1)
    uses(a, b, c, stream=1)
    assert fences == [("record", 1)] * 2  # each use recorded after its launch, while its stream lives
    uses(a, b, c, stream=2)
    assert fences == [("record", 1)] * 2 + [("wait", 2), ("record", 2)]
    fences.clear()
    plain = Plan(s, 64, 64, 64, kernel="naive")
    plain(a, b, c, stream=3)
    assert fences == []


def test_a_stream_under_graph_capture_takes_the_scratch_without_waiting(on_gpu, fences):
    """A capturing stream may not wait on uncaptured work (the driver refuses it): the plan
    records no dependency there, and nothing captured orders the next eager stream."""
    a, b, c = CudaArray(64, 64), CudaArray(64, 64), CudaArray(64, 64)
    p = Plan(FakeSession(), 64, 64, 64, kernel="warptiled")
    p(a, b, c, stream=1)
    fences.capturing.add(2)
    p(a, b, c, stream=2)
    assert fences == [("record", 1)]
    fences.capturing.clear()
    p(a, b, c, stream=3)
    assert fences == [("record", 1), ("record", 3)]


def test_producer_streams_of_the_array_interface_are_waited_for(on_gpu, fences):
    a, b, c = CudaArray(2, 2), CudaArray(2, 2), CudaArray(2, 2)
    a.__cuda_array_interface__ = dict(a.__cuda_array_interface__, version=3, stream=9)
    p = Plan(FakeSession(), 2, 2, 2)
    p(a, b, c, stream=4)
    assert fences == [("record", 9), ("wait", 4)]


# --- gemm() on stand-in device arrays ------------------------------------------------------------
@pytest.fixture
def fake_gemm_session(monkeypatch, on_gpu):
    s = FakeSession()
    monkeypatch.setattr(api, "default_session", lambda: s)
    monkeypatch.setattr(api, "_plans", type(api._plans)())
    return s


def test_gemm_keeps_one_plan_per_configuration(fake_gemm_session):
    s = fake_gemm_session
    a, b, c = CudaArray(4, 2), CudaArray(2, 3), CudaArray(4, 3)
    for _ in range(3):
        assert gemm_driver.gemm(a, b, out=c, stream=5) is c
    gemm_driver.gemm(a, b, out=c, stream=5, alpha=2.0)
    assert len(api._plans) == 2 and len(s.launchers) == 2 and s.runs == [5] * 4


def test_gemm_plan_cache_is_bounded(fake_gemm_session):
    a, b, c = CudaArray(4, 2), CudaArray(2, 3), CudaArray(4, 3)
    for i in range(api.PLANS_KEPT + 5):
        gemm_driver.gemm(a, b, out=c, alpha=float(i + 1))
    assert len(api._plans) == api.PLANS_KEPT


def test_gemm_copies_c_into_out_on_the_callers_stream(fake_gemm_session, monkeypatch):
    copies = []
    monkeypatch.setattr(api, "copy_2d_async", lambda *args: copies.append(args[:-1] + (args[-1].handle,)))
    a, b, c, out = CudaArray(4, 2), CudaArray(2, 3), CudaArray(4, 3, strides=(16, 4)), CudaArray(4, 3)
    gemm_driver.gemm(a, b, c, beta=0.5, out=out, stream=6)
    assert copies == [(out.ptr, 12, c.ptr, 16, 12, 4, 6)]
    gemm_driver.gemm(a, b, out, beta=0.5, out=out, stream=6)  # C is out: nothing to copy
    assert len(copies) == 1


def test_gemm_device_errors_are_one_line(fake_gemm_session):
    a, b, c = CudaArray(4, 2), CudaArray(2, 3), CudaArray(4, 3)
    cases = [
        (lambda: gemm_driver.gemm(a, CudaArray(3, 3), out=c), ValueError, "inner dimensions differ: A is 4x2, B is 3x3"),
        (lambda: gemm_driver.gemm(a, CudaArray(2, 3, "<f2"), out=c), TypeError,
         "A is float32 and B is float16: A and B must have the same dtype (FP8 A and B may mix float8_e4m3fn "
         "and float8_e5m2)"),
        (lambda: gemm_driver.gemm(CudaArray(4, 2, "<f8"), b, out=c), TypeError,
         "A has dtype float64; allowed are float32, bfloat16, float16, float8_e4m3fn or float8_e5m2 (FP8)"),
        (lambda: gemm_driver.gemm(a, b, beta=1.0), ValueError, "beta=1.0 scales C, but neither C nor out= was given"),
        (lambda: gemm_driver.gemm(a, b), TypeError, "out= is needed: results are allocated for torch and CuPy arrays "
                                                    "only, and A is a CudaArray; pass a float32 4x3 device array as out="),
        (lambda: gemm_driver.gemm(a, b, CudaArray(4, 3).T.T.T, beta=1.0, out=c), ValueError,
         "C must be 4x3, got 3x4"),
        (lambda: gemm_driver.gemm(a, b, out=c, kernel="wmma_bf16"), ValueError,
         "kernel 'wmma_bf16' computes in bf16 but A and B are float32: choose a fp32/tf32 kernel (e.g. cublas), "
         "or pass bfloat16 A and B to wmma_bf16"),
        (lambda: gemm_driver.gemm(a, b, out=c, stream="s"), TypeError, None),
    ]
    for call, error, message in cases:
        with pytest.raises(error) as info:
            call()
        text = one_line(info)
        assert message is None or text == message


def test_gemm_with_transposed_inputs_and_no_out_asks_for_the_swap(fake_gemm_session):
    """Transposed A and B on a row-major-only kernel: the result would be allocated transposed
    (so the swap runs it); generic arrays cannot be allocated, so the error says out=."""
    at, bt = CudaArray(2, 4), CudaArray(3, 2)
    with pytest.raises(TypeError, match=r"^out= is needed"):
        gemm_driver.gemm(at.T, bt.T, kernel="naive")
    ct = CudaArray(3, 4)
    gemm_driver.gemm(at.T, bt.T, kernel="naive", out=ct.T, stream=2)
    assert fake_gemm_session.launchers[-1][1] == GemmProblem(3, 4, 2)


def test_plan_is_public():
    assert gemm_driver.plan is api.plan and gemm_driver.Plan is Plan
    assert {"plan", "Plan"} <= set(gemm_driver.__all__)


# --- cuBLAS with transposed operands, against a NumPy model of column-major GemmEx ------------------
class ModelGemmEx:
    """cublasGemmEx's column-major semantics on host memory (FP32 only): what the real
    library does with the arguments the provider computes."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def matrix(ptr, rows, cols, ld):  # column-major rows x cols at ptr with leading dimension ld
        flat = np.ctypeslib.as_array((ctypes.c_float * (ld * (cols - 1) + rows)).from_address(ptr))
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), (4, 4 * ld))

    def __call__(self, handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type,
                 ldc, compute, algo):
        self.calls.append((transa, transb, m, n, k, lda, ldb, ldc))
        op_a = self.matrix(a, k, m, lda).T if transa == 1 else self.matrix(a, m, k, lda)
        op_b = self.matrix(b, n, k, ldb).T if transb == 1 else self.matrix(b, k, n, ldb)
        out = self.matrix(c, m, n, ldc)
        out[...] = alpha._obj.value * (op_a.astype(np.float64) @ op_b) + beta._obj.value * out


class ModelHandle:
    def __init__(self):
        self._lib = types.SimpleNamespace(cublasGemmEx=ModelGemmEx())
        self.ptr, self.settings = 0xC0B1A5, []

    def use_stream(self, raw):
        """CublasHandle.use_stream's contract: a call where the stream changed."""
        if self.last("stream") != raw:
            self.settings.append(("stream", raw))

    def use_math_mode(self, mode):
        if self.last("mode") != mode:
            self.settings.append(("mode", mode))

    def gemm_ex_call(self, arguments):
        return lambda: self._lib.cublasGemmEx(self.ptr, *arguments)

    def last(self, what):
        return next((value for kind, value in reversed(self.settings) if kind == what), None)


def stored(x: np.ndarray, trans: bool, pad: int):
    """x's storage: row-major with ``pad`` spare columns, or (trans) its transpose so stored."""
    body = x.T if trans else x
    buffer = np.full((body.shape[0], body.shape[1] + pad), np.nan, np.float32)
    buffer[:, : body.shape[1]] = body
    return buffer, plans.Operand(buffer.ctypes.data, buffer.shape[1], 4, trans)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_cublas_transposed_operands_compute_the_product(trans_a, trans_b):
    from gemm_driver.kernels import providers

    rng = np.random.default_rng(2)
    m, n, k = 5, 3, 4
    a, b = rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    (_, a_op), (_, b_op), (c_mem, c_op) = stored(a, trans_a, 2), stored(b, trans_b, 1), stored(c, False, 3)
    handle = ModelHandle()
    session = types.SimpleNamespace(cublas=lambda: handle, stream=types.SimpleNamespace(handle=77),
                                    stream_per_call=True)
    problem = GemmProblem(m, n, k, 0.5, -2.0, trans_a=trans_a, trans_b=trans_b)
    planned = providers.PROVIDERS[0].launcher(providers.PROVIDERS[0], session, problem, a_op, b_op, c_op)
    planned.enqueue()
    np.testing.assert_allclose(c_mem[:, :n], 0.5 * (a.astype(np.float64) @ b) - 2.0 * c, rtol=1e-6, atol=1e-6)
    assert np.isnan(c_mem[:, n:]).all()  # nothing past the row written
    session.stream.handle = 78
    planned.enqueue()
    planned.enqueue()
    mode = int(precision.get("fp32").cublas.math_mode)
    assert handle.settings == [("stream", 77), ("mode", mode), ("stream", 78)]  # set on change only


@pytest.mark.parametrize("per_call", [False, True])
@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_a_cublas_launch_repointed_at_other_operands_computes_there(per_call, layout):
    """Launch.repoint of a cuBLAS GemmEx launch: the product at the new addresses (and leading
    dimensions), the first launch's output left as it was, one binding of the stream."""
    from gemm_driver.kernels import providers
    from gemm_driver.kernels.launch import Launch
    from gemm_driver.problem import layout_flags

    rng = np.random.default_rng(5)
    m, n, k = 6, 4, 5
    trans_a, trans_b = layout_flags(layout)
    draw = lambda rows, cols: rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
    first = [stored(draw(m, k), trans_a, 1), stored(draw(k, n), trans_b, 2), stored(np.zeros((m, n), np.float32), False, 1)]
    a2, b2 = draw(m, k), draw(k, n)
    second = [stored(a2, trans_a, 3), stored(b2, trans_b, 0), stored(np.zeros((m, n), np.float32), False, 2)]
    handle = ModelHandle()
    session = types.SimpleNamespace(cublas=lambda: handle, stream=types.SimpleNamespace(handle=77),
                                    stream_per_call=per_call)
    problem = GemmProblem(m, n, k, 1.5, 0.0, trans_a=trans_a, trans_b=trans_b)
    made = providers.PROVIDERS[0].launcher(providers.PROVIDERS[0], session, problem, *(op for _, op in first))
    launch = Launch("cublas", made.enqueue, session.stream)
    launch()
    before = first[2][0].copy()
    moved = launch.repoint(*(op for _, op in second))
    assert moved is not None and moved.target == "cublas" and moved.stream is launch.stream
    moved()
    np.testing.assert_allclose(second[2][0][:, :n], 1.5 * (a2.astype(np.float64) @ b2), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(first[2][0], before)
    mode = int(precision.get("fp32").cublas.math_mode)
    # the stream (a caller's) and the math mode were bound once, by the first launch
    assert handle.settings == ([("stream", 77)] if per_call else []) + [("mode", mode)]


# --- the linear layer: layouts, output type, bias and activation ------------------------------
@pytest.fixture
def epilogue_baseline(monkeypatch):
    """cublas_fp16 as it was (FP32 out, no epilogue) and cublaslt_fp16 declaring every layout,
    FP16 out and the epilogues: what the default-kernel choice sees once cuBLASLt's epilogue
    baseline lands, whatever the registry declares today."""
    import dataclasses

    from gemm_driver.problem import EPILOGUES, LAYOUTS

    plain = dataclasses.replace(kernels.get("cublas_fp16"), out_dtypes=("fp32",), epilogues=("none",))
    fused = dataclasses.replace(kernels.get("cublaslt_fp16"), layouts=LAYOUTS, out_dtypes=("fp32", "fp16"),
                                epilogues=EPILOGUES, measures=False, uses_scratch=False)
    monkeypatch.setitem(kernels.ALL, "cublas_fp16", plain)
    monkeypatch.setitem(kernels.ALL, "cublaslt_fp16", fused)


class CudaVector:
    def __init__(self, n, typestr="<f2"):
        CudaArray.next_ptr += 0x10000
        self.ptr = CudaArray.next_ptr
        self.shape = (n,)

    def reshape(self, rows, cols):
        view = CudaArray(1, self.shape[0], "<f2")
        view.__cuda_array_interface__["data"] = (self.ptr, False)
        view.ptr = self.ptr
        return view


def test_linear_call_maps_to_the_problem_and_the_fused_baseline(on_gpu, epilogue_baseline):
    """x @ W.t() + bias, GELU, FP16 out: layout nt, out bf16, epilogue bias_gelu, default kernel
    the first baseline declaring them; the bias pointer reaches the launcher."""
    s = FakeSession()
    p = Plan(s, 4, 3, 2, dtype="float16", trans_b=True, out_dtype="float16", bias=True, activation="gelu")
    assert p.kernel == "cublaslt_fp16"
    x, w, y, bias = CudaArray(4, 2, "<f2"), CudaArray(3, 2, "<f2"), CudaArray(4, 3, "<f2"), CudaVector(3)
    p(x, w.T, y, bias=bias, stream=1)
    _, problem, _, opb, opc, _ = s.launchers[0]
    assert (problem.layout, problem.out_dtype, problem.epilogue) == ("nt", "fp16", "bias_gelu")
    assert opb.trans and (opb.ptr, opb.ld) == (w.ptr, 2) and opc.itemsize == 2
    assert s.biases[0].ptr == bias.ptr
    p(x, w.T, y, bias=bias, stream=1)
    assert len(s.launchers) == 1 and len(s.runs) == 2  # packed once for these addresses


def test_activation_without_bias_adds_a_zero_vector(on_gpu, epilogue_baseline):
    s = FakeSession()
    p = Plan(s, 4, 3, 2, dtype="float16", out_dtype="float16", activation="relu")
    p(CudaArray(4, 2, "<f2"), CudaArray(2, 3, "<f2"), CudaArray(4, 3, "<f2"), stream=1)
    assert s.launchers[0][1].epilogue == "bias_relu" and s.biases[0].ptr == 0xB1A5
    assert s.workspaces == [("zero_bias_2", 6, True)]


def test_linear_refusals_are_one_line(on_gpu, epilogue_baseline):
    s = FakeSession()
    x, w, y = CudaArray(4, 2, "<f2"), CudaArray(2, 3, "<f2"), CudaArray(4, 3, "<f2")
    with pytest.raises(ValueError, match=r"^activation must be None, 'relu' or 'gelu' \(the tanh form\), got 'tanh'$"):
        Plan(s, 4, 3, 2, dtype="float16", activation="tanh")
    with pytest.raises(ValueError, match="pass a row-major out"):
        Plan(s, 4, 3, 2, dtype="float16", out_dtype="float16", bias=True, trans_c=True)
    plain = Plan(s, 4, 3, 2, dtype="float16")
    with pytest.raises(ValueError, match=r"^bias= was given to a plan made without one"):
        plain(x, w, CudaArray(4, 3), bias=CudaVector(3), stream=1)
    fused = Plan(s, 4, 3, 2, dtype="float16", out_dtype="float16", bias=True)
    with pytest.raises(ValueError, match=r"^this plan adds a bias: pass bias="):
        fused(x, w, y, stream=1)
    with pytest.raises(ValueError, match=r"^bias must be a vector of 3 float16 elements \(out's type\), got 4"):
        fused(x, w, y, bias=CudaVector(4), stream=1)


def test_no_baseline_for_the_epilogue_says_so(on_gpu, monkeypatch):
    import dataclasses

    for name in ("cublas_fp16", "cublaslt_fp16", "torch_fp16"):
        monkeypatch.setitem(kernels.ALL, name, dataclasses.replace(kernels.get(name), out_dtypes=("fp32",),
                                                                    epilogues=("none",)))
    with pytest.raises(ValueError, match=r"^no baseline here computes float16 layout nn with output type fp16 and "
                                         r"epilogue bias_gelu"):
        Plan(FakeSession(), 4, 3, 2, dtype="float16", out_dtype="float16", bias=True, activation="gelu")


# --- the raw-address path (run_pointers) -------------------------------------------------------
def test_run_pointers_shares_the_launches_of_run_and_follows_the_stream(on_gpu):
    s = FakeSession()
    p = Plan(s, 4, 3, 2)
    a, b, c = CudaArray(4, 2), CudaArray(2, 3), CudaArray(4, 3)
    p(a, b, c, stream=11)  # checked and packed once through run()
    p.run_pointers(a.ptr, b.ptr, c.ptr, 12, lda=2, ldb=3, ldc=3)
    assert len(s.launchers) == 1 and s.runs == [11, 12]
    p.run_pointers(a.ptr, b.ptr, c.ptr + 0x100, 13, lda=2, ldb=3, ldc=3)  # new out: a new Launch
    assert len(s.launchers) == 2 and s.runs == [11, 12, 13]
    _, problem, opa, opb, opc, _ = s.launchers[1]
    assert problem == GemmProblem(4, 3, 2)
    assert (opa.ptr, opa.ld, opa.itemsize, opb.ptr, opb.ld) == (a.ptr, 2, 4, b.ptr, 3)
    assert (opc.ptr, opc.ld) == (c.ptr + 0x100, 3) and p.launches_made == 2


def test_a_launch_at_new_addresses_is_repointed_from_the_last_where_its_recipe_can(on_gpu):
    s = FakeSession()
    p = Plan(s, 4, 3, 2)
    p.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    p._launches[next(iter(p._launches))].repoints = moved = []  # as a Hopper recipe's Launch
    p.run_pointers(0xA100, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    assert len(s.launchers) == 1 and p.launches_made == 2 and p.launches_repointed == 1
    (a, b, c, bias), = moved
    assert (a.ptr, b.ptr, c.ptr, bias) == (0xA100, 0xB000, 0xC000, 0) and s.runs == [1, 1]
    p.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)  # the first addresses: kept, not made again
    assert p.launches_made == 2 and len(moved) == 1


def test_a_cublaslt_launch_is_repointed_only_where_a_new_launcher_would_pick_the_same_matmul(monkeypatch):
    from gemm_driver.cuda import cublaslt
    from gemm_driver.kernels.launch import Launch

    class Matmul:
        timings, runs = {"measured": 1.0}, []

        def run(self, a, b, c, stream, alpha, beta, bias=0, scales=None):
            self.runs.append((a, b, c, bias))

        def describe(self):
            return {}

    monkeypatch.setattr(cublaslt, "version", lambda: (13, 1, 0))
    session = types.SimpleNamespace(workspace=lambda name, nbytes: 0x100000, stream="stream",
                                    cublaslt_matmul=lambda q, scratch, alignment, bias_alignment: Matmul())
    lt = kernels.get("cublaslt_bf16")
    op = lambda ptr, ld: plans.Operand(ptr, ld, 2)
    problem = GemmProblem(64, 64, 64, out_dtype="bf16", epilogue="bias")
    made = lt.launcher(lt, session, problem, op(0xA000, 64), op(0xB000, 64), op(0xC000, 64), bias=0xD000)
    launch = Launch("cublaslt_bf16", made.enqueue, "stream")
    moved = launch.repoint(op(0xA400, 64), op(0xB000, 64), op(0xC100, 64), 0xD100)  # 256-byte aligned again
    moved()
    assert Matmul.runs == [(0xA400, 0xB000, 0xC100, 0xD100)]
    assert launch.repoint(op(0xA010, 64), op(0xB000, 64), op(0xC000, 64), 0xD000) is None  # A 16-byte aligned
    assert launch.repoint(op(0xA000, 72), op(0xB000, 64), op(0xC000, 64), 0xD000) is None  # another lda
    assert launch.repoint(op(0xA000, 64), op(0xB000, 64), op(0xC000, 64), 0xD002) is None  # the bias's alignment


def test_a_measuring_librarys_launch_is_repointed_without_measuring_again(on_gpu, fences, monkeypatch):
    """cuBLASLt measures its candidates when a launcher is made, so a new one runs on the
    Session's stream between two events; one re-pointed (same alignments) skips all that."""
    import dataclasses

    monkeypatch.setitem(kernels.ALL, "cublas", dataclasses.replace(kernels.get("cublas"), measures=True))
    s = FakeSession()
    p = Plan(s, 4, 3, 2)
    p.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    assert len(s.launchers) == 1 and ("record", 1) in fences  # made on the Session's stream, ordered by events
    made = len(fences)
    p._launches[next(iter(p._launches))].repoints = moved = []  # as cuBLASLt's at equal alignments
    p.run_pointers(0xA100, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    assert len(s.launchers) == 1 and p.launches_repointed == 1 and len(moved) == 1 and len(fences) == made
    p._launches[next(reversed(p._launches))].repoints = None  # other alignments: it cannot
    p.run_pointers(0xA104, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    assert len(s.launchers) == 2 and p.launches_repointed == 1 and len(fences) > made


def test_run_pointers_applies_the_operand_swap(on_gpu):
    s = FakeSession()
    p = Plan(s, 4, 3, 2, trans_c=True)  # run as (n, m, k) on (B^T, A^T)
    p.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=4)
    _, problem, first, second, out, _ = s.launchers[0]
    assert (problem.m, problem.n) == (3, 4)
    assert (first.ptr, first.ld, second.ptr, second.ld, out.ptr, out.ld) == (0xB000, 3, 0xA000, 2, 0xC000, 4)


def test_run_pointers_bias_rules(on_gpu, epilogue_baseline):
    s = FakeSession()
    fused = Plan(s, 4, 3, 2, dtype="float16", out_dtype="float16", bias=True)
    fused.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3, bias=0xD000)
    assert s.biases[-1].ptr == 0xD000 and s.biases[-1].itemsize == 2
    with pytest.raises(ValueError, match=r"^this plan adds a bias: pass bias="):
        fused.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    relu = Plan(s, 4, 3, 2, dtype="float16", out_dtype="float16", activation="relu")
    relu.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    assert s.biases[-1].ptr == 0xB1A5  # the zero vector
    plain = Plan(s, 4, 3, 2, dtype="float16")
    with pytest.raises(ValueError, match=r"^bias= was given to a plan made without one"):
        plain.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3, bias=0xD000)


def test_run_pointers_refuses_empty_problems(on_gpu):
    with pytest.raises(ValueError, match=r"^run_pointers launches a GEMM; an empty problem"):
        Plan(FakeSession(), 4, 0, 2).run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=1, ldc=1)


def test_run_pointers_orders_the_scratch_across_streams(on_gpu, fences, monkeypatch):
    import dataclasses

    monkeypatch.setitem(kernels.ALL, "cublas", dataclasses.replace(kernels.get("cublas"), uses_scratch=True))
    p = Plan(FakeSession(), 4, 3, 2)
    p.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    p.run_pointers(0xA000, 0xB000, 0xC000, 2, lda=2, ldb=3, ldc=3)
    assert fences == [("record", 1), ("wait", 2), ("record", 2)]


def test_a_launch_that_touches_no_scratch_is_not_ordered_around_it(on_gpu, fences, monkeypatch):
    """A target that may use scratch, whose launch's recipe says this one does not (a Hopper
    launch that neither splits K nor packs): no event, no wait."""
    import dataclasses

    monkeypatch.setitem(kernels.ALL, "cublas", dataclasses.replace(kernels.get("cublas"), uses_scratch=True))
    monkeypatch.setattr(FakeLaunch, "uses_scratch", False)
    p = Plan(FakeSession(), 4, 3, 2)
    p.run_pointers(0xA000, 0xB000, 0xC000, 1, lda=2, ldb=3, ldc=3)
    p.run_pointers(0xA000, 0xB000, 0xC000, 2, lda=2, ldb=3, ldc=3)
    assert fences == []
