"""Probe: where hopper_bf16 spends its energy. Joules per GEMM, average power and TFLOP/s per
watt of the vote's pick and of variants that each change one thing, beside cuBLAS and cuBLASLt.

Fed back to back, the pick took 1.07-1.11x cuBLAS's joules per GEMM at 1024^3 in the
bench's energy runs (docs/profiling.md, "Where the energy gap is"). The variants here: without
PDL, C stored from registers (STORE=0), TMA multicast in a cluster (2 x 1, 1 x 2, 2 x 2: fewer
L2 -> SM bytes; cuBLAS's kernel at 1024^3 runs 1 x 2 clusters), the other tiles the vote offers.

Each configuration is verified once against the float64 reference, then timed and its energy
read as the bench does (bench/timing.py: the samples, then an energy window of graph replays
read through NVML's energy counter, bench/energy.py), in ROUNDS rounds (``--rounds=N``), the
order reversed in every other; the mean of the rounds, trusted only when all are and they
agree within 5%. With more than two rounds it also prints, per configuration, the median and
the range over the rounds of its TFLOP/s per watt and time against cuBLAS's in the same round:
one run's energy reading moves by more than the gaps it compares (docs/profiling.md).
``--clusters``: only the pick and the pick in a 2 x 1 or 1 x 2 cluster, beside the baselines.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/energy_variants.py [--rounds=N] [--clusters] [MxNxK ...]
"""
import statistics
import sys

from small_m import baselines, flags_and_shapes, offered, refuse_validation_shapes, verify_all

from gemm_driver import Session, kernels
from gemm_driver.bench import energy
from gemm_driver.bench.clocks import ClockMonitor
from gemm_driver.bench.stats import Budget
from gemm_driver.bench.timing import GpuTimer
from gemm_driver.case import PreparedCase
from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import selection
from gemm_driver.problem import GemmProblem

SHAPES = ["1024x1024x1024", "2048x2048x2048", "4096x4096x4096"]
CHANGES = {"PDL=0": {"PDL": 0}, "STORE=0": {"STORE": 0}, "CM=2": {"CM": 2}, "CN=2": {"CN": 2},
           "CM=2 CN=2": {"CM": 2, "CN": 2}}
CLUSTER_CHANGES = ("CM=2", "CN=2")  # --clusters (2 x 2 lost time and energy at every size measured)
TILES = {"128x128": selection.TILE_128x128, "128x64": selection.TILE_128x64, "128x256": selection.TILE_128x256}
BUDGET = Budget(seconds=0.5, warmup_seconds=1.0)  # a second of warm-up: the clock it holds under load
ROUNDS = 2


def configurations(chosen: dict, clusters_only: bool) -> dict[str, dict]:
    """The pick with each of CHANGES (those of CLUSTER_CHANGES only, with ``clusters_only``), and
    each tile of TILES the pick is not (not with ``clusters_only``)."""
    changes = {name: t for name, t in CHANGES.items() if not clusters_only or name in CLUSTER_CHANGES}
    configs = {f"chosen {change}": {**chosen, **t} for change, t in changes.items()}
    if not clusters_only:
        configs.update({name: t for name, t in TILES.items() if tuned.label(t) != tuned.label(chosen)})
    return configs


def rounds_flag(flags: set[str]) -> int:
    """--rounds=N (default ROUNDS)."""
    given = [f.split("=", 1)[1] for f in flags if f.startswith("--rounds=")]
    return int(given[0]) if given else ROUNDS


def against_baseline(p: GemmProblem, stats: dict[str, list], baseline: str) -> None:
    """Per configuration, its TFLOP/s per watt and its time over ``baseline``'s in each round:
    the median and the range over the rounds (a round without a reading left out)."""
    def per_watt(t):
        window = t.energy_windows[0] if t.energy_windows else {}
        joules = window.get("joules_per_launch")
        return p.flops / joules / 1e12 if joules else None

    print(f"  per round, against {baseline}: TFLOP/s per W (median, range), time (median, range)")
    for name, rounds in stats.items():
        pairs = list(zip(rounds, stats[baseline]))
        watts = [mine / theirs for mine, theirs in ((per_watt(t), per_watt(b)) for t, b in pairs) if mine and theirs]
        times = [t.median_ms / b.median_ms for t, b in pairs]
        spread = (f"{statistics.median(watts):.3f} ({min(watts):.3f}-{max(watts):.3f}, {len(watts)} rounds)"
                  if watts else "no reading")
        print(f"  {name:>24}  per W {spread}  time {statistics.median(times):.3f} "
              f"({min(times):.3f}-{max(times):.3f})", flush=True)


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, SHAPES)
    rounds = rounds_flag(flags)
    refuse_validation_shapes(shapes, "energy_variants.py")
    spec = kernels.KERNELS["hopper_bf16"]
    with Session() as s:
        monitor = ClockMonitor(s.device.pci_bus_id())
        timer = GpuTimer(s.stream, s.arch, monitor=monitor)
        print(f"{s.device.name}; per configuration: median us, TFLOP/s, average W, mJ per GEMM, TFLOP/s per W "
              f"(mean of {rounds} rounds, the order reversed in every other)", flush=True)
        for label in shapes:
            p = GemmProblem(*map(int, label.split("x")))
            chosen, _ = spec.choose(p, s.device.name)
            with PreparedCase.random(p, "bf16", 11) as case:
                configs = offered(spec, p, label, chosen, configurations(chosen, "--clusters" in flags))
                runs = {name: case.launcher(s, "hopper_bf16", t) for name, t in configs.items()}
                runs.update({name: case.launcher(s, name, None) for name in baselines("bf16")})
                verify_all(case, runs)
                stats = {name: [] for name in runs}
                for r in range(rounds):
                    for name in (list(runs) if r % 2 == 0 else list(reversed(runs))):
                        stats[name].append(timer.measure(runs[name], BUDGET))
            print(f"{label}: chosen {tuned.label(chosen)}", flush=True)
            for name, measured in stats.items():
                us = sum(t.median_ms for t in measured) / len(measured) * 1000
                e = energy.summarize([w for t in measured for w in t.energy_windows], p.flops)
                joules, power, per_watt = e["joules_per_gemm"], e["avg_power_w"], e["tflops_per_watt"]
                read = (f"{power:6.0f} W {joules * 1000:8.3f} mJ {per_watt:6.3f} TFLOP/s/W" if joules else "  -")
                print(f"  {name:>24} {us:9.2f} us {p.flops / us / 1e6:7.1f} TFLOP/s {read}"
                      f"{'' if e['trusted'] else '  (untrusted: ' + str(e['note']) + ')'}", flush=True)
            if rounds > 2:
                against_baseline(p, stats, "cublas_bf16")
        timer.close()
        monitor.close()


if __name__ == "__main__":
    main(sys.argv[1:])
