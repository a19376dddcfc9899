"""Probe: the host time of a Plan call at addresses it has seen against new ones, and the pieces
of making a Launch (the torch op's first layer meets a new input address every training step).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/launch_cost.py [--profile]
BF16 x @ W^T with x 4096 x 512 and W 2048 x 512 (the first layer of tools/train_mlp.py), BF16
out. Microseconds per call, host time up to the last call queued, over CALLS calls after
WARMUP untimed ones:

  hit        Plan.run_pointers at addresses it has a Launch for
  miss       Plan.run_pointers with A 16 bytes further on each call: a Launch is made each time
             (re-pointed from the last one where the recipe can: the "re-pointed" column)
  encode     one tensor map (tensor_map.encode_tiled_2d), as the Hopper recipe makes 2-3 a Launch
  readdress  one tensor map pointed at a new address in place (tensor_map.readdress), as a
             re-pointed Launch does for each operand that moved
  resident   the driver's occupancy answer a persistent grid is sized by (asked once per
             loaded kernel and launch shape since: recipe.resident_clusters)
  pack       Kernel.pack of the Hopper entry's arguments (three tensor maps among them)

--profile: hopper_bf16's misses once more under cProfile, its 20 costliest functions (own
time) printed last: where a new address's time goes.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

from gemm_driver import api, kernels
from gemm_driver.cuda.memory import DeviceBuffer
from gemm_driver.cuda.module import PackedArgs
from gemm_driver.cuda.tensor_map import encode_tiled_2d
from gemm_driver.kernels.hopper import geometry, recipe, rungs

CALLS, WARMUP = 300, 30
M, N, K = 4096, 2048, 512


def per_call(run) -> float:
    for i in range(WARMUP):
        run(i)
    start = time.perf_counter()
    for i in range(WARMUP, WARMUP + CALLS):
        run(i)
    return (time.perf_counter() - start) / CALLS * 1e6


def main() -> None:
    session = api.default_session()
    stream = int(session.stream.handle)
    slack = 16 * (WARMUP + CALLS)
    a, w, out = DeviceBuffer(M * K * 2 + slack), DeviceBuffer(N * K * 2), DeviceBuffer(M * N * 2)

    def call(plan, a_ptr: int) -> None:
        plan.run_pointers(a_ptr, w.ptr, out.ptr, stream, lda=K, ldb=K, ldc=N)

    rows = []
    for kernel in ("hopper_bf16", "cublas_bf16", "cublaslt_bf16"):
        plan = api.plan(M, N, K, dtype="bfloat16", kernel=kernel, trans_b=True, out_dtype="bfloat16")
        hit = per_call(lambda i: call(plan, a.ptr))
        miss = per_call(lambda i: call(plan, a.ptr + 16 * i))
        rows.append((kernel, hit, miss, plan.launches_made, plan.launches_repointed))
        session.synchronize()
    spec = kernels.get("hopper_bf16")
    plan = api.plan(M, N, K, dtype="bfloat16", kernel="hopper_bf16", trans_b=True, out_dtype="bfloat16")
    entry, g = rungs.entry_geometry(spec, plan.tunables)
    loaded = session.load(spec, plan.tunables).kernels[entry]
    encode = per_call(lambda i: encode_tiled_2d(a.ptr + 16 * i, "bf16", M, K, K, *g.a_box, geometry.SWIZZLE))
    a_map = encode_tiled_2d(a.ptr, "bf16", M, K, K, *g.a_box, geometry.SWIZZLE)
    held = PackedArgs(("tensormap",), [a_map])
    readdress = per_call(lambda i: held.replaced({}, {0: a.ptr + 16 * i}))
    resident = per_call(lambda i: recipe._driver_resident(loaded, g, session.stream, session.device.sm_count))
    args = [M, N, K, 1.0, a_map, a_map, 0.0, out.ptr, N, 8, 1, 0, 0, 0, a_map, 1, 0]  # rungs.STORE_SIGNATURE
    pack = per_call(lambda i: loaded.pack(*args))
    print(f"BF16 {M}x{N}x{K} (x @ W^T, BF16 out), {CALLS} calls, microseconds per call (host)")
    print(f"{'kernel':16} {'hit':>8} {'miss':>8} {'launches made':>14} {'re-pointed':>11}")
    for name, hit, miss, made, repointed in rows:
        print(f"{name:16} {hit:8.1f} {miss:8.1f} {made:14d} {repointed:11d}")
    print(f"hopper_bf16 ({entry}, {plan.tunables}) pieces: encode {encode:.1f}, "
          f"readdress (a copy of one map's packed arguments) {readdress:.1f}, resident {resident:.1f}, pack {pack:.1f}")
    if "--profile" in sys.argv[1:]:
        profiler = cProfile.Profile()
        profiler.runcall(per_call, lambda i: call(plan, a.ptr + 16 * i))
        session.synchronize()
        print(f"hopper_bf16 misses under cProfile ({CALLS + WARMUP} calls), own time:")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
