"""Probe: where hopper_bf16 loses at small M (decode: a few rows of A against a large B, the
read of B sets the time). For each tuning-set shape (no validation shape: docs/corpus.md), the
configuration choose() picks and a fixed set of alternatives run beside cuBLAS and cuBLASLt;
each verified once against the float64 reference, then all timed alternately, in a shuffled
order each round (``timed``): the median of 5 rounds of 100 launches between CUDA events,
after 10 untimed, each batch queued behind the bench's stream hold (bench/timing.py), so that
no launch waits for the host. B's bytes over the time give the rate each streams B at (hot: B
stays in L2 where it fits, 50 MB on the H100).

--once: verify each launcher and launch it once more, no timing (for ncu: which kernels the
baselines run, with what grid).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/small_m.py [--once] [MxNxK ...]
"""
import json
import os
import sys

from gemm_driver import Session, corpus, kernels
from gemm_driver.case import PreparedCase
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.bench.alternate import ROUNDS, WARMUP, alternate_ms
from gemm_driver.bench.timing import GpuTimer
from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import selection
from gemm_driver.problem import GemmProblem

SHAPES = ["1x3584x3584", "32x4096x4096", "32x4800x1600", "32x6144x4096", "32x3584x18944", "1x28672x4096",
          "32x28672x4096"]
LAUNCHES = 100  # a batch of each run (ROUNDS and WARMUP: the alternating timer's)
TFLOPS_MEASURED = f"us per GEMM, TFLOP/s (median of {ROUNDS} rounds of {LAUNCHES})"  # print_tflops' header


def baselines(precision: str) -> tuple[str, str]:
    """cuBLAS and cuBLASLt of a precision."""
    return f"cublas_{precision}", f"cublaslt_{precision}"


BASELINES = baselines("bf16")


def alternatives(problem: GemmProblem) -> dict[str, dict]:
    """Labelled tunables: any_shape's one-consumer tiles with and without split-K; hopper_decode
    (DECODE = the fewest rows >= M it offers) with one and two consumers, split 1, 2, 4 or 8
    ways ("d16x1/4": 16 rows, one consumer, 4 splits; "+pdl": PDL with a split); split 1 or 2
    ways also in clusters of two tile rows sharing B ("+cm2", CM=2: DECODE rows where M fills
    two tile rows, else half of them); and the extra ones a probe run passes as JSON in
    GEMM_PROBE_CONFIGS."""
    configs = {"64x64": {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "PDL": 1},
               "64x128": {"BN": 128, "CONSUMERS": 1, "PDL": 1},
               "64x64/2": {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "SPLITS": 2},
               "64x128/4": {"BN": 128, "CONSUMERS": 1, "SPLITS": 4}}
    rows = min((r for r in (8, 16, 32, 64) if r >= problem.m), default=64)
    for consumers in (1, 2):
        for splits in (1, 2, 4, 8):
            label = f"d{rows}x{consumers}/{splits}"
            configs[label] = {"DECODE": rows, "BN": 64 * consumers, "CONSUMERS": consumers, "SPLITS": splits,
                              "PDL": int(splits == 1)}
            if splits > 1 and consumers == 1:
                configs[label + "+pdl"] = {**configs[label], "PDL": 1}
            if splits <= 2:
                configs.update(clustered_decode(problem, configs[label]))
    configs.update(json.loads(os.environ.get("GEMM_PROBE_CONFIGS", "{}")))
    return configs


def clustered_decode(problem: GemmProblem, t: dict) -> dict[str, dict]:
    """The decode tiles ``t`` in clusters of two tile rows sharing each B tile (CM=2), labelled
    ("d16x1/2+cm2"): ``t``'s rows where M fills two tile rows, else half of them (none below 8)."""
    rows = t["DECODE"] if problem.m > t["DECODE"] else t["DECODE"] // 2
    if rows < 8:
        return {}
    return {f"d{rows}x{t['CONSUMERS']}/{t.get('SPLITS', 1)}+cm2": {**t, "DECODE": rows, "CM": 2}}


def timed(timer: GpuTimer, runs: dict) -> dict:
    """Microseconds per launch of each run, timed in alternation (bench/alternate.py: the median of
    ROUNDS rounds, each a batch of LAUNCHES after WARMUP untimed, in a shuffled order each round)."""
    return {label: ms * 1000 for label, ms in alternate_ms(timer, runs, LAUNCHES, ROUNDS, WARMUP).items()}


def offered(spec, p: GemmProblem, label: str, chosen: dict, alternatives: dict[str, dict]) -> dict[str, dict]:
    """``chosen`` and the alternatives ``spec`` accepts for ``p`` (a refused one is printed)."""
    configs = {"chosen": chosen}
    for name, t in alternatives.items():
        try:
            spec.validate(p, t)
            configs[name] = t
        except ValueError as exc:
            print(f"  {label} {name}: refused ({exc})")
    return configs


def verified_times(s: Session, timer: GpuTimer, p: GemmProblem, configs: dict[str, dict], once: bool = False,
                   precision: str = "bf16"):
    """hopper_<precision> with each of ``configs`` and the precision's baselines on one random
    case: each verified against the float64 reference, then all timed alternately (``timed``);
    once: launched once more each and not timed (None)."""
    with PreparedCase.random(p, precision, 11) as case:
        runs = {name: case.launcher(s, f"hopper_{precision}", t) for name, t in configs.items()}
        runs.update({name: case.launcher(s, name, None) for name in baselines(precision)})
        verify_all(case, runs)
        if once:
            for launch in runs.values():
                launch()
            s.stream.synchronize()
            return None
        return timed(timer, runs)


