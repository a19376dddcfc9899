"""bench --resume (gemm_driver/bench/resume.py) without a GPU: which steps a cut run's file
still lacks, which of its records are kept, and the one-line refusals."""

from __future__ import annotations

import pytest

from gemm_driver.bench import command, writers
from gemm_driver.bench.resume import record_key, resume, step_key
from gemm_driver.bench.runner import CaseResult
from gemm_driver.cli import main

KERNELS = ["naive", "smem_tiled", "cublas"]
SHAPES = [(64, 64, 64, 1), (96, 80, 72, 1), (128, 128, 128, 1)]


def _request(seed=5):
    return command.BenchRequest(KERNELS, SHAPES, seed=seed)


def _record(step, kernel):
    p = step.problem
    return {"kernel": kernel, "m": p.m, "n": p.n, "k": p.k, "batch": p.batch, "dtype": step.precision,
            "alpha": p.alpha, "beta": p.beta, "layout": p.layout, "out_dtype": p.out_dtype, "epilogue": p.epilogue,
            "status": "ok"}


def _cut_run(request, steps, whole, part_kernels):
    """A document as a run cut after ``whole`` steps, and in the middle of the next one
    (``part_kernels`` of it recorded)."""
    results = [_record(step, k) for step in steps[:whole] for k in step.kernels]
    results += [_record(steps[whole], k) for k in part_kernels]
    return {"settings": command.settings_of(request), "results": results, "complete": False}


def test_resume_runs_what_the_cut_run_lacks_and_keeps_what_it_finished():
    request = _request()
    steps = request.steps()
    assert len(steps) == 3 and all(len(s.kernels) == 3 for s in steps)
    document = _cut_run(request, steps, 1, ["naive"])
    resumed, remaining = resume(command.BenchRequest(KERNELS, SHAPES, seed=99), steps,
                                command.settings_of(request), document, "run.json", seed_given=False)
    assert remaining == steps[1:]  # the second step ran in part: it runs again whole
    assert resumed.seed == 5  # the file's: the remaining shapes get the data the whole run would have
    assert [r["kernel"] for r in resumed.prior] == KERNELS and {record_key(r) for r in resumed.prior} == {
        step_key(steps[0])}


def test_the_new_document_holds_the_kept_records_first():
    request = _request()
    steps = request.steps()
    resumed, _ = resume(request, steps, command.settings_of(request), _cut_run(request, steps, 2, []), "run.json",
                        seed_given=False)
    env = {"gpu": {"name": "no GPU"}}
    run = command._assemble(resumed, [], env, complete=True)
    assert [(r["m"], r["kernel"]) for r in run.document["results"]] == [(s.problem.m, k) for s in steps[:2]
                                                                        for k in s.kernels]
    assert env["resumed_records"] == 6


@pytest.mark.parametrize("change, message", [
    ({"shapes": [[64, 64, 64, 1]]}, "holds another sweep (shapes differ)"),
    ({"max_time_s": 0.25, "mode": "cold"}, "(mode, max_time_s differ)"),
])
def test_a_file_of_another_sweep_is_refused(change, message):
    request = _request()
    steps = request.steps()
    document = _cut_run(request, steps, 1, [])
    document["settings"].update(change)
    with pytest.raises(ValueError) as info:
        resume(request, steps, command.settings_of(request), document, "run.json", seed_given=False)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_finished_file_and_another_seed_are_refused():
    request = _request()
    steps = request.steps()
    with pytest.raises(ValueError, match="already holds every case of this sweep"):
        resume(request, steps, command.settings_of(request), _cut_run(request, steps, 2, KERNELS), "run.json",
               seed_given=False)
    with pytest.raises(ValueError, match="was measured with --seed 5; leave --seed out or give that one"):
        resume(_request(seed=6), steps, command.settings_of(request), _cut_run(request, steps, 1, []), "run.json",
               seed_given=True)


def test_cli_resume_needs_json_and_refuses_a_file_of_another_sweep_before_any_gpu_work(capsys, tmp_path):
    assert main(["bench", "--kernels", "naive", "--sizes", "64", "--resume"]) == 2
    assert "--resume carries on the sweep in the --json file: give --json PATH" in capsys.readouterr().err
    path = tmp_path / "run.json"
    other = command.BenchRequest(["cublas"], [(32, 32, 32, 1)], seed=5)  # another sweep's cut run
    writers.write_json(path, command._assemble(other, [], {"gpu": {"name": "no GPU"}}, complete=False).document)
    assert main(["bench", "--kernels", "naive", "--sizes", "64", "--resume", "--json", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds another sweep (kernels, shapes" in err and len(err.splitlines()) == 1
    path.write_text("{ not json")
    assert main(["bench", "--kernels", "naive", "--sizes", "64", "--resume", "--json", str(path)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_fp8_formats_tell_steps_apart_and_older_files_resume_as_e4m3():
    request = command.BenchRequest(["cublaslt_fp8", "hopper_fp8"], [(64, 64, 64, 1)], seed=5,
                                   fp8_types=("e4m3", "e5m2_e4m3"))
    steps = request.steps()
    assert len({step_key(step) for step in steps}) == 2
    e4m3, e5m2_e4m3 = ([CaseResult(k, step.problem, "ok", precision="fp8").as_dict() for k in step.kernels]
                       for step in steps)
    assert {record_key(r) for r in e4m3} == {step_key(steps[0])}  # e4m3 is not recorded: read as e4m3
    assert {record_key(r) for r in e5m2_e4m3} == {step_key(steps[1])}
    e4m3_only = command.BenchRequest(["cublaslt_fp8"], [(64, 64, 64, 1)], seed=5)
    settings = command.settings_of(e4m3_only)
    older = {"settings": {k: v for k, v in settings.items() if k != "fp8_types"}, "results": [], "complete": False}
    assert resume(e4m3_only, e4m3_only.steps(), settings, older, "x.json", seed_given=False)[1] == e4m3_only.steps()
