"""GPU tests of the ladder rungs' fast paths, which drawn cases rarely reach.

The Hypothesis cases in test_gpu.py draw M, N, K <= 300 with random padding and
misalignment, so a case where A and B are both 16-byte aligned with ld % 4 == 0 and a
whole 128 x 128 block lies inside C (the float4 path of vectorized and later rungs) comes
up about once in 400 draws. These cases pin each path down on purpose: float4 interior
blocks beside scalar edge blocks, a K tail inside the float4 path, a partial float4 at
B's right edge for cp.async, and the scalar path on odd leading dimensions.
"""

from __future__ import annotations

import pytest

from gemm_driver.checking import check_case
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase

pytestmark = pytest.mark.gpu

RUNGS = [
    ("blocktile_1d", {}), ("blocktile_1d", {"BM": 128, "TM": 16}),
    ("blocktile_2d", {}), ("blocktile_2d", {"BM": 128, "BK": 16}),
    ("vectorized", {}), ("vectorized", {"BM": 128, "BK": 8}),
    ("bank_conflict_free", {}), ("bank_conflict_free", {"BM": 64, "BK": 8}),
    ("double_buffered", {"ASYNC": 0, "STAGES": 2}),
    ("double_buffered", {"ASYNC": 0, "STAGES": 2, "BM": 64}),
    ("double_buffered", {"ASYNC": 1, "STAGES": 2}),
    ("double_buffered", {"ASYNC": 1, "STAGES": 3, "BM": 64}),
    ("double_buffered", {"ASYNC": 1, "STAGES": 4}),
]

# (m, n, k, ld pads, misalignments): what each one reaches is in the comment.
CASES = [
    (256, 256, 64, (0, 0, 0), (0, 0, 0)),  # all blocks float4, K a multiple of BK
    (256, 384, 67, (0, 0, 0), (0, 0, 0)),  # float4 blocks with a K tail of 3
    (384, 256, 5, (3, 0, 0), (0, 0, 0)),  # only a K tail (lda = 8)
    (300, 258, 131, (1, 2, 0), (0, 0, 0)),  # ldb = 260: float4 B with a partial float4 at N's edge
    (257, 259, 100, (0, 1, 4), (0, 0, 0)),  # edge blocks beside interior float4 blocks, padded ldc
    (256, 256, 256, (4, 4, 4), (0, 0, 0)),  # padded leading dimensions, still aligned
    (256, 256, 256, (0, 0, 0), (1, 2, 3)),  # misaligned pointers: the scalar path everywhere
    (261, 263, 269, (0, 0, 0), (0, 0, 0)),  # odd leading dimensions: the scalar path
]


@pytest.mark.parametrize("name,tunables", RUNGS, ids=[f"{n}{t or ''}" for n, t in RUNGS])
def test_ladder_paths(session, name, tunables):
    for index, (m, n, k, pads, misalign) in enumerate(CASES):
        for alpha, beta in ((1.0, 0.0), (-1.25, 0.5)):
            case = GemmCase(GemmProblem(m, n, k, alpha, beta), pads, misalign, data_seed=index)
            verification = check_case(session, name, case, tunables)
            assert verification.ok, f"{name}{tunables} {case.describe()}: {verification.message}"
