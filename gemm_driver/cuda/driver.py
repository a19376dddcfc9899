"""CUDA driver API objects: Device, Context, Stream, Event, DeviceBuffer, Module, Kernel.

Every resource is a context manager with an idempotent ``close()`` and a
``weakref.finalize`` fallback, so nothing leaks when a test fails half-way. This module is
the one import path for all of them; each lives with its kind:

- base.py: the lazily imported bindings (``api``), ``init``, device counts, ``Resource``;
- device.py: ``Device`` and ``Context`` (the primary context, retained);
- streams.py: ``Stream``, ``Event``, ``ExternalStream`` (a caller's stream), waits, capture;
- memory.py: ``DeviceBuffer``, ``PinnedWords``, pointer queries, pitched copies and fills;
- module.py: ``Module``, ``Kernel`` and the typed launch arguments (``PackedArgs``, tensor maps).
"""

from __future__ import annotations

from .base import Resource, api, device_count, driver_version, gpu_available, init
from .device import Context, Device
from .memory import DeviceBuffer, PinnedWords, copy_2d_async, memset_2d32_async, pointer_device
from .module import (ARGUMENT_TYPES, C_TYPES, TENSOR_MAP, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES, Kernel, Module,
                     PackedArgs)
from .streams import Event, ExternalStream, Stream, stream_is_capturing, stream_wait

__all__ = ["ARGUMENT_TYPES", "C_TYPES", "TENSOR_MAP", "TENSOR_MAP_ALIGN", "TENSOR_MAP_BYTES", "Context", "Device",
           "DeviceBuffer", "Event", "ExternalStream", "Kernel", "Module", "PackedArgs", "PinnedWords", "Resource",
           "Stream", "api", "copy_2d_async", "device_count", "driver_version", "gpu_available",
           "init", "memset_2d32_async", "pointer_device", "stream_is_capturing", "stream_wait"]
