"""Probe: does a Plan call wait for the GPU? Host time per call at seen addresses with the GPU
idle, and with a long kernel queued ahead of the calls on the same stream.

Run from the repository root (needs torch for its sleep kernel):
    PYTHONPATH=. python3 tools/probes/busy_gpu_call_cost.py
BF16 x @ W^T with x 4096 x 512 and W 2048 x 512, BF16 out (tools/train_mlp.py's first layer),
plain and with the bias epilogue. Per route, microseconds per call over CALLS calls (host time
up to the last call queued):

  idle   the calls start on an idle GPU (each call's GEMM is shorter than the host's call)
  busy   the calls are queued behind torch.cuda._sleep(SLEEP_CYCLES) on the same stream: a
         call that waits for the GPU (a synchronising library call, a blocking allocation)
         costs the sleep here

Then the same first layer's route inside training steps of tools/train_mlp.py's model
(gemm_driver.torch.Linear, BF16, batch 4096, hidden 2048), each step started on an idle GPU:
the host time of a whole step, and of the library's parts in it (Route.__call__, of which
Plan.run_pointers, of which the Launch itself), summed over the step's GEMMs; then each GEMM's
launch time alone.
"""

from __future__ import annotations

import time

import torch

from gemm_driver import api, plans

CALLS, WARMUP, SLEEP_CYCLES = 50, 20, 40_000_000  # the sleep: ~20 ms at 2 GHz
M, N, K = 4096, 2048, 512


def per_call(call, busy: bool) -> float:
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    if busy:
        torch.cuda._sleep(SLEEP_CYCLES)
    start = time.perf_counter()
    for _ in range(CALLS):
        call()
    host = (time.perf_counter() - start) / CALLS * 1e6
    torch.cuda.synchronize()
    return host


def main() -> None:
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for kernel in ("cublas_bf16", "cublaslt_bf16", "hopper_bf16"):
        for with_bias in (False, True):
            if kernel == "cublas_bf16" and with_bias:
                continue  # GemmEx has no epilogue
            plan = api.plan(M, N, K, dtype="bfloat16", kernel=kernel, trans_b=True, out_dtype="bfloat16",
                            bias=with_bias)
            plan(x, w.t(), out, bias=bias if with_bias else None)
            call = lambda: plan.run_pointers(x.data_ptr(), w.data_ptr(), out.data_ptr(), stream, lda=K,  # noqa: E731
                                             ldb=K, ldc=N, bias=bias.data_ptr() if with_bias else 0)
            rows.append((kernel + (" + bias" if with_bias else ""), per_call(call, False), per_call(call, True)))
    mm = lambda: torch.mm(x, w.t(), out=out)  # noqa: E731
    addmm = lambda: torch.addmm(bias, x, w.t(), out=out)  # noqa: E731
    rows += [("torch.mm(out=)", per_call(mm, False), per_call(mm, True)),
             ("torch.addmm(bias, out=)", per_call(addmm, False), per_call(addmm, True))]
    print(f"{torch.cuda.get_device_name()}: BF16 {M}x{N}x{K} x @ W^T, BF16 out, {CALLS} calls at seen addresses, "
          "host microseconds per call")
    print(f"{'route':26} {'idle':>8} {'busy':>8}")
    for name, idle, busy in rows:
        print(f"{name:26} {idle:8.1f} {busy:8.1f}")
    for kernel in (None, "hopper_bf16"):
        training_breakdown(kernel)


def timed(owner, name: str, totals: dict, label: str, per_plan: dict | None = None) -> None:
    """Wrap owner.name so that its host time adds up in totals[label] (and, with ``per_plan``,
    in per_plan[the Plan's kernel, problem and layout], a list of call times)."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            totals[label] += spent
            if per_plan is not None:
                plan = args[0]
                p = plan.problem
                layout = "".join("t" if t else "n" for t in plan.layout[:2])
                per_plan.setdefault(f"{plan.kernel} {p.m}x{p.n}x{p.k} {layout} {p.epilogue}", []).append(spent)

    setattr(owner, name, wrapper)


def training_breakdown(kernel, steps: int = 20) -> None:
    """Per step (idle GPU at its start, median of ``steps``): the step's host time and the parts
    spent in the library, in microseconds."""
    import sys
    from pathlib import Path

    sys.path.append(str(Path(__file__).resolve().parent.parent))
    import train_mlp
    import gemm_driver.torch as gt

    data = train_mlp.batches(torch, steps + 5, 4096)
    model = train_mlp.student(torch, gt.Linear, 2048, True, kernel=kernel).cuda().bfloat16()
    step = train_mlp.stepper(torch, model)
    for x, labels in data[:5]:
        step(x, labels)
    totals = {"route": 0.0, "run_pointers": 0.0, "launch": 0.0}
    per_plan: dict[str, list[float]] = {}
    originals = (gt.routes.Route.__call__, plans.Plan.run_pointers, plans.Plan._enqueue)
    timed(gt.routes.Route, "__call__", totals, "route")
    timed(plans.Plan, "run_pointers", totals, "run_pointers")
    timed(plans.Plan, "_enqueue", totals, "launch", per_plan)
    rows = []
    try:
        for x, labels in data[5:]:
            torch.cuda.synchronize()
            for label in totals:
                totals[label] = 0.0
            start = time.perf_counter()
            step(x, labels)
            rows.append((time.perf_counter() - start, *totals.values()))
    finally:
        gt.routes.Route.__call__, plans.Plan.run_pointers, plans.Plan._enqueue = originals
    torch.cuda.synchronize()
    median = [sorted(column)[len(column) // 2] * 1e6 for column in zip(*rows)]
    print(f"training step, kernel {kernel or 'default'} ({gt.ran}), host us (median of {steps}): step "
          f"{median[0]:.0f}, in Route.__call__ {median[1]:.0f}, of which run_pointers {median[2]:.0f}, of which "
          f"the launches {median[3]:.0f}")
    for name, times in sorted(per_plan.items()):
        times = sorted(times)
        print(f"    launch {name:44} median {times[len(times) // 2] * 1e6:6.1f} us over {len(times)} calls")


if __name__ == "__main__":
    main()