def labelled_times(session: Session, timer: GpuTimer, case: PreparedCase, kernel: str, configs: dict[str, dict],
                   names: tuple[str, ...]) -> tuple[dict[str, float], float]:
    """``kernel`` with each of ``configs`` (labelled "name tunables") and the baselines ``names`` on
    ``case``: each verified, then all timed alternately (``timed``); and the fastest baseline's time
    (inf where every baseline refuses the shape, each refusal printed on one line)."""
    runs = {f"{name} {tuned.label(t)}": case.launcher(session, kernel, t) for name, t in configs.items()}
    for name in names:
        try:
            runs[name] = case.launcher(session, name)
        except UnsupportedProblem as refused:
            print(f"  {name}: skipped ({refused})", flush=True)
    verify_all(case, runs)
    us = timed(timer, runs)
    return us, min((us[b] for b in names if b in us), default=float("inf"))


def print_against(p: GemmProblem, us: dict, best: float, width: int) -> None:
    """One line a run, fastest first: us per GEMM, TFLOP/s, the fastest baseline's time over it
    (none where no baseline ran: ``best`` inf)."""
    for name, t in sorted(us.items(), key=lambda kv: kv[1]):
        against = f"  {best / t:6.3f}x best baseline" if best != float("inf") else ""
        print(f"  {name:<{width}} {t:9.2f} us {p.flops / t / 1e6:7.1f} TFLOP/s{against}", flush=True)


def verify_all(case: PreparedCase, runs: dict) -> None:
    """Each launch once on the case's poisoned output, checked against the float64 reference
    with its guard band untouched (AssertionError naming the first that is not)."""
    for name, launch in runs.items():
        out, guard = case.run(launch)
        verdict = case.check(out)
        assert guard == 0 and verdict.ok, (case.problem, name, verdict.message)


def print_tflops(p: GemmProblem, us: dict, width: int = 14, precision: str = "bf16") -> None:
    """One line a run, fastest first: us per GEMM, TFLOP/s, and the faster baseline's time over it."""
    best = min(us[b] for b in baselines(precision))
    for name, t in sorted(us.items(), key=lambda kv: kv[1]):
        print(f"  {name:>{width}} {t:9.2f} us {2 * p.m * p.n * p.k / t / 1e6:7.1f} TFLOP/s  "
              f"{best / t:6.3f}x best baseline", flush=True)


def flags_and_shapes(args: list[str], default: list[str]) -> tuple[set[str], list[str]]:
    """A probe's command line: the --flags given, and the MxNxK labels (``default`` without any)."""
    flags = {a for a in args if a.startswith("--")}
    return flags, [a for a in args if a not in flags] or default


def chosen_shapes(labels: list[str], measured: str, kernel: str = "hopper_bf16"):
    """The probes' loop: a Session and its timer, a header line (the GPU's name, then
    ``measured``), then for each MxNxK label (label, session, timer, problem, the tunables
    ``kernel``'s choose() picks, why)."""
    spec = kernels.KERNELS[kernel]
    with Session() as s:
        timer = GpuTimer(s.stream, s.arch)
        print(f"{s.device.name}; {measured}", flush=True)
        for label in labels:
            p = GemmProblem(*map(int, label.split("x")))
            yield (label, s, timer, p, *spec.choose(p, s.device.name))


def refuse_validation_shapes(labels: list[str], probe: str) -> None:
    """Exit with one line when a MxNxK label is a validation shape: no probe reads that set."""
    held_out = {(s.m, s.n, s.k) for s in corpus.corpus("all:validate")}
    refused = [label for label in labels if tuple(map(int, label.split("x"))) in held_out]
    if refused:
        sys.exit(f"{probe}: {', '.join(refused)} belong to the validation set, which no probe reads")


def beside_the_candidates(labels: list[str], extra=lambda p, candidates: {}) -> None:
    """The candidate probes' loop (vote_candidates, clusters, column_halves): per MxNxK label,
    hopper_bf16's pick, every other configuration selection.candidates offers and the labelled
    configurations ``extra(problem, candidates)`` adds, each verified, then timed with the
    baselines (verified_times) and printed fastest first."""
    spec = kernels.KERNELS["hopper_bf16"]
    for label, s, timer, p, chosen, why in chosen_shapes(labels, TFLOPS_MEASURED):
        candidates = selection.candidates(p)
        others = {tuned.label(t): t for t in candidates if t != chosen}
        others.update(extra(p, candidates))
        us = verified_times(s, timer, p, offered(spec, p, label, chosen, others))
        print(f"{label}: chosen {tuned.label(chosen)} ({why})", flush=True)
        print_tflops(p, us, width=36)


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, SHAPES)
    once = "--once" in flags
    spec = kernels.KERNELS["hopper_bf16"]
    measured = f"us per GEMM, TB/s of B read (median of {ROUNDS} rounds of {LAUNCHES})"
    for label, s, timer, p, chosen, _ in chosen_shapes(shapes, measured):
        us = verified_times(s, timer, p, offered(spec, p, label, chosen, alternatives(p)), once)
        if us is None:
            continue
        best = min(us[b] for b in BASELINES)
        b_bytes = p.n * p.k * 2
        print(f"{label}: chosen {chosen}", flush=True)
        for name, t in sorted(us.items(), key=lambda kv: kv[1]):
            print(f"  {name:>14} {t:8.2f} us {b_bytes / t / 1e6:6.2f} TB/s  {best / t:6.3f}x best baseline",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
