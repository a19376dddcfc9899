"""Source -> PTX + cubin for an explicit architecture, with no GPU needed.

CUDA C++ goes through NVRTC; hand-written PTX is assembled by nvJitLink. Both run with
``ptxas -v`` so every build carries the register, shared-memory, stack and spill figures
for each entry point. We always produce a cubin for the exact architecture (an NVRTC newer
than the driver emits PTX the driver cannot JIT, while a cubin loads) and keep the PTX for
inspection. This module never imports the driver, so it works on machines without a GPU.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping, Sequence

from . import headers as system_headers
from .errors import LibraryNotFoundError, NvrtcError, check, nvrtc_log
from .stack import CudaStackMissingError, bindings

ARCH_PATTERN = re.compile(r"^sm_(\d+)(a?)$")


@dataclass(frozen=True)
class Resources:
    """One entry point's resources. None means not known: spill counts exist only in the
    ``ptxas -v`` log, which a compiler serving its own cache does not print."""

    registers: int = 0
    shared_bytes: int = 0  # static shared memory only; dynamic comes from the launch
    stack_bytes: int = 0  # per-thread stack frame = local memory the code itself uses
    spill_store_bytes: int | None = 0
    spill_load_bytes: int | None = 0
    constant_bytes: int = 0  # cmem[0]: the parameter bank and compiler constants
    barriers: int = 0  # named barriers (from the cubin)

    @property
    def spill_bytes(self) -> int | None:
        if self.spill_store_bytes is None or self.spill_load_bytes is None:
            return None
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass(frozen=True)
class Compiled:
    """The products of one build: PTX, cubin, lowered names, per-entry resources."""

    arch: str
    ptx: bytes
    cubin: bytes
    log: str
    lowered_names: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, Resources] = field(default_factory=dict)
    compile_seconds: float = 0.0

    def entry(self, name: str) -> str:
        """The symbol to load for a name expression (or a plain extern "C" name)."""
        return self.lowered_names.get(name, name)


def _nvrtc():
    try:
        nvrtc = bindings("nvrtc")
        nvrtc.nvrtcVersion()
        return nvrtc
    except CudaStackMissingError:
        raise
    except Exception as exc:
        raise LibraryNotFoundError(
            f"NVRTC could not be loaded ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
            "install it with: pip install nvidia-cuda-nvrtc-cu12"
        ) from None


@lru_cache(maxsize=1)
def version() -> tuple[int, int]:
    major, minor = check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def library_path(name: str = "nvrtc") -> str:
    """Where cuda.pathfinder finds libnvrtc (or 'nvJitLink'): the copy the bindings load."""
    from cuda.pathfinder import load_nvidia_dynamic_lib

    return load_nvidia_dynamic_lib(name).abs_path


def _nvjitlink_missing(exc: Exception) -> LibraryNotFoundError:
    return LibraryNotFoundError(
        f"nvJitLink could not be loaded ({exc}); install it with: pip install nvidia-nvjitlink-cu12")


@lru_cache(maxsize=1)
def jitlink_version() -> tuple[int, int]:
    """nvJitLink's version (it assembles the hand-written PTX)."""
    try:
        return tuple(int(v) for v in bindings("nvjitlink").version())
    except CudaStackMissingError:
        raise
    except Exception as exc:
        raise _nvjitlink_missing(exc) from None


