"""Read what the compiler made of a kernel: ``python tools/inspect.py {ptx,sass,stats,diff} ...``.

The same command as ``python -m gemm_driver inspect ...`` (see ``--help``); it needs no GPU.
Bad input is one line and exit 2, Ctrl-C exits 130 without a traceback.

This file shares its name with the standard library's ``inspect``, and Python puts the
folder of the script it runs first on ``sys.path``: any script in tools/ (this one
included) that imports something needing ``inspect`` (dataclasses does) finds this file
instead. So when this file is imported under that name, it hands over to the standard
library's module, and the scripts beside it need no import-path edits.
"""

import sys

if __name__ == "__main__":
    import signal

    # Ctrl-C while the modules load is held until they have: raised inside numpy's C import
    # it would surface as an ImportError with a page of advice instead of a KeyboardInterrupt.
    interrupted = []
    signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    try:
        from gemm_driver.cli import main
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = 130 if interrupted else main(["inspect", *sys.argv[1:]])
    except KeyboardInterrupt:  # quiet, exit 130, as the CLI does
        code = 130
    sys.exit(code)
else:  # imported as `inspect` from tools/: become the standard library's module
    import importlib.util
    import sysconfig
    from pathlib import Path

    _spec = importlib.util.spec_from_file_location(__name__, Path(sysconfig.get_paths()["stdlib"]) / "inspect.py")
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[__name__] = _module
    _spec.loader.exec_module(_module)
