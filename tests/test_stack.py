"""Without a CUDA stack (neither the cu12 nor the cu13 extra installed), what needs cuda.bindings
says in one line what to install, and the CLI exits 2; what does not need it still works."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemm_driver.cuda import stack

# Runs the CLI with cuda.bindings hidden, as on a machine where it was never installed.
WITHOUT_BINDINGS = """
import sys
class Hidden:
    def find_spec(self, name, path=None, target=None):
        if name == "cuda.bindings" or name.startswith("cuda.bindings."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hidden())
from gemm_driver.cli import main
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
"""


def cli_without_bindings(*argv):
    return subprocess.run([sys.executable, "-c", WITHOUT_BINDINGS, *argv], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv", [["compile", "naive"], ["bench", "--kernels", "naive", "--sizes", "64"]])
def test_a_command_that_needs_the_stack_says_what_to_install_in_one_line(argv):
    done = cli_without_bindings(*argv)
    assert done.returncode == 2
    assert done.stderr.strip() == f"gemm-driver {argv[0]}: error: {stack.MISSING}"


def test_list_needs_no_stack():
    done = cli_without_bindings("list")
    assert done.returncode == 0 and "hopper_bf16" in done.stdout


def test_bindings_gives_the_module_when_the_stack_is_there():
    assert stack.bindings("nvrtc").__name__ == "cuda.bindings.nvrtc"
