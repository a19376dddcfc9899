"""The reference kept on the GPU (device_epilogue.py), what the CPU can hold it to: its kernel
builds for every architecture the project targets without spills, takes verify.py's constants
in the order it declares them, and its formulas, written out in NumPy statement by statement,
give verify's bits; cases take the path from the right conditions, and on it ``verify`` never
computes the host's reference. tests/test_device_epilogue_gpu.py holds the kernel itself to
the host's reference on a GPU."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from gemm_driver import case as case_module
from gemm_driver import device_epilogue, verify
from gemm_driver import precision as _precision
from gemm_driver.case import PreparedCase
from gemm_driver.cuda import nvrtc
from gemm_driver.device_check import ReferenceOnDevice
from gemm_driver.device_reference import HOST_FLOPS, GpuProducts, products_for
from gemm_driver.kernels.sources import included_headers, read_source
from gemm_driver.operands import random_bias, random_operands
from gemm_driver.problem import EPILOGUES, LAYOUTS, OUT_DTYPES, GemmProblem, layout_flags


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_epilogue_kernels_build_without_spills(arch):
    source = device_epilogue.SOURCE
    compiled = nvrtc.compile_cuda(read_source(source), "reference_epilogue.cu", arch,
                                  headers=included_headers(source))
    assert compiled.cubin
    # from the cubin (its frames) and the ptxas log where there is one: a compiler answering
    # from its cache prints none (nvrtc.cubin_resources)
    resources = compiled.resources
    assert set(resources) == {device_epilogue.EPILOGUE_ENTRY, device_epilogue.ABSOLUTE_ENTRY}
    assert {(r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes) for r in resources.values()} == {(0, 0, 0)}


def _parameters(entry: str) -> list[tuple[str, str]]:
    """(C type, name) of each parameter of ``entry`` in reference_epilogue.cu, comments dropped."""
    text = read_source(device_epilogue.SOURCE).decode()
    declaration = re.search(rf'extern "C" __global__ void {entry}\((.*?)\)\s*{{', text, re.S).group(1)
    declaration = re.sub(r"//[^\n]*", "", declaration)
    parameters = [p.strip() for p in declaration.split(",")]
    return [tuple(re.fullmatch(r"(.*?)\s*\b(\w+)", p).groups()) for p in parameters]


def test_the_signatures_declare_the_kernels_parameters_and_the_scalars_their_order():
    kinds = {"double*": "ptr", "const void*": "ptr", "const double*": "ptr", "long long": "long long",
             "int": "int", "double": "double"}
    epilogue = _parameters(device_epilogue.EPILOGUE_ENTRY)
    assert [kinds[t] for t, _ in epilogue] == list(device_epilogue.EPILOGUE_SIGNATURE)
    assert [kinds[t] for t, _ in _parameters(device_epilogue.ABSOLUTE_ENTRY)] == \
           list(device_epilogue.ABSOLUTE_SIGNATURE)
    doubles = [name for kind, name in epilogue if kind == "double"]
    assert doubles == [field.name for field in dataclasses.fields(device_epilogue.EpilogueScalars)]
    assert set(device_epilogue.ACTIVATION) == set(EPILOGUES)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16", "fp8"])
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_the_scalars_are_the_constants_verify_uses(precision, out_dtype, epilogue):
    problem = GemmProblem(5, 6, 77, -1.5, 0.25, out_dtype=out_dtype, epilogue=epilogue)
    scalars = device_epilogue.epilogue_scalars(problem, precision)
    assert (scalars.alpha, scalars.abs_alpha, scalars.beta, scalars.abs_beta) == (-1.5, 1.5, 0.25, 0.25)
    assert scalars.bound_factor == _precision.get(precision).bound_factor(77 + (epilogue != "none"))
    assert (scalars.slack, scalars.tiny) == (verify.SLACK, float(np.finfo(np.float32).tiny))
    assert scalars.rounding == _precision.OUTPUT_ROUNDING[out_dtype]
    assert scalars.output_floor == _precision.OUTPUT_FLOOR[out_dtype]
    assert (scalars.gelu_slope, scalars.gelu_evaluation) == (_precision.GELU_SLOPE, _precision.GELU_EVALUATION)
    assert (scalars.gelu_cubic, scalars.gelu_scale) == (0.044715, float(np.sqrt(2.0 / np.pi)))
    assert all(type(value) is float for value in dataclasses.astuple(scalars))  # packed as C doubles


def _kernel_model(problem: GemmProblem, precision: str, product: np.ndarray, magnitude: np.ndarray,
                  c: np.ndarray | None, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """reference_epilogue.cu's statements, one NumPy operation each (element-wise float64
    operations round as __dmul_rn / __dadd_rn do), with the scalars the kernel is given."""
    s = device_epilogue.epilogue_scalars(problem, precision)
    v = product * s.alpha
    m = magnitude * s.abs_alpha
    if c is not None and problem.beta != 0:
        stored = c.astype(np.float64)
        v = v + s.beta * stored
        m = m + s.abs_beta * np.abs(stored)
    before_bias = v
    if bias is not None:
        v = v + bias.astype(np.float64)
        m = m + np.abs(bias.astype(np.float64))
    pre = v
    if problem.epilogue == "bias_relu":
        expected = np.maximum(pre, 0.0)
    elif problem.epilogue == "bias_gelu":  # gelu(): pow and tanh as NumPy evaluates them here
        inner = np.power(pre, 3.0) * s.gelu_cubic
        inner = ((inner + pre) * s.gelu_scale)
        inner = np.tanh(inner) + 1.0
        expected = (0.5 * pre) * inner
    else:
        expected = pre
    error = (s.bound_factor * m) * s.slack + s.tiny
    if bias is not None:
        error = error + (np.maximum(np.abs(before_bias), np.abs(pre)) + error) * s.rounding
    if problem.epilogue == "bias_gelu":
        error = error * s.gelu_slope
        error = error + np.abs(pre) * s.gelu_evaluation
    bound = (np.abs(expected) + error) * s.rounding
    bound = bound + error
    bound = bound + s.output_floor
    return expected, bound


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize("layout, alpha, beta", [("nn", 1.0, 0.0), ("nt", -1.0, 1.0), ("tn", 0.75, -2.5),
                                                 ("tt", -0.3, 0.5)])
def test_the_kernels_formulas_give_verifys_bits(out_dtype, epilogue, layout, alpha, beta):
    """The kernel's order of operations, as NumPy, against verify.reference and output_bound on
    the same products: equal bit for bit (GELU too, its pow and tanh being NumPy's on both sides)."""
    trans_a, trans_b = layout_flags(layout)
    problem = GemmProblem(37, 29, 53, alpha, beta, trans_a=trans_a, trans_b=trans_b, out_dtype=out_dtype,
                          epilogue=epilogue)
    rng = np.random.default_rng([37, LAYOUTS.index(layout), OUT_DTYPES.index(out_dtype), EPILOGUES.index(epilogue)])
    a, b, c = random_operands(problem, rng, "bf16")
    bias = random_bias(problem, rng)
    products = []  # the host's two products as it computed them (verify updates them in place)

    def recorded(x, y):
        products.append(np.matmul(x, y))
        return products[-1].copy()

    host = verify.reference(problem, a, b, c, bias, recorded)
    product, magnitude = products
    expected, bound = _kernel_model(problem, "bf16", product, magnitude, c, bias)
    np.testing.assert_array_equal(expected, host.value)
    np.testing.assert_array_equal(bound, verify.output_bound(problem, host, "bf16"))


def test_which_cases_keep_their_reference_on_the_gpu():
    big = GemmProblem(1024, 1024, 2048)
    gpu = GpuProducts(session=None)
    keeps = device_epilogue.keeps_reference_on_device
    assert keeps(big, gpu, True)
    assert not keeps(big, gpu, False)  # D checked on the host: the host's reference
    assert not keeps(big, None, True) and not keeps(big, np.matmul, True)  # products on the host
    assert not keeps(GemmProblem(512, 1024, 2048, batch=2), gpu, True)  # batched: the host's
    assert not keeps(GemmProblem(1024, 1024, 0), gpu, True)  # no product
    assert isinstance(products_for(None, big), GpuProducts) and big.flops >= HOST_FLOPS
    assert products_for(None, GemmProblem(64, 64, 64)) is None
    case = PreparedCase.random(GemmProblem(8, 8, 8), "fp32", [0], products=gpu, check_on_device=True)
    assert case.keeps_reference_on_device and "reference" not in case.__dict__
    assert not PreparedCase.random(GemmProblem(8, 8, 8), "fp32", [0], products=gpu).keeps_reference_on_device


class _Launch:
    """Stands in for a Launch: records when it runs."""

    def __init__(self, events: list):
        self.events = events

    def __call__(self) -> None:
        self.events.append("launch")

    def synchronize(self) -> None:
        pass


class _Checker:
    """Stands in for device_check.OutputChecker: records what it is asked to check."""

    made: list = []

    def __init__(self, session):
        _Checker.made.append(self)
        self.calls = []

    def check(self, matrix, out_dtype, reference, norm, guard_violations=0):
        self.calls.append((matrix, out_dtype, reference, norm, guard_violations))
        return verify.verdict(1, 0, 0, 0.0, 0.0, norm, None, guard_violations)

    def close(self) -> None:
        pass


class _Reference:
    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def device_path(monkeypatch):
    """case.py's GPU calls replaced: C's fill, the device reference, the checker (events in order)."""
    events, made = [], {}
    _Checker.made = []

    def on_device(session, problem, precision, a, b, c, bias):
        events.append("reference")
        made["args"] = (session, problem, precision, a, b, c, bias)
        made["reference"] = _Reference()
        return made["reference"], 3.5

    monkeypatch.setattr(case_module, "fill_output", lambda matrix, problem, c: events.append("fill"))
    monkeypatch.setattr(case_module, "reference_on_device", on_device)
    monkeypatch.setattr(case_module, "OutputChecker", _Checker)
    return events, made


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_verify_on_the_device_path_never_computes_the_hosts_reference(device_path, beta):
    events, made = device_path
    problem = GemmProblem(8, 8, 8, 1.0, beta, epilogue="bias_gelu", out_dtype="bf16")
    case = PreparedCase.random(problem, "bf16", [3], products=GpuProducts(session=None), check_on_device=True)
    c = object()
    case.device = lambda: (None, None, c)
    session = object()
    for _ in range(2):
        assert case.verify(session, _Launch(events)).ok
    assert events == ["fill", "reference", "launch", "fill", "launch"]  # made once, before the first launch
    assert made["args"][:5] == (session, problem, "bf16", case.a_host, case.b_host)
    assert made["args"][5] is (c if beta else None) and made["args"][6] is case.bias_host
    (checker,) = _Checker.made
    assert [call[2:4] for call in checker.calls] == [(made["reference"], 3.5)] * 2
    assert "reference" not in case.__dict__ and "bound" not in case.__dict__  # the host's, never computed
    case.close()
    assert made["reference"].closed


def test_verify_off_the_device_path_uploads_the_hosts_reference(device_path, monkeypatch):
    events, _ = device_path
    uploads = []
    monkeypatch.setattr(ReferenceOnDevice, "uploaded",
                        classmethod(lambda cls, expected, bound: uploads.append((expected, bound)) or _Reference()))
    case = PreparedCase.random(GemmProblem(8, 8, 8, 1.0, 0.5), "fp32", [3], check_on_device=True)
    assert not case.keeps_reference_on_device
    case.device = lambda: (None, None, object())
    case.verify(object(), _Launch(events))
    assert events == ["fill", "launch"]
    (expected, bound), = uploads
    assert expected is case.reference.value and np.array_equal(bound, case.bound)
    (checker,) = _Checker.made
    assert checker.calls[0][3] == case.reference.norm