@lru_cache(maxsize=1)
def supported_archs() -> tuple[int, ...]:
    return tuple(int(a) for a in check(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def parse_arch(arch: str) -> tuple[int, bool]:
    """'sm_90a' -> (90, True). Raises ValueError naming what is allowed."""
    match = ARCH_PATTERN.match(arch)
    if not match:
        raise ValueError(f"architecture {arch!r} is not of the form sm_XY or sm_XYa (e.g. sm_80, sm_90a)")
    return int(match.group(1)), bool(match.group(2))


def check_arch(arch: str) -> None:
    number, specific = parse_arch(arch)
    if specific and number < 90:
        raise ValueError(f"{arch}: the 'a' (arch-specific) suffix exists only for sm_90 and newer")
    if number not in supported_archs():
        allowed = ", ".join(f"sm_{a}" for a in supported_archs())
        raise ValueError(f"NVRTC {version()[0]}.{version()[1]} cannot target {arch}; it supports {allowed}")


def compile_cuda(
    source: bytes,
    filename: str,
    arch: str,
    *,
    headers: Mapping[str, bytes] | None = None,
    options: Sequence[str] = (),
    name_expressions: Sequence[str] = (),
) -> Compiled:
    """Compile CUDA C++ to PTX and cubin for ``arch``.

    ``headers`` maps include names to their bytes: NVRTC sees exactly the headers the
    cache key hashed; system headers (``#include <...>``) come from the CUDA runtime wheel
    (``headers.py``). ``name_expressions`` (e.g. ``"smem_tiled<32, true>"``) instantiate
    templates; their mangled names come back in ``lowered_names``.
    """
    check_arch(arch)
    nvrtc = _nvrtc()
    headers = dict(headers or {})
    start = time.perf_counter()
    program = check(
        nvrtc.nvrtcCreateProgram(
            source, filename.encode(), len(headers), list(headers.values()), [h.encode() for h in headers]
        ),
        "nvrtcCreateProgram",
    )
    try:
        for expr in name_expressions:
            check(nvrtc.nvrtcAddNameExpression(program, expr.encode()), "nvrtcAddNameExpression", program)
        # A source that includes <cuda_bf16.h> etc. gets the runtime wheel's include directory.
        includes = system_headers.include_options(source, headers)
        opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v", *includes, *options]
        status = nvrtc.nvrtcCompileProgram(program, len(opts), [o.encode() for o in opts])
        check(status, f"nvrtcCompileProgram({filename}, {arch})", program)
        log = nvrtc_log(program)
        ptx = _read(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, program).rstrip(b"\x00")  # C string
        cubin = _read(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, program)  # binary: keep every byte
        lowered = {
            expr: check(nvrtc.nvrtcGetLoweredName(program, expr.encode()), "nvrtcGetLoweredName").decode()
            for expr in name_expressions
        }
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return Compiled(
        arch=arch,
        ptx=ptx,
        cubin=cubin,
        log=log,
        lowered_names=lowered,
        resources=cubin_resources(cubin, log, arch),
        compile_seconds=time.perf_counter() - start,
    )


def _read(size_fn, read_fn, program) -> bytes:
    size = check(size_fn(program), size_fn.__name__)
    buf = b" " * size
    check(read_fn(program, buf), read_fn.__name__)
    return buf


def assemble_ptx(ptx: bytes, filename: str, arch: str) -> Compiled:
    """Assemble hand-written PTX to a cubin with nvJitLink (no GPU needed)."""
    check_arch(arch)
    try:
        nvjitlink = bindings("nvjitlink")
    except CudaStackMissingError:
        raise
    except Exception as exc:
        raise _nvjitlink_missing(exc) from None
    start = time.perf_counter()
    options = [f"-arch={arch}", "-verbose"]
    try:
        handle = nvjitlink.create(len(options), options)
    except Exception as exc:
        raise LibraryNotFoundError(f"nvJitLink is not usable: {exc}") from None
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), filename)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            name = "NVJITLINK_" + str(exc).split(" (")[0]
            log = _jitlink_log(nvjitlink, handle, error=True)
            raise NvrtcError(name, "PTX assembly failed", f"nvJitLink({filename}, {arch})", log) from None
        log = _jitlink_log(nvjitlink, handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
    finally:
        nvjitlink.destroy(handle)
    return Compiled(
        arch=arch,
        ptx=ptx,
        cubin=bytes(cubin),
        log=log,
        resources=cubin_resources(bytes(cubin), log, arch),
        compile_seconds=time.perf_counter() - start,
    )


def _jitlink_log(nvjitlink, handle, error: bool = False) -> str:
    size_fn = nvjitlink.get_error_log_size if error else nvjitlink.get_info_log_size
    read_fn = nvjitlink.get_error_log if error else nvjitlink.get_info_log
    buf = bytearray(size_fn(handle))
    if buf:
        read_fn(handle, buf)
    return bytes(buf).rstrip(b"\x00").decode(errors="replace")


_FUNCTION = re.compile(r"ptxas\s+info\s+:\s+Function properties for (\S+)")
_STACK = re.compile(r"ptxas\s+\.\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas\s+info\s+:\s+Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Per-entry Resources from a ``ptxas -v`` log (NVRTC's or nvJitLink's).

    ptxas prints, per function: "Function properties for NAME", then the stack/spill
    line, then "Used N registers, ... N bytes smem, N bytes cmem[0]". nvJitLink -verbose
    prints these same lines and then a summary of its own ("info : used N registers");
    that summary is ignored on purpose: its smem figure adds the 1 KiB the system
    reserves per block, so it is not the kernel's own shared memory.
    """
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        if m := _FUNCTION.search(line):
            current = found.setdefault(m.group(1), {})
        elif current is None:
            continue
        elif m := _STACK.search(line):
            current.update(stack_bytes=int(m[1]), spill_store_bytes=int(m[2]), spill_load_bytes=int(m[3]))
        elif m := _USED.search(line):
            rest = m.group(2)
            current["registers"] = int(m[1])
            for key, pattern in (("shared_bytes", _SMEM), ("constant_bytes", _CMEM), ("barriers", _BARRIERS)):
                if hit := pattern.search(rest):
                    current[key] = int(hit[1])
    return {name: Resources(**values) for name, values in found.items()}


# From sm_90 on, a kernel's .nv.shared section starts with a 1 KiB window the system
# reserves; the driver's SHARED_SIZE_BYTES (and ptxas) leave it out, and so do we.
_RESERVED_SHARED_FROM_SM90 = 1024


def cubin_resources(cubin: bytes, log: str, arch: str) -> dict[str, Resources]:
    """Resources of each kernel: sizes and barriers from the cubin itself, spills from the log.

    The cubin is always there; the ``ptxas -v`` log is not (a compiler answering from its
    cache prints none). Without a log, spills are still known to be 0 when the stack frame
    is empty, since spilled registers live in that frame; otherwise they are None.
    """
    from .elf import functions

    reserved = _RESERVED_SHARED_FROM_SM90 if parse_arch(arch)[0] >= 90 else 0
    logged = parse_ptxas_log(log)
    found = {}
    for name, f in functions(cubin).items():
        known = logged.get(name)
        if known is not None:
            stores, loads = known.spill_store_bytes, known.spill_load_bytes
        else:
            stores = loads = 0 if f.frame_bytes == 0 else None
        found[name] = Resources(
            registers=f.registers,
            shared_bytes=max(f.shared_bytes - reserved, 0) if f.shared_bytes else 0,
            stack_bytes=f.frame_bytes,
            spill_store_bytes=stores,
            spill_load_bytes=loads,
            constant_bytes=f.constant_bytes,
            barriers=f.barriers,
        )
    return found
