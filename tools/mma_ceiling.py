#!/usr/bin/env python3
"""Measure the tensor-core ceilings of this GPU: mma.sync (BF16, FP16, TF32) and, on sm_90, wgmma BF16.

    python tools/mma_ceiling.py                       # table of TFLOP/s per probe
    python tools/mma_ceiling.py --json results/h100-80gb-hbm3/mma-ceiling.json

The probes (cu/probes/mma_ceiling.cu) run one tensor-core instruction in a loop with no
memory traffic: mma.sync on register operands (528 blocks of 256 threads on an H100:
4 per SM, several independent accumulator chains per warp), and wgmma m64n256k16 with A
and B in shared memory. What they reach is the roof for any kernel built on that
instruction. Each probe is first run with a few iterations on fresh seeded data and its
output compared bit for bit with the host's prediction; only then is it timed (CUDA
events around single launches of about --seconds each, --repeats times, median reported).
Needs a GPU of compute capability 8.0 or newer; says so in one line otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The repository instead of tools/ as the first import path, before anything imports
# dataclasses: tools/inspect.py would shadow the standard library's inspect.
ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

import datetime  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402

import numpy as np  # noqa: E402

from gemm_driver.cuda import driver, nvrtc  # noqa: E402
from gemm_driver.cuda.errors import GemmDriverError  # noqa: E402

sys.path.append(str(ROOT / "tools"))  # _toolkit.py; last, so that tools/inspect.py shadows nothing
from _toolkit import Parser, positive, run  # noqa: E402

PROG = Path(__file__).name
SOURCE = ROOT / "cu" / "probes" / "mma_ceiling.cu"
CHECK_ITERS = 3  # small enough that every accumulator stays exact in FP32


@dataclass(frozen=True)
class Probe:
    name: str
    expression: str  # NVRTC name expression of the kernel template
    instruction: str
    precision: str
    shape: tuple[int, int, int]  # m, n, k of one instruction
    threads: int  # per block
    blocks_per_sm: int
    chains: int = 0  # mma.sync: independent accumulators per warp
    warpgroups: int = 0  # wgmma: warpgroups per block
    per_commit: int = 0  # wgmma: instructions per commit group

    @property
    def is_wgmma(self) -> bool:
        return self.warpgroups > 0

    def instructions(self, blocks: int, iters: int) -> int:
        if self.is_wgmma:
            return blocks * self.warpgroups * iters * self.per_commit
        return blocks * (self.threads // 32) * iters * self.chains

    def flops(self, blocks: int, iters: int) -> int:
        m, n, k = self.shape
        return 2 * m * n * k * self.instructions(blocks, iters)


def _mma(precision: str, ptx_type: str, op: str, shape, chains: int) -> Probe:
    m, n, k = shape
    return Probe(f"mma.sync m{m}n{n}k{k} {precision}, {chains} chains", f"mma_sync_probe<{op}, {chains}>",
                 f"mma.sync.aligned.m{m}n{n}k{k}.row.col.f32.{ptx_type}.{ptx_type}.f32", precision, shape,
                 threads=256, blocks_per_sm=4, chains=chains)


def _wgmma(warpgroups: int, blocks_per_sm: int, per_commit: int = 4) -> Probe:
    return Probe(f"wgmma m64n256k16 bf16, {warpgroups} WG/block x {blocks_per_sm}/SM",
                 f"wgmma_probe<{warpgroups}, {per_commit}>", "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
                 "bf16", (64, 256, 16), threads=128 * warpgroups, blocks_per_sm=blocks_per_sm,
                 warpgroups=warpgroups, per_commit=per_commit)


MMA_PROBES = tuple(_mma(*kind, chains) for kind in (
    ("bf16", "bf16", "M16n8k16<true>", (16, 8, 16)),
    ("fp16", "f16", "M16n8k16<false>", (16, 8, 16)),
    ("tf32", "tf32", "M16n8k8Tf32", (16, 8, 8)),
) for chains in (4, 8))
WGMMA_PROBES = (_wgmma(1, 1), _wgmma(2, 1), _wgmma(3, 1), _wgmma(1, 2), _wgmma(1, 3))


# --- the host's prediction ---------------------------------------------------------------
def probe_value(seed: int, which: int, row, col) -> np.ndarray:
    """The kernel's probe_value: k/16 for k in -15..15, from a 32-bit hash (NumPy arrays)."""
    m = np.uint64(0xFFFFFFFF)
    h = (np.uint64(seed) + np.uint64(1000003 * which) + np.uint64(97) * np.asarray(row, np.uint64)
         + np.uint64(31) * np.asarray(col, np.uint64)) & m
    h ^= h >> np.uint64(7)
    h = (h * np.uint64(0x9E3779B1)) & m
    return (((h >> np.uint64(16)) % np.uint64(31)).astype(np.int64) - 15) / 16.0


