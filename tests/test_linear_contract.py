"""The linear-layer fields of a problem (layout, output type, epilogue) and the capability
fields every target declares: refused with one line naming what is allowed. CPU only."""

from __future__ import annotations

import types

import pytest

from gemm_driver import kernels
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.kernels.providers import Provider
from gemm_driver.kernels.spec import KernelSpec
from gemm_driver.kernels.target import check_capabilities
from gemm_driver.problem import EPILOGUES, LAYOUTS, OUT_DTYPES, GemmProblem, layout_flags
from gemm_driver.session import bias_pointer, check_operands


def test_defaults_are_todays_gemm():
    p = GemmProblem(3, 4, 5)
    assert (p.trans_a, p.trans_b, p.out_dtype, p.epilogue) == (False, False, "fp32", "none")
    assert p.layout == "nn" and p.is_default_variant and not p.has_bias
    assert GemmProblem(3, 4, 5) == GemmProblem(3, 4, 5, 1.0, 0.0, 1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_spells_the_flags(layout):
    trans_a, trans_b = layout_flags(layout)
    p = GemmProblem(2, 3, 4, trans_a=trans_a, trans_b=trans_b)
    assert p.layout == layout and p.is_default_variant == (layout == "nn")


def test_nt_is_x_times_w_transposed():
    assert layout_flags("nt") == (False, True)


@pytest.mark.parametrize("field, bad, allowed", [
    ("out_dtype", "int8", "fp32, bf16, fp16"), ("out_dtype", "float32", "fp32, bf16, fp16"),
    ("epilogue", "gelu", "none, bias, bias_relu, bias_gelu"), ("epilogue", None, "none, bias, bias_relu, bias_gelu"),
])
def test_bad_out_dtype_or_epilogue_names_what_is_allowed(field, bad, allowed):
    with pytest.raises(ValueError, match=rf"^{field} {bad!r} is not one of {allowed}$"):
        GemmProblem(2, 2, 2, **{field: bad})


@pytest.mark.parametrize("bad", [1, 0, "t", None])
def test_trans_flags_are_booleans(bad):
    with pytest.raises(ValueError, match=r"^trans_b must be True or False"):
        GemmProblem(2, 2, 2, trans_b=bad)


def test_bad_layout_names_the_layouts():
    with pytest.raises(ValueError, match=r"layout 'nx' is not one of nn, nt, tn, tt"):
        layout_flags("nx")


def _spec(**fields) -> KernelSpec:
    return KernelSpec("probe", "a probe", "cu/simt/naive.cu", "sgemm_naive", block=lambda t: (16, 16, 1),
                      grid=lambda p, t: (1, 1, 1), **fields)


def test_a_kernel_takes_nn_fp32_none_unless_it_declares_more():
    spec = _spec()
    spec.validate(GemmProblem(8, 8, 8))
    assert not spec.transposes
    with pytest.raises(UnsupportedProblem, match=r"^probe does not take layout 'nt'; it takes nn$"):
        spec.validate(GemmProblem(8, 8, 8, trans_b=True))
    with pytest.raises(UnsupportedProblem, match=r"^probe does not take output type 'bf16'; it takes fp32$"):
        spec.validate(GemmProblem(8, 8, 8, out_dtype="bf16"))
    with pytest.raises(UnsupportedProblem, match=r"^probe does not take epilogue 'bias'; it takes none$"):
        spec.validate(GemmProblem(8, 8, 8, epilogue="bias"))


def test_a_kernel_that_declares_them_is_validated_in_them():
    spec = _spec(precision="bf16", layouts=("nn", "nt"), out_dtypes=("fp32", "bf16"), epilogues=EPILOGUES)
    assert spec.transposes
    spec.validate(GemmProblem(8, 8, 8, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"))
    with pytest.raises(UnsupportedProblem, match=r"it takes nn, nt$"):
        spec.validate(GemmProblem(8, 8, 8, trans_a=True))


@pytest.mark.parametrize("field, value", [("layouts", ("nn", "NT")), ("out_dtypes", ()), ("epilogues", "none"),
                                          ("out_dtypes", ("fp32", "fp8"))])
def test_a_declaration_outside_the_spelled_values_is_refused_at_registration(field, value):
    with pytest.raises(ValueError, match=rf"^probe: {field} must be a non-empty tuple of "):
        _spec(**{field: value})
    with pytest.raises(ValueError, match=rf"^probe: {field} must be a non-empty tuple of "):
        Provider("probe", "a probe", **{field: value})


def test_every_registered_target_declares_valid_capabilities():
    for target in (*kernels.SPECS, *kernels.PROVIDERS):
        assert set(target.layouts) <= set(LAYOUTS) and set(target.out_dtypes) <= set(OUT_DTYPES)
        assert set(target.epilogues) <= set(EPILOGUES)
        assert target.transposes == (set(target.layouts) != {"nn"})


def test_a_provider_refuses_what_it_does_not_declare_before_it_launches():
    provider = Provider("probe", "a probe", launcher=lambda *a, **k: None, precision="bf16",
                        layouts=("nn", "nt"), out_dtypes=("fp32", "bf16"))
    check_capabilities(provider, GemmProblem(4, 4, 4, trans_b=True, out_dtype="bf16"))
    with pytest.raises(UnsupportedProblem, match=r"^probe does not take epilogue 'bias_relu'; it takes none$"):
        check_capabilities(provider, GemmProblem(4, 4, 4, epilogue="bias_relu"))
    operand = types.SimpleNamespace(ptr=0, ld=4, itemsize=2)
    with pytest.raises(UnsupportedProblem, match=r"does not take layout 'tn'"):
        check_operands(provider, GemmProblem(4, 4, 4, trans_a=True), operand, operand)


def test_bias_goes_with_an_epilogue_and_only_with_one():
    vector = types.SimpleNamespace(ptr=0x1000, ld=8, itemsize=2)
    assert bias_pointer(GemmProblem(2, 8, 2), None) == 0
    assert bias_pointer(GemmProblem(2, 8, 2, epilogue="bias_relu"), vector) == 0x1000
    with pytest.raises(ValueError, match=r"^epilogue 'bias_gelu' needs a bias vector of N elements$"):
        bias_pointer(GemmProblem(2, 8, 2, epilogue="bias_gelu"), None)
    with pytest.raises(ValueError, match=r"^epilogue 'none' reads no bias"):
        bias_pointer(GemmProblem(2, 8, 2), vector)


def test_launch_context_bias_defaults_to_null():
    assert LaunchContext.__dataclass_fields__["bias"].default == 0
