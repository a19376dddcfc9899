"""Device (the facts about one GPU) and Context (its primary context, retained).

The context is the device's *primary* context, retained explicitly: cuBLAS (which uses the
runtime API) shares it, and it behaves the same on cuda-bindings 12.x and 13.x, unlike
``cuCtxCreate`` whose signature changed between them.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from .base import Resource, api, device_count, init
from .errors import GpuUnavailableError, check


@dataclass(frozen=True)
class Device:
    """One GPU and the facts about it that kernels and reports need."""

    ordinal: int
    handle: Any
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    max_shared_per_block_optin: int
    max_shared_per_sm: int
    max_threads_per_sm: int
    max_registers_per_sm: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    total_memory: int

    @classmethod
    def get(cls, ordinal: int = 0) -> "Device":
        init()
        d = api()
        count = device_count()
        if not 0 <= ordinal < count:
            raise GpuUnavailableError(f"GPU {ordinal} does not exist; this machine has {count}")
        handle = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        a = d.CUdevice_attribute

        def attr(name: str) -> int:
            return check(d.cuDeviceGetAttribute(getattr(a, name), handle), "cuDeviceGetAttribute")

        raw_name = check(d.cuDeviceGetName(256, handle), "cuDeviceGetName")
        return cls(
            ordinal=ordinal,
            handle=handle,
            name=raw_name.split(b"\x00")[0].decode(),
            compute_capability=(
                attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
            ),
            sm_count=attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            l2_bytes=attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
            max_shared_per_block_optin=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            max_shared_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
            max_threads_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
            max_registers_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
            clock_khz=attr("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
            memory_clock_khz=attr("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
            memory_bus_bits=attr("CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"),
            total_memory=check(d.cuDeviceTotalMem(handle), "cuDeviceTotalMem"),
        )

    @property
    def arch(self) -> str:
        """The NVRTC target for this device, e.g. 'sm_90'."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def pci_bus_id(self) -> str:
        """e.g. '0000:1B:00.0': how NVML knows this same GPU, whatever CUDA_VISIBLE_DEVICES says."""
        raw = check(api().cuDeviceGetPCIBusId(32, self.handle), "cuDeviceGetPCIBusId")
        raw = raw if isinstance(raw, bytes) else str(raw).encode()
        return raw.split(b"\x00")[0].decode()


class Context(Resource):
    """The device's primary context, retained for this object's lifetime.

    ``with Context(device):`` pushes it on this thread and pops it on exit; the
    constructor also makes it current so that plain, non-``with`` use works too.
    """

    def __init__(self, device: Device | int = 0):
        self.device = device if isinstance(device, Device) else Device.get(device)
        d = api()
        self.handle = check(d.cuDevicePrimaryCtxRetain(self.device.handle), "cuDevicePrimaryCtxRetain")
        self._finalizer = weakref.finalize(self, _release_primary, self.device.handle)
        self.make_current()

    def make_current(self) -> None:
        check(api().cuCtxSetCurrent(self.handle), "cuCtxSetCurrent")

    def __enter__(self) -> "Context":
        check(api().cuCtxPushCurrent(self.handle), "cuCtxPushCurrent")
        return self

    def __exit__(self, *exc) -> None:
        check(api().cuCtxPopCurrent(), "cuCtxPopCurrent")
        self.close()

    def synchronize(self) -> None:
        check(api().cuCtxSynchronize(), "cuCtxSynchronize")

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes of device memory."""
        return check(api().cuMemGetInfo(), "cuMemGetInfo")


def _release_primary(device_handle) -> None:
    api().cuDevicePrimaryCtxRelease(device_handle)
