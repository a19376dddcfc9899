"""Read what the compiler made of a kernel: ``python tools/inspect.py {ptx,sass,stats,diff} ...``.

A thin command over ``gemm_driver.inspect`` (see ``--help``); it needs no GPU.
"""

import os
import sys

# Run as a script, this file's folder leads sys.path, and its name would then shadow the
# standard library's ``inspect`` (which dataclasses imports). Drop the folder first.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

try:
    import gemm_driver  # noqa: F401  an installed package, or one already on PYTHONPATH
except ImportError:  # a source checkout: the package sits one level up
    sys.path.insert(0, os.path.dirname(_HERE))

from gemm_driver.inspect.command import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
