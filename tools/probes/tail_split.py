"""Probe: hopper_bf16's tail split (TAIL) on shapes whose tiles fill more than one wave of the
GPU's SMs and leave the last wave partial. For each shape, the tiles choose() picks run with
TAIL = 0 (every tile whole), 2 and 4 (the last wave's tiles cut into up to that many k ranges),
beside cuBLAS and cuBLASLt; each verified once against the float64 reference, then all timed
alternately: the median of 5 rounds of 100 launches between CUDA events, after 10 untimed.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/tail_split.py [MxNxK ...]
Output on an H100: results/h100-80gb-hbm3/probe-tail-split.txt
"""
import statistics
import sys

from gemm_driver import Session, kernels
from gemm_driver.case import PreparedCase
from gemm_driver.cuda.streams import Event
from gemm_driver.kernels.hopper import geometry as geo
from gemm_driver.kernels.hopper.rungs import entry_geometry
from gemm_driver.problem import GemmProblem

# validation-set shapes (docs/corpus.md) with a partial last wave, and 4096^3 (whole waves) as a control
SHAPES = ["1024x5120x5120", "1024x5120x14336", "1024x5120x4096", "1024x6144x5120", "1024x6144x6144",
          "1024x10240x8192", "1024x7168x2048", "3000x5000x2000", "1280x1280x1280", "2560x2560x2560",
          "5120x5120x5120", "4096x576x7168", "16384x576x7168", "1536x12288x6144", "4096x1536x7168",
          "4096x4096x4096"]
ROUNDS, LAUNCHES, WARMUP = 5, 100, 10


def timed(stream, runs: dict) -> dict:
    times = {label: [] for label in runs}
    with Event() as start, Event() as end:
        for _ in range(ROUNDS):
            for label, launch in runs.items():
                for _ in range(WARMUP):
                    launch()
                start.record(stream)
                for _ in range(LAUNCHES):
                    launch()
                end.record(stream)
                end.synchronize()
                times[label].append(Event.elapsed_ms(start, end) / LAUNCHES * 1000)
    return {label: statistics.median(t) for label, t in times.items()}


def plan_of(spec, problem, tunables, sms: int) -> str:
    t = spec.validate(problem, tunables)
    g = entry_geometry(spec, t)[1]
    resident = geo.fallback_resident_clusters(sms, g.ctas_per_sm, g.cluster)
    split = geo.split_plan(problem, g, t["SPLITS"], t["TAIL"], resident)
    if split.splits == 1:
        return f"{split.tiles} whole"
    return f"{split.whole} whole + {split.tiles - split.whole} x {split.splits}"


def main(shapes: list[str]) -> None:
    spec = kernels.KERNELS["hopper_bf16"]
    with Session() as s:
        print(f"{s.device.name}, {s.device.sm_count} SMs; us per GEMM (median of {ROUNDS} rounds of {LAUNCHES})")
        print(f"{'shape':>16} {'tiles (TAIL=4)':>22} {'TAIL=0':>8} {'TAIL=2':>8} {'TAIL=4':>8} {'cuBLAS':>8} "
              f"{'Lt':>8}  TAIL=4/0  ours/best: TAIL=0 -> 4   chosen", flush=True)
        for label in shapes:
            p = GemmProblem(*map(int, label.split("x")))
            chosen, _ = spec.choose(p, s.device.name)
            configs = {f"TAIL={tail}": {**chosen, "TAIL": tail} for tail in (0, 2, 4)}
            with PreparedCase.random(p, "bf16", 11) as case:
                runs = {}
                for name, t in configs.items():
                    runs[name] = case.launcher(s, "hopper_bf16", t)
                for name in ("cublas_bf16", "cublaslt_bf16"):
                    runs[name] = case.launcher(s, name, None)
                for name, launch in runs.items():
                    out, guard = case.run(launch)
                    verdict = case.check(out)
                    assert guard == 0 and verdict.ok, (label, name, verdict.message)
                us = timed(s.stream, runs)
            best = min(us["cublas_bf16"], us["cublaslt_bf16"])
            base = {k: v for k, v in chosen.items() if k != "TAIL"}
            print(f"{label:>16} {plan_of(spec, p, configs['TAIL=4'], s.device.sm_count):>22} "
                  f"{us['TAIL=0']:8.1f} {us['TAIL=2']:8.1f} {us['TAIL=4']:8.1f} {us['cublas_bf16']:8.1f} "
                  f"{us['cublaslt_bf16']:8.1f}  {us['TAIL=0'] / us['TAIL=4']:8.3f}x  "
                  f"{best / us['TAIL=0']:.3f} -> {best / us['TAIL=4']:.3f}   {base}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or SHAPES)