def expected_mma(probe: Probe, seed: int, iters: int, threads: int) -> np.ndarray:
    """out[4 * thread + i] of mma_sync_probe: every warp computes the same 16x8 product."""
    _, _, k = probe.shape
    a = probe_value(seed, 0, np.arange(16)[:, None], np.arange(k)[None, :])
    b = probe_value(seed, 1, np.arange(k)[:, None], np.arange(8)[None, :])
    d = a @ b
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    per_lane = np.stack([d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1]], axis=1)
    chains = probe.chains
    values = chains * (chains - 1) / 2 + chains * iters * per_lane
    return np.tile(values, (threads // 32, 1)).astype(np.float32).ravel()


def expected_wgmma(probe: Probe, seed: int, iters: int) -> np.ndarray:
    """d_out of wgmma_probe: thread t's 128 accumulators, as wgmma lays out D (64x256)."""
    rows, ks = np.arange(64)[:, None], np.arange(16)[None, :]
    a = probe_value(seed, 0, rows, ks)
    b = probe_value(seed, 1, np.arange(256)[:, None], ks)
    d = iters * probe.per_commit * (a @ b.T)
    thread, reg = np.arange(128)[:, None], np.arange(128)[None, :]
    warp, g, t = thread // 32, (thread % 32) // 4, thread % 4
    row = 16 * warp + g + 8 * ((reg // 2) % 2)
    col = 8 * (reg // 4) + 2 * t + reg % 2
    return d[row, col].astype(np.float32)


# --- running -----------------------------------------------------------------------------
class Runner:
    def __init__(self, device: driver.Device, module: driver.Module, compiled: nvrtc.Compiled):
        self.device, self.module, self.compiled = device, module, compiled
        self.stream, self.start, self.end = driver.Stream(), driver.Event(), driver.Event()
        self.clocks = _clock_monitor(device)

    def _launch(self, probe: Probe, iters: int, seed: int) -> tuple[float, list, object]:
        blocks = self.device.sm_count * probe.blocks_per_sm
        entry = self.compiled.entry(probe.expression)
        if probe.is_wgmma:
            kernel = self.module.kernel(entry, ("ptr", "ptr", "int", "unsigned"))
            buffers = [driver.DeviceBuffer(4 * 128 * 128), driver.DeviceBuffer(4 * blocks * probe.threads)]
        else:
            kernel = self.module.kernel(entry, ("ptr", "int", "unsigned"))
            buffers = [driver.DeviceBuffer(4 * 4 * blocks * probe.threads)]
        for buf in buffers:
            buf.memset32(0x7FC00000)  # NaN: an element the kernel did not write stays NaN
        self.start.record(self.stream)
        kernel.launch((blocks,), (probe.threads,), [*buffers, iters, seed], self.stream)
        self.end.record(self.stream)
        clock = self.clocks.read() if self.clocks is not None and iters > CHECK_ITERS else None  # mid-launch
        self.end.synchronize()
        return driver.Event.elapsed_ms(self.start, self.end), buffers, clock

    def check(self, probe: Probe, seed: int) -> str:
        """'' when the probe's output matches the host's prediction exactly, else why not."""
        _, buffers, _ = self._launch(probe, CHECK_ITERS, seed)
        try:
            blocks = self.device.sm_count * probe.blocks_per_sm
            if probe.is_wgmma:
                d = buffers[0].download(np.empty((128, 128), np.float32))
                sums = buffers[1].download(np.empty(blocks * probe.threads, np.float32))
                want = expected_wgmma(probe, seed, CHECK_ITERS)
                want_sums = np.tile(want.astype(np.float64).sum(axis=1), blocks * probe.warpgroups).astype(np.float32)
                return _mismatch("D", d, want) or _mismatch("per-thread sums", sums, want_sums)
            out = buffers[0].download(np.empty(4 * blocks * probe.threads, np.float32))
            return _mismatch("accumulators", out, np.tile(expected_mma(probe, seed, CHECK_ITERS, probe.threads), blocks))
        finally:
            for buf in buffers:
                buf.close()

    def measure(self, probe: Probe, seconds: float, repeats: int, seed: int) -> dict:
        blocks = self.device.sm_count * probe.blocks_per_sm
        calibration = 2000
        ms, buffers, _ = self._launch(probe, calibration, seed)
        _close(buffers)
        iters = max(calibration, int(calibration * seconds * 1e3 / max(ms, 1e-3)))
        times, clocks = [], []
        for _ in range(repeats):
            ms, buffers, clock = self._launch(probe, iters, seed)
            _close(buffers)
            times.append(ms)
            if clock is not None:
                clocks.append(clock)
        tflops = [probe.flops(blocks, iters) / (t * 1e-3) / 1e12 for t in times]
        return {**asdict(probe), "blocks": blocks, "iters": iters, "times_ms": times,
                "tflops_median": statistics.median(tflops), "tflops_best": max(tflops),
                "sm_mhz_during": [c.sm_mhz for c in clocks] or None,
                "power_w_during": [c.power_w for c in clocks] or None}


def _mismatch(what: str, got: np.ndarray, want: np.ndarray) -> str:
    got, want = got.ravel(), want.ravel()
    bad = np.flatnonzero(~(got == want))
    if not bad.size:
        return ""
    i = bad[0]
    return f"{what}: {bad.size} of {got.size} differ, first at {i}: got {got[i]!r}, expected {want[i]!r}"


def _close(buffers) -> None:
    for buf in buffers:
        buf.close()


def _clock_monitor(device: driver.Device):
    """NVML's view of the SM clock while a probe runs, when nvidia-ml-py is there."""
    try:
        from gemm_driver.bench.clocks import ClockMonitor

        monitor = ClockMonitor(device.pci_bus_id())
        return monitor if monitor.available else None
    except Exception:
        return None


def select(device: driver.Device) -> tuple[str, tuple[Probe, ...]]:
    """The build target and the probes this GPU can run."""
    major, minor = device.compute_capability
    if major < 8:
        raise GemmDriverError(f"{device.name} is sm_{major}{minor}; the mma.sync probes need sm_80 or newer")
    if (major, minor) == (9, 0):
        return "sm_90a", MMA_PROBES + WGMMA_PROBES  # wgmma exists on sm_90a only
    return device.arch, MMA_PROBES


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--seconds", type=positive(float), default=0.15,
                        help="GPU time of one timed launch (default 0.15)")
    parser.add_argument("--repeats", type=positive(int), default=5, help="timed launches per probe (default 5)")
    args = parser.parse_args(argv)
    if args.json and Path(args.json).is_dir():
        parser.error(f"--json takes a file path, but {args.json!r} is a directory")
    try:
        device = driver.Device.get(0)
        context = driver.Context(device)
        arch, probes = select(device)
    except GemmDriverError as exc:
        print(f"{PROG}: error: this command needs an NVIDIA GPU of sm_80 or newer: {exc}", file=sys.stderr)
        return 2
    compiled = nvrtc.compile_cuda(SOURCE.read_bytes(), SOURCE.name, arch,
                                  name_expressions=sorted({p.expression for p in probes}))
    module = driver.Module(compiled.cubin, name=SOURCE.name)
    runner = Runner(device, module, compiled)
    rng = np.random.default_rng()
    results, status = [], 0
    for probe in probes:
        resources = compiled.resources[compiled.entry(probe.expression)]
        record = {"name": probe.name, "registers": resources.registers, "spill_bytes": resources.spill_bytes}
        failure = runner.check(probe, int(rng.integers(0, 2**32)))
        if failure:
            status = 1
            record.update(verified=False, error=failure)
        else:
            record.update(verified=True, **runner.measure(probe, args.seconds, args.repeats, int(rng.integers(0, 2**32))))
        results.append(record)
    document = {"tool": "tools/mma_ceiling.py", "device": device.name, "arch": arch, "sm_count": device.sm_count,
                "driver": ".".join(map(str, driver.driver_version())), "nvrtc": ".".join(map(str, nvrtc.version())),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "reference_sm_mhz": runner.clocks.reference_sm_mhz if runner.clocks else None,
                "check_iters": CHECK_ITERS, "probes": results}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    print(f"{device.name} ({arch}, {device.sm_count} SMs): tensor-core ceilings, TFLOP/s")
    print(f"{'probe':<48} {'grid x block':>13} {'regs':>5} {'median':>8} {'best':>8}  check")
    for r in results:
        if not r["verified"]:
            print(f"{r['name']:<48} {'':>13} {r['registers']:>5} {'':>8} {'':>8}  FAILED: {r['error']}")
            continue
        grid = f"{r['blocks']}x{r['threads']}"
        print(f"{r['name']:<48} {grid:>13} {r['registers']:>5} {r['tflops_median']:>8.1f} {r['tflops_best']:>8.1f}  ok")
    context.close()
    return status


if __name__ == "__main__":
    sys.exit(run(main, PROG))
