#!/usr/bin/env python3
"""Train one small MLP twice, with torch's nn.Linear and with gemm_driver.torch.Linear, in BF16.

The task is generated here from fixed seeds: a random teacher MLP (IN -> 512 -> CLASSES,
tanh) labels Gaussian inputs by its argmax, and a student MLP (IN -> HIDDEN -> HIDDEN ->
CLASSES, GELU tanh form) learns it with cross-entropy and AdamW. Both runs start from the
same weights and see the same batches; every parameter and activation is BF16. Printed:
both loss curves, the samples per second of each (the median of ``--rounds`` passes over
the batches, the two models taking turns, each pass after WARMUP steps and timed with a
synchronise at each end: the loop is bound by the host on both sides, and single passes of
the same model measured 0.38x to 0.76x of torch on one machine), the host time of one step
(HOST_STEPS more steps, each started on an idle GPU and timed until its last launch is
queued: the median), the largest loss difference, which kernels ran, and gemm_driver's route cache (routes, hits,
misses, and the Launches its plans made: one per new set of addresses).

    python tools/train_mlp.py [--steps 300] [--batch 4096] [--hidden 2048] [--kernel NAME]
                              [--rounds 5] [--profile N] [--gpu-times N] [--json FILE] [--check] [--graph]
                              [--dbias-sum]

``--kernel``: the kernel gemm_driver's layers run (default: gemm()'s default, the dtype's
cuBLAS or cuBLASLt where an epilogue is fused; ``hopper_bf16`` runs this project's own).
``--profile N``: N more steps of gemm_driver's model under cProfile, its 25 costliest
functions (own time) printed last: where the host time of a step goes. ``--gpu-times N``: N
more steps of each model under torch.profiler (CUDA activity only, eager steps), the GPU time
of a step by kernel for both, costliest first: where the GPU time of a step goes.

``--graph``: each model's whole step (forward, backward, AdamW) is captured once in a CUDA
graph and replayed per batch (``graphed_stepper``), for both models alike: the host's per-call
costs drop out, and the comparison is of the GPU work.

``--dbias-sum``: the bias gradients by torch's sum, not as GEMMs on the named kernel
(gemm_driver.torch.dbias_gemm).

``--check`` exits 1 unless the two curves agree (mean loss of the last tenth within 5% of
each other) and both losses fell; a GPU and torch are needed (exit 2 otherwise).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not tools/ (tools/inspect.py would shadow the standard library's)
sys.path.append(str(ROOT / "tools"))  # _toolkit.py; last, so that tools/inspect.py shadows nothing
from _toolkit import Parser  # noqa: E402  errors as one line on stderr, exit 2, like every tool
IN, CLASSES, WARMUP, HOST_STEPS = 512, 16, 10, 20


def parse(argv):
    parser = Parser(prog="train_mlp.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--kernel", default=None)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--gpu-times", type=int, default=0, metavar="N")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--graph", action="store_true", help="capture each model's whole step in a CUDA graph")
    parser.add_argument("--dbias-sum", action="store_true", help="bias gradients by torch's sum")
    args = parser.parse_args(argv)
    if args.steps <= WARMUP or args.batch < 1 or args.hidden < 1 or args.profile < 0 or args.gpu_times < 0 or \
            args.rounds < 1:
        parser.error(f"--steps must exceed {WARMUP}; --batch, --hidden and --rounds must be positive, --profile and "
                     "--gpu-times not negative")
    return args


def batches(torch, steps: int, batch: int):
    """(inputs, labels) per step from the teacher, on the GPU, fixed seeds."""
    g = torch.Generator(device="cuda").manual_seed(1234)
    w1 = torch.randn(IN, 512, device="cuda", generator=g) / IN ** 0.5
    w2 = torch.randn(512, CLASSES, device="cuda", generator=g) / 512 ** 0.5
    data = []
    for _ in range(steps):
        x = torch.randn(batch, IN, device="cuda", generator=g)
        data.append((x.bfloat16(), torch.tanh(x @ w1).matmul(w2).argmax(1)))
    return data


def student(torch, linear, hidden: int, gelu_inside: bool, **options):
    """IN -> hidden -> hidden -> CLASSES with GELU (tanh form); ``gelu_inside``: the layer
    applies it (gemm_driver.torch.Linear(activation="gelu")), else an nn.GELU after it.
    ``options``: the layers' other keywords (gemm_driver's ``kernel``)."""
    def layer(i, o, act):
        if act and gelu_inside:
            return [linear(i, o, activation="gelu", **options)]
        return [linear(i, o, **options)] + ([torch.nn.GELU(approximate="tanh")] if act else [])

    return torch.nn.Sequential(*layer(IN, hidden, True), *layer(hidden, hidden, True), *layer(hidden, CLASSES, False))


def stepper(torch, model):
    """One training step of ``model`` (cross-entropy, AdamW): step(x, labels) -> the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)

    def step(x, labels):
        loss = torch.nn.functional.cross_entropy(model(x).float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def graphed_stepper(torch, model, sample):
    """``stepper``'s step captured whole (forward, backward, AdamW with ``capturable``) in one
    CUDA graph, as torch.compile's "reduce-overhead" mode would: step(x, labels) copies the batch
    into the graph's input buffers and replays it, so the host launches one graph a step. Three
    eager steps on the first batch come first (on a side stream, as torch's docs do it): they
    make the routes, plans and launches the capture records, and the optimizer's state."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, capturable=True)
    x, labels = (t.clone() for t in sample)

    def body():
        loss = torch.nn.functional.cross_entropy(model(x).float(), labels)
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = body()

    def step(batch, batch_labels):
        x.copy_(batch)
        labels.copy_(batch_labels)
        graph.replay()
        return loss.detach().clone()

    return step


def make_stepper(torch, model, data, graphed: bool):
    return graphed_stepper(torch, model, data[0]) if graphed else stepper(torch, model)


def train(torch, model, data, graphed: bool = False) -> tuple[list[float], float]:
    """(losses, host microseconds per step)."""
    step = make_stepper(torch, model, data, graphed)
    losses = [step(x, labels) for x, labels in data]
    torch.cuda.synchronize()
    return [float(v) for v in losses], host_us(torch, step, data)


def alternating_rates(torch, models: dict, data, rounds: int, graphed: bool = False) -> dict[str, list[float]]:
    """Samples per second of each model over all of ``data``, once a round, the models taking
    turns (in order in even rounds, reversed in odd ones) so that a busy moment of the host
    (the loop is bound by it) does not always fall on the same side; each model keeps
    training with its own optimizer (the curves above are the comparison of losses)."""
    steps = {name: make_stepper(torch, model, data, graphed) for name, model in models.items()}
    rates: dict[str, list[float]] = {name: [] for name in models}
    for r in range(rounds):
        for name in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            step = steps[name]
            for x, labels in data[:WARMUP]:
                step(x, labels)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for x, labels in data:
                step(x, labels)
            torch.cuda.synchronize()
            rates[name].append(len(data) * data[0][0].shape[0] / (time.perf_counter() - start))
    return rates


def host_us(torch, step, data) -> float:
    """Median host time of a step started on an idle GPU (no launch waits for queue space),
    over HOST_STEPS steps after the timed ones (their losses are not kept)."""
    times = []
    for x, labels in data[:HOST_STEPS]:
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(x, labels)
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return sorted(times)[len(times) // 2] * 1e6


def profile_steps(torch, model, data) -> None:
    """cProfile over one step per batch of ``data`` (a fresh optimizer: its first step is
    not among them), the 25 costliest functions by own time."""
    import cProfile
    import pstats

    step = stepper(torch, model)
    step(*data[0])
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for x, labels in data:
        step(x, labels)
    torch.cuda.synchronize()
    profiler.disable()
    print(f"\nhost profile of {len(data)} steps of gemm_driver's model (own time, costliest first):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)


def gpu_times(torch, models: dict, data, shown: int = 14) -> None:
    """Each model's eager steps over ``data`` (after one untimed) under torch.profiler, CUDA
    activity only: per kernel the GPU microseconds a step and launches a step, costliest first
    (the ``shown`` costliest, the rest summed), and the GPU time of a step in all."""
    from torch.profiler import ProfilerActivity, profile

    for name, model in models.items():
        step = stepper(torch, model)
        step(*data[0])
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for x, labels in data:
                step(x, labels)
            torch.cuda.synchronize()
        rows = [(getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0), e.count, e.key)
                for e in prof.key_averages()]
        rows = sorted((r for r in rows if r[0] > 0), reverse=True)
        steps = len(data)
        print(f"\nGPU time of a step by kernel, {name} ({steps} eager steps, torch.profiler): "
              f"{sum(r[0] for r in rows) / steps:.1f} us in all")
        for us, count, key in rows[:shown]:
            print(f"  {us / steps:8.1f} us  {count / steps:4.1f}x  {key[:96]}")
        if len(rows) > shown:
            print(f"  {sum(r[0] for r in rows[shown:]) / steps:8.1f} us  the other {len(rows) - shown} kernels")


def main(argv=None) -> int:
    args = parse(argv)
    try:
        import torch
    except ImportError:
        print("train_mlp.py: needs torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("train_mlp.py: needs a CUDA GPU torch sees", file=sys.stderr)
        return 2
    import gemm_driver.torch as gt

    gt.dbias_gemm = not args.dbias_sum

    data = batches(torch, args.steps, args.batch)
    torch.manual_seed(0)
    reference = student(torch, torch.nn.Linear, args.hidden, False).cuda().bfloat16()
    ours = student(torch, gt.Linear, args.hidden, True, kernel=args.kernel).cuda().bfloat16()
    with torch.no_grad():
        for mine, theirs in zip(ours.parameters(), reference.parameters()):
            mine.copy_(theirs)
    curves, host = {}, {}
    models = {"torch nn.Linear": reference, "gemm_driver.torch.Linear": ours}
    for name, model in models.items():
        curves[name], host[name] = train(torch, model, data, args.graph)
    rounds = alternating_rates(torch, models, data, args.rounds, args.graph)
    rates = {name: statistics.median(values) for name, values in rounds.items()}
    (a, ca), (b, cb) = curves.items()
    tail = max(args.steps // 10, 1)
    mean_a, mean_b = sum(ca[-tail:]) / tail, sum(cb[-tail:]) / tail
    print(f"{torch.cuda.get_device_name()}, BF16, batch {args.batch}, MLP {IN}-{args.hidden}-{args.hidden}-{CLASSES}, "
          f"{args.steps} steps (teacher-labelled Gaussian inputs, seed 1234)"
          + (", each step one CUDA graph replay" if args.graph else ""))
    print(f"{'step':>5} {a:>16} {b:>26}")
    for step in list(range(0, args.steps, max(args.steps // 15, 1))) + [args.steps - 1]:
        print(f"{step:5d} {ca[step]:16.4f} {cb[step]:26.4f}")
    print(f"mean loss of the last {tail} steps: {mean_a:.4f} vs {mean_b:.4f} ({(mean_b / mean_a - 1) * 100:+.2f}%)")
    print(f"largest step difference: {max(abs(x - y) for x, y in zip(ca, cb)):.4f}")
    spread = {name: f"{min(v):.0f}-{max(v):.0f}" for name, v in rounds.items()}
    print(f"samples/s, median of {args.rounds} alternating rounds of {args.steps} steps: {a} {rates[a]:.0f} "
          f"({spread[a]}), {b} {rates[b]:.0f} ({spread[b]}): {rates[b] / rates[a]:.3f}x")
    print(f"host time per step: {a} {host[a]:.0f} us, {b} {host[b]:.0f} us")
    print(f"kernels ran: {dict(sorted(gt.ran.items()))}")
    print(f"gemm_driver routes: {gt.routes.stats()}")
    if args.profile:
        profile_steps(torch, ours, data[: args.profile])
    if args.gpu_times:
        gpu_times(torch, models, data[: args.gpu_times])
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "steps": args.steps,
                                         "batch": args.batch, "hidden": args.hidden, "kernel": args.kernel, "graph": args.graph,
                                         "dbias_gemm": gt.dbias_gemm,
                                         "curves": curves, "samples_per_s": rates, "samples_per_s_rounds": rounds,
                                         "host_us_per_step": host, "kernels": gt.ran, "routes": gt.routes.stats()},
                                        indent=1))
    if args.check:
        agree = abs(mean_b / mean_a - 1) < 0.05 and ca[-1] < ca[0] and cb[-1] < cb[0]
        print("check:", "curves agree" if agree else "curves DIFFER")
        return 0 if agree else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
