"""Probe: hopper_tf32 on the corpus tuning set's small-M shapes, an earlier choice beside what
choose() picks now; each verified once against the float64 reference, then timed alternately:
the median of 5 rounds of 200 launches between CUDA events, after 20 untimed.

- Deep K (the default): split-K over 256 x 128 tiles, its slice count forced, against split-K
  over 64 x 128 tiles.
- ``--wide``: M <= 64 with N wide enough to fill the grid with 256 x 128 tiles, those tiles in
  1 x 2 clusters against 64 x 128 tiles.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/tf32_small_m_choice.py [--wide]
Output: results/h200/probe-tf32-deep-k-small-m-before-after.txt (an H200),
results/h100-80gb-hbm3/probe-tf32-small-m-wide-n.txt (--wide, an H100)
"""
import statistics
import sys

from gemm_driver import Session, kernels
from gemm_driver.case import PreparedCase
from gemm_driver.cuda.streams import Event
from gemm_driver.problem import GemmProblem

# shape: (the earlier choice, how to name it)
DEEP_K = {(1, 4096, 14336): 3, (32, 4096, 14336): 3, (1, 3584, 18944): 4, (32, 3584, 18944): 4,
          (1, 3072, 8192): 2, (32, 3072, 8192): 2}
DEEP_K = {shape: ({"SPLITS": splits}, f"256x128, {splits} splits") for shape, splits in DEEP_K.items()}
WIDE_N = {shape: ({"CN": 2, "PDL": 1}, "256x128, 1x2 cluster")
          for shape in ((1, 28672, 4096), (32, 28672, 4096), (1, 37888, 3584), (32, 37888, 3584),
                        (1, 16384, 3072), (32, 16384, 3072))}
spec = kernels.KERNELS["hopper_tf32"]


def main(args: list[str]) -> None:
    shapes = WIDE_N if "--wide" in args else DEEP_K
    with Session() as s:
        for shape, (earlier, named) in shapes.items():
            p = GemmProblem(*shape)
            new, _ = spec.choose(p, s.device.name)
            with PreparedCase.random(p, "tf32", 5) as case:
                runs = {}
                for label, t in (("before", earlier), ("now", new)):
                    launch = case.launcher(s, "hopper_tf32", t)
                    out, guard = case.run(launch)
                    assert guard == 0 and case.check(out).ok, (shape, label)
                    runs[label] = (launch, [])
                with Event() as start, Event() as end:
                    for _ in range(5):
                        for label, (launch, times) in runs.items():
                            for _ in range(20):
                                launch()
                            start.record(s.stream)
                            for _ in range(200):
                                launch()
                            end.record(s.stream)
                            end.synchronize()
                            times.append(Event.elapsed_ms(start, end) / 200 * 1000)
                b, n = (statistics.median(runs[k][1]) for k in ("before", "now"))
                print(f"{'x'.join(map(str, shape))}: before ({named}) {b:.1f} us, "
                      f"now ({new}) {n:.1f} us, {b / n:.2f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
