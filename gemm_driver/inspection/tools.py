"""Find and run NVIDIA's binary utilities (nvdisasm, cuobjdump) on a cubin.

Both come from pip wheels (``nvidia-cuda-nvdisasm``, ``nvidia-cuda-cuobjdump``) and work
without a GPU. They are located with ``cuda.pathfinder.find_nvidia_binary_utility``
(cuda-pathfinder 1.3.4+; it finds cuobjdump in the CUDA 13 wheel layout from 1.8.1). An
older pathfinder has no such function: we then look on PATH only, and say what to install
when that fails too, rather than crash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from functools import lru_cache

from ..cuda.errors import GemmDriverError, LibraryNotFoundError

PIP_HINT = "pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump 'cuda-pathfinder>=1.8.1'"

# nvdisasm 13 says this about every cubin NVRTC 12.x writes; the disassembly is still right.
_BENIGN_WARNINGS = ("Disassembling Std Elf to Old format", "Dataflow analysis disabled")


@lru_cache(maxsize=None)
def find_tool(name: str) -> str:
    """Absolute path of ``name`` (nvdisasm or cuobjdump); LibraryNotFoundError if absent."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        path = find_nvidia_binary_utility(name)
    except Exception:  # cuda-pathfinder < 1.3.4, or one that does not know this utility
        path = None
    path = path or shutil.which(name)
    if not path:
        raise LibraryNotFoundError(f"{name} was not found; install it with: {PIP_HINT}")
    return path


def run_on_cubin(tool: str, args: list[str], cubin: bytes) -> str:
    """Run ``tool args... CUBIN`` (the tools read files, not stdin) and return stdout.

    A failure raises GemmDriverError with the tool's own message; known harmless
    warnings on stderr are dropped, others are kept at the end of the output as comments.
    """
    path = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="gemm-inspect-") as tmp:
        image = os.path.join(tmp, "kernel.cubin")
        with open(image, "wb") as f:
            f.write(cubin)
        done = subprocess.run([path, *args, image], capture_output=True, text=True, check=False)
    warnings = [line for line in done.stderr.splitlines()
                if line.strip() and not any(w in line for w in _BENIGN_WARNINGS)]
    if done.returncode != 0:
        reason = warnings[0] if warnings else f"exit status {done.returncode}"
        raise GemmDriverError(f"{tool} could not read the cubin: {reason}")
    return done.stdout + "".join(f"// {tool}: {w}\n" for w in warnings)
