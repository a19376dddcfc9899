"""mma_sync as a linear layer, without a GPU: D in FP32 or the inputs' 16-bit type and the fused
epilogues (cu/common/epilogue.cuh) set by the problem, the bias handed to the kernel last, and
the builds of the new store code (no spill, no local memory, one rounding, GELU on the MUFU).
The results on the GPU: tests/test_mma_sync_linear_gpu.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import build_matrix
from gemm_driver import kernels
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.inspection import disassemble
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.problem import EPILOGUES, GemmProblem

NAMES = ["mma_sync_bf16", "mma_sync_fp16", "mma_sync_tf32", "mma_sync_tuned_bf16", "mma_sync_tuned_fp16",
         "mma_sync_tuned_tf32"]


def test_output_types_and_epilogues_are_declared_per_precision():
    for name in NAMES:
        spec = kernels.KERNELS[name]
        own = {"bf16": ("bf16",), "fp16": ("fp16",), "tf32": ()}[spec.precision]
        assert spec.out_dtypes == ("fp32", *own) and spec.epilogues == EPILOGUES, name


@pytest.mark.parametrize("out, epilogue, codes", [("fp32", "none", (0, 0)), ("bf16", "bias", (1, 1)),
                                                  ("bf16", "bias_gelu", (1, 3)), ("fp32", "bias_relu", (0, 2))])
def test_the_problem_sets_out_and_epi(out, epilogue, codes):
    t = kernels.KERNELS["mma_sync_bf16"].validate(GemmProblem(64, 64, 64, out_dtype=out, epilogue=epilogue))
    assert (t["OUT"], t["EPI"]) == codes


def test_what_is_not_taken_or_contradicts_the_problem_is_refused_in_one_line():
    with pytest.raises(UnsupportedProblem) as info:
        kernels.KERNELS["mma_sync_tf32"].validate(GemmProblem(64, 64, 64, out_dtype="bf16"))
    assert "does not take output type 'bf16'" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UnsupportedProblem) as info:
        kernels.KERNELS["mma_sync_fp16"].validate(GemmProblem(64, 64, 64, out_dtype="fp16"), {"OUT": 0})
    assert "OUT is set by the problem (out fp16, epilogue none): 2, not 0" in str(info.value)
    with pytest.raises(UnsupportedProblem, match="does not take output type 'fp16'"):
        kernels.KERNELS["mma_sync_bf16"].validate(GemmProblem(64, 64, 64, out_dtype="fp16"))
    # compile and inspect build without a problem: an output type or epilogue it never runs is refused too
    with pytest.raises(UnsupportedProblem) as info:
        kernels.KERNELS["mma_sync_tf32"].resolve({"OUT": 1})
    assert str(info.value) == "mma_sync_tf32: OUT=1 is not among what it takes: 0 (fp32)"
    with pytest.raises(UnsupportedProblem, match="OUT=2 is not among what it takes: 0 .fp32., 1 .bf16."):
        kernels.KERNELS["hopper_bf16"].resolve({"OUT": 2})
    assert kernels.KERNELS["mma_sync_bf16"].resolve({"OUT": 1, "EPI": 3})["EPI"] == 3


class FakeKernel:
    def __init__(self, log):
        self.log = log

    def pack(self, *args):
        return args

    def launch(self, grid, block, args, stream):
        self.log.append(args)


def test_the_bias_is_the_kernels_last_argument():
    spec = kernels.KERNELS["mma_sync_bf16"]
    problem = GemmProblem(128, 256, 64, out_dtype="bf16", epilogue="bias_gelu")
    log = []
    operand = lambda ptr, ld, size: SimpleNamespace(ptr=ptr, ld=ld, itemsize=size)
    ctx = LaunchContext(spec, {"main": FakeKernel(log)}, problem, operand(0x1000, 64, 2), operand(0x2000, 256, 2),
                        operand(0x3000, 256, 2), spec.validate(problem), "stream", None, bias=0xB1A5)
    spec.launch_recipe(ctx)()
    assert log == [(128, 256, 64, 1.0, 0x1000, 64, 0x2000, 256, 0.0, 0x3000, 256, 0xB1A5)]


BUILDS = [("mma_sync_bf16", {"OUT": 1, "EPI": 3}), ("mma_sync_fp16", {"OUT": 2, "EPI": 2, "ASYNC": 0}),
          ("mma_sync_tf32", {"OUT": 0, "EPI": 3}), ("mma_sync_tuned_bf16", {"OUT": 0, "EPI": 1})]


# Each on one architecture (sm_80 or sm_90: one source, one store code; both under --full-matrix),
# as the build matrix builds a code path: the matrix's, where it makes the same build, else drawn.
@pytest.mark.parametrize("name, tunables, arch", [
    pytest.param(name, tunables, arch, marks=build_matrix.group(kernels.KERNELS[name], arch, tunables))
    for name, tunables in BUILDS for arch in build_matrix.archs(kernels.KERNELS[name], tunables)])
def test_linear_builds_have_no_spill_round_once_and_run_gelu_on_the_mufu(name, tunables, arch):
    result = build_matrix.built(kernels.KERNELS[name], arch, tunables)
    entry = result.entries["main"]
    r = result.compiled.resources[entry]
    assert (r.spill_bytes, r.stack_bytes) == (0, 0), r
    opcodes = [i.opcode for i in disassemble(result.compiled.cubin, entry).instructions]
    assert not [o for o in opcodes if o.split(".")[0] in ("LDL", "STL")]
    assert sum(o.startswith("HMMA") for o in opcodes) >= 8
    assert any(o.startswith("F2FP") for o in opcodes) == bool(tunables["OUT"])  # two values rounded at a time
    if tunables["EPI"] == 3:  # GELU: one tanh on the MUFU, no exp (common/epilogue.cuh)
        mufu = {o for o in opcodes if o.startswith("MUFU")}
        assert "MUFU.TANH" in mufu and "MUFU.EX2" not in mufu, mufu
