"""Probe: hopper_tf32 on the corpus tuning set's small-M deep-K shapes, the earlier choice (split-K
over 256 x 128 tiles, its slice count forced) beside what choose() picks now (split-K over 64 x 128
tiles); each verified once against the float64 reference, then timed alternately: the median of 5
rounds of 200 launches between CUDA events, after 20 untimed.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/tf32_small_m_choice.py
Output on an H200: results/h200/probe-tf32-deep-k-small-m-before-after.txt
"""
import statistics
from gemm_driver import Session, kernels
from gemm_driver.case import PreparedCase
from gemm_driver.cuda.streams import Event
from gemm_driver.problem import GemmProblem

SHAPES = {(1, 4096, 14336): 3, (32, 4096, 14336): 3, (1, 3584, 18944): 4, (32, 3584, 18944): 4,
          (1, 3072, 8192): 2, (32, 3072, 8192): 2}
spec = kernels.KERNELS["hopper_tf32"]
with Session() as s:
    for shape, old_splits in SHAPES.items():
        p = GemmProblem(*shape)
        new, _ = spec.choose(p, s.device.name)
        with PreparedCase.random(p, "tf32", 5) as case:
            runs = {}
            for label, t in (("before", {"SPLITS": old_splits}), ("now", new)):
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
            print(f"{'x'.join(map(str, shape))}: before (256x128, {old_splits} splits) {b:.1f} us, "
                  f"now ({new}) {n:.1f} us, {b / n:.2f}x", flush=True)
