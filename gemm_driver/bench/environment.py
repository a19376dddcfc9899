"""What a result was measured on: GPU, driver, library versions, software, command.

``collect`` never fails for lack of a GPU or a library: each missing piece is recorded
as the reason it is missing, so ``info`` works anywhere and a JSON file is always
self-describing.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from ..cuda import cache, cublas, headers, nvrtc
from ..cuda.driver import Device, driver_version
from ..kernels import sources

_PACKAGE = Path(__file__).resolve().parents[1]
FINGERPRINTED = (".py", ".json", ".cu", ".cuh", ".h", ".ptx")  # what decides what runs and how it is chosen


def _attempt(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # recorded, not raised: this is a description, not an operation
        return {"unavailable": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def sources_fingerprint() -> str:
    """12 hex digits of a SHA-256 over the files that decide what runs: the package's Python and
    tuned tables, and the kernel sources (cu/, ptx/), each by its path and bytes. Unlike
    ``gemm_driver_commit`` it is read from the files themselves, so a copy of the tree whose git
    metadata is stale or absent (a lent GPU machine's copy of a working tree) still says which
    code ran: check out a commit and ``info`` prints that commit's fingerprint. The same in a
    checkout and in an install (an install's copy of cu/ and ptx/ inside the package is left out
    of the package's part)."""
    digest = hashlib.sha256()
    root = sources.source_root()
    for base, name in ((_PACKAGE, _PACKAGE.name), (root / "cu", "cu"), (root / "ptx", "ptx")):
        for path in sorted(base.rglob("*")):
            relative = path.relative_to(base)
            if path.suffix not in FINGERPRINTED or "_sources" in relative.parts or "__pycache__" in relative.parts:
                continue
            digest.update(f"{name}/{relative.as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:12]


def _cache_state() -> str:
    """The compile cache's directory, or "off: <why>" when none is used (turned off, or the
    configured directory cannot be written): never an unusable path shown as the cache."""
    directory, why = cache.status()
    return str(directory) if directory is not None else f"off: {why}"


def gpu_record(device: Device) -> dict:
    return {
        "name": device.name,
        "ordinal": device.ordinal,
        "compute_capability": ".".join(map(str, device.compute_capability)),
        "arch": device.arch,
        "sm_count": device.sm_count,
        "l2_bytes": device.l2_bytes,
        "memory_bytes": device.total_memory,
        "max_shared_per_block_optin": device.max_shared_per_block_optin,
        "sm_clock_mhz_max": device.clock_khz // 1000,
        "memory_clock_mhz_max": device.memory_clock_khz // 1000,
        "memory_bus_bits": device.memory_bus_bits,
    }


def collect(device: Device | None = None) -> dict:
    """The environment as a JSON-ready dict; ``device`` defaults to GPU 0 if there is one."""
    gpu = gpu_record(device) if device is not None else _attempt(lambda: gpu_record(Device.get(0)))
    return {
        "timestamp_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "gemm_driver_commit": _git_commit(),
        "gemm_driver_sources": _attempt(sources_fingerprint),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gpu": gpu,
        "driver_cuda_version": _attempt(lambda: "%d.%d" % driver_version()),
        "cuda_bindings": _package_version("cuda-bindings"),
        "cuda_pathfinder": _package_version("cuda-pathfinder"),
        "numpy": _package_version("numpy"),
        "nvrtc_version": _attempt(lambda: "%d.%d" % nvrtc.version()),
        "nvrtc_path": _attempt(nvrtc.library_path),
        "nvjitlink_version": _attempt(lambda: "%d.%d" % nvrtc.jitlink_version()),
        "cublas_version": _attempt(lambda: "%d.%d.%d" % cublas.version()),
        "cublas_path": _attempt(cublas.library_path),
        "cache_dir": _cache_state(),
        # cuda_bf16.h / cuda_fp16.h for the tensor-core kernels (cuda/headers.py)
        "cuda_header_dirs": _attempt(lambda: ", ".join(headers.include_directories())),
    }


INFO_KEYS = ("gemm_driver_sources", "driver_cuda_version", "cuda_bindings", "nvrtc_version", "nvrtc_path",
             "nvjitlink_version", "cublas_version", "cublas_path", "cuda_header_dirs", "cache_dir", "python", "numpy")


def describe(env: dict, no_gpu_hint: str) -> list[str]:
    """The environment as ``info`` prints it: the GPU first (or why there is none, and
    ``no_gpu_hint``), then one ``key: value`` line per version and path."""
    gpu = env["gpu"]
    if "unavailable" in gpu:
        lines = [f"GPU: none found ({gpu['unavailable']}); {no_gpu_hint}"]
    else:
        lines = [f"GPU: {gpu['name']} (sm_{gpu['compute_capability'].replace('.', '')}, {gpu['sm_count']} SMs, "
                 f"{gpu['memory_bytes'] / 2**30:.1f} GiB, L2 {gpu['l2_bytes'] / 2**20:.0f} MiB)"]
    for key in INFO_KEYS:
        value = env[key]
        lines.append(f"{key}: {value['unavailable'] + ' (unavailable)' if isinstance(value, dict) else value}")
    return lines
