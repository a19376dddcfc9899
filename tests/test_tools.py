"""Every script in tools/ as a user meets it: --help, an unknown option, bad input, no GPU, Ctrl-C.

Each runs as a subprocess, as from a shell. --help prints usage, exits 0 and does nothing
else (no GPU session started, no file written); an unknown option or a bad value is one
line on stderr and exit 2; so is a missing or malformed file for results_table.py, and a
missing GPU for the GPU tools (those cases skip on a machine that has one, where they
would start real work). No traceback anywhere. Fast: nothing here compiles a kernel
except the Ctrl-C test, which interrupts a compile.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HAVE_GPU

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
BENCH = REPO / "results" / "h100-80gb-hbm3" / "archive" / "bench-cupy.json"

# Every script, and the arguments that reach its option parsing with one unknown option.
UNKNOWN_OPTION = {
    "api_overhead.py": ["--bogus"],
    "probe_api_calls.py": ["--bogus"],
    "autotune.py": ["--bogus"],
    "bank_conflicts.sh": ["--bogus"],
    "corpus_rows.py": [str(BENCH), "--bogus"],
    "corpus_shift.py": [str(BENCH), str(BENCH), "--bogus"],
    "final_round.py": ["journal.jsonl", "--bogus"],
    "gen_wgmma.py": ["--bogus"],
    "gpu_session.sh": ["--bogus"],
    "inspect.py": ["stats", "--bogus"],
    "left_out.py": ["--bogus"],
    "ladder_sweep.py": ["--bogus"],
    "mma_ceiling.py": ["--bogus"],
    "results_index.py": ["--bogus"],
    "results_table.py": [str(BENCH), "--bogus"],
    "spread_check.py": ["one.jsonl", "spread.jsonl", "--bogus"],
    "sweep_phases.py": ["journal.jsonl", "--bogus"],
    "train_mlp.py": ["--bogus"],
}


def scripts() -> list[str]:
    return sorted(p.name for p in TOOLS.iterdir() if p.suffix in (".py", ".sh") and not p.name.startswith("_"))


def tool(name: str, *args: str, cwd: Path = REPO, env: dict | None = None, timeout: float = 120):
    """Run tools/<name> as a user would (bash for .sh, this Python for .py)."""
    command = ["bash" if name.endswith(".sh") else sys.executable, str(TOOLS / name), *args]
    environ = {**os.environ, "PYTHONPATH": str(REPO), "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=environ, timeout=timeout)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_every_script_is_covered():
    assert scripts() == sorted(UNKNOWN_OPTION), "a new script in tools/: add it to UNKNOWN_OPTION"


@pytest.mark.parametrize("name", sorted(UNKNOWN_OPTION))
def test_help_prints_usage_and_does_nothing_else(tmp_path, name):
    work = tmp_path / "cwd"
    work.mkdir()
    done = tool(name, "--help", cwd=work, env={"OUT": str(tmp_path / "gpu-out")})
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and done.stderr == ""
    assert list(work.iterdir()) == [], "--help wrote something (bank_conflicts.sh took it as its OUTPUT?)"
    assert not (tmp_path / "gpu-out").exists(), "--help started a GPU session"


@pytest.mark.parametrize("name", sorted(UNKNOWN_OPTION))
def test_unknown_option_is_one_line_and_exit_2(tmp_path, name):
    done = tool(name, *UNKNOWN_OPTION[name], cwd=REPO if name.endswith(".sh") else tmp_path,
                env={"OUT": str(tmp_path / "gpu-out")})
    assert done.returncode == 2 and done.stdout == ""
    assert "--bogus" in one_line(done.stderr)
    assert not (tmp_path / "gpu-out").exists()


@pytest.mark.parametrize("name, args, words", [
    ("autotune.py", ["--kernel", "warptiled"], "choose from autotuned"),
    ("autotune.py", ["--seconds", "-1"], "must be above zero"),
    ("autotune.py", ["--shapes", "12y"], "12y"),
    ("autotune.py", ["--kernel", "hopper_bf16", "--corpus", "all:validate"], "no sweep reads the validation set"),
    ("autotune.py", ["--corpus", "llm"], "no sweep reads the validation set"),
    ("autotune.py", ["--corpus", "nope:tune"], "nope"),
    ("autotune.py", ["--gpus", "one"], "--gpus takes all or GPU ordinals"),
    ("autotune.py", ["--shapes", "512,1024", "--max-m", "100"], "no shape has M <= 100"),
    ("autotune.py", ["--shapes", "512,1024", "--min-m", "1024"], "no shape has M > 1024"),
    ("autotune.py", ["--kernel", "hopper_bf16", "--corpus", "all:tune", "--merge"], "give both"),
    ("ladder_sweep.py", ["--kernels", "nope"], "choose from blocktile_1d"),
    ("ladder_sweep.py", ["--seconds", "fast"], "is not a number"),
    ("mma_ceiling.py", ["--repeats", "0"], "must be above zero"),
    ("autotune.py", ["--json", "."], "is a directory"),
    ("bank_conflicts.sh", ["a.txt", "b.txt"], "one OUTPUT path at most"),
    ("bank_conflicts.sh", ["."], "is a directory"),
    ("gpu_session.sh", ["--sizes", "x"], "--sizes"),
    ("left_out.py", ["--neighbours", "0,2"], "positive integers"),
    ("left_out.py", ["--neighbours", "two"], "positive integers"),
])
def test_bad_values_are_one_line_and_exit_2(tmp_path, name, args, words):
    done = tool(name, *args, env={"OUT": str(tmp_path / "gpu-out")})
    assert done.returncode == 2 and done.stdout == ""
    assert words in one_line(done.stderr)
    assert not (tmp_path / "gpu-out").exists()


@pytest.mark.skipif(HAVE_GPU, reason="with a GPU these would start real sweeps")
@pytest.mark.parametrize("name", ["autotune.py", "ladder_sweep.py", "mma_ceiling.py", "gpu_session.sh"])
def test_gpu_tools_without_a_gpu_say_so_in_one_line(tmp_path, name):
    done = tool(name, env={"OUT": str(tmp_path / "gpu-out")})
    assert done.returncode == 2 and done.stdout == ""
    assert "needs an NVIDIA GPU" in one_line(done.stderr)
    assert not (tmp_path / "gpu-out").exists()


def test_bank_conflicts_without_ncu_says_so(tmp_path):
    bare = "/usr/bin:/bin"
    if shutil.which("ncu", path=bare):
        pytest.skip("ncu is on the bare PATH: the script would really profile")
    done = tool("bank_conflicts.sh", str(tmp_path / "out.txt"), env={"PATH": bare})
    assert done.returncode == 2 and "ncu" in one_line(done.stderr)
    assert not (tmp_path / "out.txt").exists()


# --- results_table.py reads through the validating loader -----------------------------------
def test_results_table_prints_a_committed_run():
    done = tool("results_table.py", str(BENCH))
    assert done.returncode == 0 and done.stderr == ""
    assert "| kernel |" in done.stdout and "| cublas |" in done.stdout


def test_results_table_missing_file(tmp_path):
    done = tool("results_table.py", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr) == f"results_table.py: error: {tmp_path / 'missing.json'}: no such file"


@pytest.mark.parametrize("content, words", [
    ("not json", "not JSON"),
    ('{"schema": "gemm_driver.tuned/1"}', "is not a bench result"),
    (None, "results[0].tflops is a string, expected a number >= 0 or null"),
])
def test_results_table_bad_document(tmp_path, content, words):
    path = tmp_path / "bad.json"
    if content is None:
        doc = json.loads(BENCH.read_text())
        doc["results"][0]["tflops"] = "fast"
        content = json.dumps(doc)
    path.write_text(content)
    done = tool("results_table.py", str(path))
    assert done.returncode == 2 and done.stdout == ""
    line = one_line(done.stderr)
    assert line.startswith(f"results_table.py: error: {path}: ") and words in line


# --- corpus_shift.py: the shapes whose pick changed between two runs --------------------------
VALIDATION = REPO / "results" / "h100-80gb-hbm3" / "bench-corpus-validate-fp32.json"


def test_corpus_shift_lists_the_shapes_whose_pick_changed(tmp_path):
    doc = json.loads(VALIDATION.read_text())
    own = next(c for c in doc["results"] if c["kernel"] == "autotuned" and c["status"] == "ok")
    own["tunables"] = {**own["tunables"], "SPLITK": 99}  # another pick, at half the speed
    own["tflops"] /= 2
    later = tmp_path / "later.json"
    later.write_text(json.dumps(doc))
    done = tool("corpus_shift.py", str(VALIDATION), str(later))
    assert done.returncode == 0 and done.stderr == ""
    shape = f"{own['m']}x{own['n']}x{own['k']}"
    assert "1 shapes ran other tunables: ratio x0.500 (geometric mean); the other 130: x1.000" in done.stdout
    changed = [line for line in done.stdout.splitlines() if line.startswith("  fp32")]
    assert len(changed) == 1 and shape in changed[0] and "SPLITK" in changed[0] and "->99" in changed[0]
    same = tool("corpus_shift.py", str(VALIDATION), str(VALIDATION))
    assert "0 shapes ran other tunables: ratio - (geometric mean); the other 131: x1.000" in same.stdout


def test_corpus_shift_takes_a_tunable_gained_since_a_run_at_its_default_there(tmp_path):
    doc = json.loads(VALIDATION.read_text())
    dropped = 0
    for case in doc["results"]:  # the earlier run, from before autotuned had PER_SM (default 0)
        if case["kernel"] == "autotuned" and case["status"] == "ok" and case["tunables"]["PER_SM"] == 0:
            del case["tunables"]["PER_SM"]
            dropped += 1
    assert dropped > 0
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(doc))
    done = tool("corpus_shift.py", str(earlier), str(VALIDATION))
    assert done.returncode == 0 and done.stderr == ""
    assert "0 shapes ran other tunables" in done.stdout and "the other 131: x1.000" in done.stdout


def test_left_out_repeats_the_vote_s_check_for_each_number_of_neighbours():
    from gemm_driver.kernels import tuned
    from gemm_driver.kernels.hopper import selection
    done = tool("left_out.py", "--neighbours", "1,2")
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    at = lines.index("h100-80gb-hbm3.hopper_bf16.json: hopper_bf16 on NVIDIA H100 80GB HBM3, 99 tuning shapes")
    table = tuned.load_table("NVIDIA H100 80GB HBM3", kernel="hopper_bf16")
    for line, neighbours, mark in ((lines[at + 1], 1, " "), (lines[at + 2], 2, "*")):  # * the vote's own
        slowdowns = tuned.left_out_slowdowns(table["entries"], selection.candidates, tie=selection.TIE,
                                             neighbours=neighbours)
        geomean = math.exp(sum(map(math.log, slowdowns)) / len(slowdowns))
        assert line.startswith(f"  {mark}{neighbours} neighbours: {geomean:.4f}x  worst {max(slowdowns):.3f}x")


def test_corpus_rows_gives_each_subset_of_a_committed_run():
    done = tool("corpus_rows.py", str(VALIDATION))
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "fp32:" and len(lines) == 9
    counts = {line.split(" | ")[0][2:]: int(line.split(" | ")[1]) for line in lines[3:]}
    assert counts["all"] == 131 == counts["without the odd shapes"] + counts["the odd shapes"]
    assert counts["M = 16"] < counts["M <= 128"] < counts["all"]
    assert "of the copy bandwidth" in lines[5]


def test_corpus_shift_missing_file(tmp_path):
    done = tool("corpus_shift.py", str(VALIDATION), str(tmp_path / "missing.json"))
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr) == f"corpus_shift.py: error: {tmp_path / 'missing.json'}: no such file"


# --- Ctrl-C ------------------------------------------------------------------------------
def _importing(pid: int) -> bool:
    """Whether the tool's own imports are under way: numpy's extension is mapped (Linux /proc).
    Earlier, Python itself is still starting (site), where no script can catch anything."""
    try:
        return "numpy" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to see the imports")
@pytest.mark.parametrize("when", ["starting up", "compiling"])
def test_ctrl_c_in_the_inspection_tool_exits_130_without_a_traceback(tmp_path, when):
    """Ctrl-C as a terminal sends it (to the whole process group), while the tool imports
    its modules (where the old script printed a traceback) or while it compiles."""
    cache = tmp_path / "cache"
    environ = {**os.environ, "PYTHONPATH": str(REPO), "GEMM_DRIVER_CACHE_DIR": str(cache)}
    environ.pop("GEMM_DRIVER_NO_CACHE", None)
    # stats of every kernel: many compiles, so it is surely still working when interrupted
    proc = subprocess.Popen([sys.executable, str(TOOLS / "inspect.py"), "stats", "--arch", "sm_80"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ, cwd=tmp_path,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        ready = (lambda: _importing(proc.pid)) if when == "starting up" else \
            (lambda: cache.exists() and any(cache.glob("*.json")))  # imports done, compiling
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"not {when} after 120 s"
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


# --- the shared runner itself --------------------------------------------------------------
@pytest.fixture(scope="module")
def toolkit():
    spec = importlib.util.spec_from_file_location("_toolkit_under_test", TOOLS / "_toolkit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raises(exc: BaseException):
    def main():
        raise exc
    return main


def test_run_turns_failures_into_one_line_and_an_exit_code(toolkit, capsys):
    from gemm_driver.cuda.errors import GpuUnavailableError, NvrtcError

    assert toolkit.run(lambda: 0, "t") == 0 and toolkit.run(lambda: 1, "t") == 1
    assert toolkit.run(_raises(KeyboardInterrupt()), "t") == 130
    assert capsys.readouterr().err == ""
    assert toolkit.run(_raises(GpuUnavailableError("no driver")), "t") == 2
    assert capsys.readouterr().err == "t: error: this command needs an NVIDIA GPU: no driver\n"
    assert toolkit.run(_raises(NvrtcError("NVRTC_ERROR_COMPILATION", "failed", "nvrtcCompileProgram", "l1\nl2")),
                       "t") == 1
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert toolkit.run(_raises(FileNotFoundError(2, "No such file or directory")), "t") == 2
    assert capsys.readouterr().err == "t: error: [Errno 2] No such file or directory\n"
    with pytest.raises(ZeroDivisionError):  # a bug is not bad input: it keeps its traceback
        toolkit.run(_raises(ZeroDivisionError()), "t")
