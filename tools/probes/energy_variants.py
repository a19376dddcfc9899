"""Probe: where hopper_bf16 spends its energy. Joules per GEMM, average power and TFLOP/s per
watt of the vote's pick and of variants that each change one thing, beside cuBLAS and cuBLASLt.

Fed back to back, the pick took 1.07-1.11x cuBLAS's joules per GEMM at 1024^3 in the
bench's energy runs (docs/profiling.md, "Where the energy gap is"). The variants here: without
PDL, C stored from registers (STORE=0), TMA multicast in a cluster (2 x 1, 1 x 2, 2 x 2: fewer
L2 -> SM bytes; cuBLAS's kernel at 1024^3 runs 1 x 2 clusters), the other tiles the vote offers.

Each configuration is verified once against the float64 reference, then timed and its energy
read as the bench does (bench/timing.py: the samples, then an energy window of graph replays
read through NVML's energy counter, bench/energy.py), in two rounds, the order reversed in
the second; the mean of the rounds, trusted only when both are and they agree within 5%.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/energy_variants.py [MxNxK ...]
"""
import sys

from small_m import baselines, flags_and_shapes, offered, verify_all

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
TILES = {"128x128": selection.TILE_128x128, "128x64": selection.TILE_128x64, "128x256": selection.TILE_128x256}
BUDGET = Budget(seconds=0.5, warmup_seconds=1.0)  # a second of warm-up: the clock it holds under load
ROUNDS = 2


def configurations(chosen: dict) -> dict[str, dict]:
    """The pick, the pick with each of CHANGES, and each tile of TILES the pick is not."""
    configs = {f"chosen {change}": {**chosen, **t} for change, t in CHANGES.items()}
    configs.update({name: t for name, t in TILES.items() if tuned.label(t) != tuned.label(chosen)})
    return configs


def main(args: list[str]) -> None:
    _, shapes = flags_and_shapes(args, SHAPES)
    spec = kernels.KERNELS["hopper_bf16"]
    with Session() as s:
        monitor = ClockMonitor(s.device.pci_bus_id())
        timer = GpuTimer(s.stream, s.arch, monitor=monitor)
        print(f"{s.device.name}; per configuration: median us, TFLOP/s, average W, mJ per GEMM, TFLOP/s per W "
              f"(mean of {ROUNDS} rounds, the order reversed in the second)", flush=True)
        for label in shapes:
            p = GemmProblem(*map(int, label.split("x")))
            chosen, _ = spec.choose(p, s.device.name)
            with PreparedCase.random(p, "bf16", 11) as case:
                configs = offered(spec, p, label, chosen, configurations(chosen))
                runs = {name: case.launcher(s, "hopper_bf16", t) for name, t in configs.items()}
                runs.update({name: case.launcher(s, name, None) for name in baselines("bf16")})
                verify_all(case, runs)
                stats = {name: [] for name in runs}
                for r in range(ROUNDS):
                    for name in (list(runs) if r % 2 == 0 else list(reversed(runs))):
                        stats[name].append(timer.measure(runs[name], BUDGET))
            print(f"{label}: chosen {tuned.label(chosen)}", flush=True)
            for name, rounds in stats.items():
                us = sum(t.median_ms for t in rounds) / len(rounds) * 1000
                e = energy.summarize([w for t in rounds for w in t.energy_windows], p.flops)
                joules, power, per_watt = e["joules_per_gemm"], e["avg_power_w"], e["tflops_per_watt"]
                read = (f"{power:6.0f} W {joules * 1000:8.3f} mJ {per_watt:6.3f} TFLOP/s/W" if joules else "  -")
                print(f"  {name:>24} {us:9.2f} us {p.flops / us / 1e6:7.1f} TFLOP/s {read}"
                      f"{'' if e['trusted'] else '  (untrusted: ' + str(e['note']) + ')'}", flush=True)
        timer.close()
        monitor.close()


if __name__ == "__main__":
    main(sys.argv[1:])
