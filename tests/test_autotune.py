"""The autotuner's CPU side: GPU names, nearest-shape picks, the tuned tables in the repo."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest

from gemm_driver import corpus, kernels
from gemm_driver.bench import autotune
from gemm_driver.bench.autotune import ShapeResult, Trial
from gemm_driver.kernels import tuned
from gemm_driver.kernels.simt import warptiling
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE
from gemm_driver.problem import GemmProblem


def test_gpu_slug_matches_the_results_folders():
    assert tuned.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert tuned.gpu_slug("  NVIDIA GeForce RTX 4090 ") == "geforce-rtx-4090"
    assert tuned.gpu_slug("???") == "unknown-gpu"


def test_every_tune_space_entry_is_a_valid_warptiled_configuration():
    spec = kernels.KERNELS["warptiled"]
    assert len(TUNE_SPACE) == len({tuple(sorted(c.items())) for c in TUNE_SPACE}) > 20
    for config in TUNE_SPACE:
        spec.validate(GemmProblem(4096, 4096, 4096), config)  # raises, naming the rule, if not


def test_pick_takes_the_nearest_tuned_shape_on_a_log_scale():
    table = {"entries": [{"shape": [512, 512, 512], "best": {"BM": 64}},
                         {"shape": [4096, 4096, 4096], "best": {"BM": 128}},
                         {"shape": [1024, 1024, 16384], "best": {"SPLITK": 4}}]}
    assert tuned.pick(table, GemmProblem(600, 500, 400)) == ({"BM": 64}, "tuned at 512x512x512")
    assert tuned.pick(table, GemmProblem(3000, 5000, 4000))[0] == {"BM": 128}
    assert tuned.pick(table, GemmProblem(1000, 1000, 20000))[0] == {"SPLITK": 4}
    # 1448 ~ 2^10.5: on a log scale it is nearer 1024-ish shapes than 4096 ones
    assert tuned.shape_distance((1448,) * 3, (512,) * 3) < tuned.shape_distance((1448,) * 3, (8192,) * 3)


def test_without_a_table_the_defaults_run_and_the_reason_is_given(tmp_path):
    assert tuned.load_table("NVIDIA Imaginary GPU", tmp_path) is None
    assert tuned.pick(None, GemmProblem(64, 64, 64)) == ({}, "no tuned table for this GPU; warptiled defaults")


def test_a_table_of_another_schema_is_refused(tmp_path):
    (tmp_path / "h100-80gb-hbm3.json").write_text(json.dumps({"schema": "something/9", "entries": []}))
    with pytest.raises(ValueError, match="schema 'something/9'"):
        tuned.load_table("NVIDIA H100 80GB HBM3", tmp_path)


def test_table_document_keeps_the_winner_the_runners_up_and_the_rejects():
    trials = [Trial({"BM": 64}, "ok", "", 1.0, 30.0), Trial({"BM": 128}, "ok", "", 0.8, 40.0),
              Trial({"BM": 256}, "spills", "16 B stack"), Trial({"BM": 32}, "FAILED", "3 wrong")]
    result = ShapeResult((1024, 1024, 1024), trials, baseline_tflops=38.0)
    document = autotune.table_document([result, ShapeResult((8, 8, 8), [Trial({}, "spills")])],
                                       kernels.KERNELS["warptiled"], {"gpu": {"name": "Some GPU"}})
    assert document["schema"] == tuned.SCHEMA and document["gpu"] == "Some GPU"
    (entry,) = document["entries"]  # a shape where nothing ran has no winner and no entry
    # BM=128 is warptiled's default: a table names only the tunables set away from the defaults
    assert kernels.KERNELS["warptiled"].resolve()["BM"] == 128
    assert entry["best"] == {} and entry["tflops"] == 40.0 and entry["cublas_tflops"] == 38.0
    assert entry["runners_up"] == [{"tunables": {"BM": 64}, "tflops": 30.0}]
    assert [r["status"] for r in entry["rejected"]] == ["spills", "FAILED"]


def test_a_partial_sweep_replaces_its_shapes_entries_and_keeps_the_others():
    entry = lambda shape, tflops: {"shape": list(shape), "best": {}, "tflops": tflops}  # noqa: E731
    kept = {"created": "before",
            "entries": [entry((1, 64, 64), 1.0), entry((32, 64, 64), 2.0), entry((512, 64, 64), 3.0)]}
    document = {"schema": tuned.SCHEMA, "created": "now",
                "entries": [entry((32, 64, 64), 5.0), entry((16, 64, 64), 6.0)]}
    merged = autotune.merge_tables(document, kept)
    assert [(e["shape"][0], e["tflops"]) for e in merged["entries"]] == [(1, 1.0), (32, 5.0), (512, 3.0), (16, 6.0)]
    assert merged["created"] == "now" and merged["kept_from"] == {"created": "before", "entries": 2}


def test_committed_tables_are_valid_and_autotuned_resolves_from_them():
    paths = sorted(p for p in tuned.TUNED_DIR.glob("*.json") if "." not in p.stem)  # autotuned's own tables
    assert paths, "at least the H100 table is committed"
    spec = kernels.KERNELS["autotuned"]
    for path in paths:
        document = json.loads(path.read_text())
        assert document["schema"] == tuned.SCHEMA and document["kernel"] == "warptiled"
        assert tuned.gpu_slug(document["gpu"]) == path.stem
        for entry in document["entries"]:
            m, n, k = entry["shape"]
            spec.validate(GemmProblem(m, n, k), entry["best"])
            assert entry["tflops"] > 0 and entry["cublas_tflops"] > 0
        tunables, why = spec.choose(GemmProblem(4096, 4096, 4096), document["gpu"])
        assert "predicted" in why and "nearest tuning shapes" in why, why
        spec.validate(GemmProblem(4096, 4096, 4096), tunables)


@pytest.mark.parametrize("gpu, measured", [("NVIDIA H100 80GB HBM3", 1.025), ("NVIDIA H200", 1.029)])
def test_autotuned_tables_are_the_tuning_set_and_the_vote_holds_up_with_each_shape_left_out(gpu, measured):
    """The H100's and H200's tables hold the corpus's 99 tuning shapes, no validation shape,
    and the vote over each, every shape left out of its own, picks within 3% of its winner
    (geometric mean; the sweep's last line, results/<gpu>/autotune-fp32-tuning-set.txt)."""
    table = tuned.load_table(gpu)
    assert {tuple(e["shape"]) for e in table["entries"]} == {(s.m, s.n, s.k) for s in corpus.corpus("all:tune")}
    slowdowns = [min(x, tuned.UNMEASURED_SLOWDOWN)
                 for x in tuned.left_out_slowdowns(table["entries"], warptiling.offered, warptiling.named)]
    geomean = math.exp(sum(map(math.log, slowdowns)) / len(slowdowns))
    assert geomean == pytest.approx(measured, abs=0.001)


def _entry(shape, timings):
    """A table entry (as table_document writes it) from {configuration label: TFLOP/s}."""
    ranked = sorted(timings.items(), key=lambda item: -item[1])
    return {"shape": list(shape), "best": dict(ranked[0][0]), "tflops": ranked[0][1], "cublas_tflops": 1.0,
            "runners_up": [{"tunables": dict(t), "tflops": v} for t, v in ranked[1:]]}


def test_autotuned_votes_with_the_nearest_tuning_shapes(tmp_path, monkeypatch):
    """The pick follows the neighbours' timings (stream-K on small M, big tiles on big shapes), a
    configuration measured nowhere near is not picked, and one the neighbours never ran leaves
    warptiled's defaults with the reason."""
    big = ()  # warptiled's defaults: 128 x 256 tiles, data-parallel
    small_sk = (("BM", 64), ("BN", 64), ("WM", 32), ("WN", 32), ("TN", 4), ("STREAMK", 1))
    entries = [_entry((4096, 4096, 4096), {big: 50.0, small_sk: 20.0}),
               _entry((8192, 4096, 4096), {big: 51.0, small_sk: 21.0}),
               _entry((16, 4096, 4096), {big: 2.0, small_sk: 9.0}),
               _entry((32, 6144, 4096), {big: 3.0, small_sk: 12.0})]
    document = {"schema": tuned.SCHEMA, "kernel": "warptiled", "gpu": "Some GPU", "entries": entries}
    (tmp_path / "some-gpu.json").write_text(json.dumps(document))
    load = tuned.load_table
    monkeypatch.setattr(tuned, "load_table", lambda name: load(name, tmp_path))
    spec = kernels.KERNELS["autotuned"]
    assert spec.choose(GemmProblem(6000, 5000, 4000), "Some GPU")[0] == dict(big)
    tunables, why = spec.choose(GemmProblem(24, 5000, 3000), "Some GPU")
    assert tunables == dict(small_sk) and "(32x6144x4096, 16x4096x4096)" in why, why
    unknown = (("BM", 64), ("BN", 32), ("WM", 32), ("WN", 16), ("TM", 4), ("TN", 4))  # in TUNE_SPACE
    document["entries"] = [_entry((4096, 4096, 4096), {unknown + (("BK", 32),): 10.0})]  # not in TUNE_SPACE
    (tmp_path / "some-gpu.json").write_text(json.dumps(document))
    assert spec.choose(GemmProblem(4096, 4096, 4096), "Some GPU") == (
        {}, "the tuned table measured none of these configurations near this shape; warptiled defaults")


def test_sweep_report_ranks_the_ran_and_lists_the_rejected():
    trials = [Trial({"BM": 64}, "ok", "", 1.0, 30.0), Trial({"BM": 128}, "ok", "", 0.8, 40.0),
              Trial({"BM": 32}, "spills", "16 B stack")]
    lines = ShapeResult((64, 64, 64), trials, baseline_tflops=40.0).report_lines(top=1, title="warptiled ")
    assert lines == ["warptiled 64x64x64: cuBLAS 40.00 TFLOP/s, 2/3 configurations ran",
                     "    40.00 TFLOP/s  100.0%  BM=128",
                     "  spills: BM=32: 16 B stack"]


def test_sweep_shapes_are_sizes_or_mxnxk():
    assert autotune.parse_shapes("512,4093x4091x4099,") == [(512, 512, 512), (4093, 4091, 4099)]
    with pytest.raises(ValueError, match="MxNxK"):
        autotune.parse_shapes("12y4")


def test_table_document_can_keep_every_configuration_that_ran():
    trials = [Trial({"BM": 64}, "ok", "", 1.0, 30.0), Trial({"BM": 32}, "ok", "", 0.8, 20.0),
              Trial({"BM": 256}, "ok", "", 0.8, 25.0)]
    document = autotune.table_document([ShapeResult((64, 64, 64), trials)], kernels.KERNELS["warptiled"], {}, keep=None)
    assert [r["tunables"] for r in document["entries"][0]["runners_up"]] == [{"BM": 256}, {"BM": 32}]


def test_a_journal_resumes_a_sweep_without_running_what_it_holds(tmp_path, monkeypatch):
    from gemm_driver.bench import isolation
    from gemm_driver.bench.spread import Journal

    ran = []

    class Runner:  # the worker, in this process: records what it is asked to run
        def __init__(self, handler, finish=None, **settings):
            pass

        def run(self, tasks):
            for index, task in enumerate(tasks):
                ran.append(task.key)
                yield index, Trial(task.tunables, "ok", "", 1.0, 10.0 + index)

    monkeypatch.setitem(isolation.RUNNERS, "fake", Runner)
    spec, journal = kernels.KERNELS["warptiled"], Journal(tmp_path / "sweep.jsonl")
    first = autotune.tune(spec, [(64, 64, 64)], [{"BM": 64}], isolation="fake", journal=journal)
    assert len(ran) == 2 and first[0].baseline_tflops == 10.0 and first[0].trials[0].tflops == 11.0
    ran.clear()
    second = autotune.tune(spec, [(64, 64, 64), (32, 32, 32)], [{"BM": 64}], isolation="fake", journal=journal)
    assert len(ran) == 2 and all("32x32x32" in key for key in ran)  # the first shape came from the journal
    assert second[0].trials[0].tflops == 11.0 and second[1].trials[0].status == "ok"
    assert all(result["finished_s"] >= 0 for result in journal.load().values())  # when each result came


def test_a_trial_says_where_the_worker_s_time_went(monkeypatch):
    from types import SimpleNamespace

    ticks = itertools.count()
    monkeypatch.setattr(autotune.time, "perf_counter", lambda: float(next(ticks)))  # each phase: 1 s
    monkeypatch.setattr(autotune, "GpuTimer", lambda stream, arch: SimpleNamespace(close=lambda: None))
    case = SimpleNamespace(problem=GemmProblem(64, 64, 64))
    monkeypatch.setattr(autotune, "kept_case", lambda *args, **settings: case)
    monkeypatch.setattr(autotune, "_refusal", lambda session, task: None)
    monkeypatch.setattr(autotune, "run_case", lambda *args, **settings: SimpleNamespace(
        ok=True, timing=SimpleNamespace(median_ms=0.5), verify_s=0.25))
    task = autotune.TrialTask("warptiled", (64, 64, 64), 0, "fp32", {"BM": 64}, 0, 0.1)
    trial = autotune.run_trial_task(SimpleNamespace(stream=None, arch="sm_90"), {}, task, lambda: None)
    assert trial.status == "ok" and trial.phases_s == {"case": 1.0, "build": 1.0, "time": 0.75, "verify": 0.25}
    failed = dataclasses.replace(trial, tunables={"BM": 32}, status="FAILED", finished_s=3.0)
    table = autotune.table_document([ShapeResult((64, 64, 64), [trial, failed])], kernels.KERNELS["warptiled"], {})
    rejected = table["entries"][0]["rejected"]  # the table keeps what a trial measured, not when
    assert len(rejected) == 1 and "phases_s" not in rejected[0] and "finished_s" not in rejected[0]


def test_a_sweep_over_two_gpus_runs_every_trial_once_and_keeps_each_shape_on_one_gpu(tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import spread_fakes as fakes

    from gemm_driver.bench.spread import Journal, Spread

    monkeypatch.setattr(autotune, "runner_on", lambda gpus, handler, **settings: Spread(
        fakes.trial_handler, devices=list(gpus), session_factory=fakes.gpu_session))
    spec, journal = kernels.KERNELS["warptiled"], Journal(tmp_path / "sweep.jsonl")
    shapes = [(64, 64, 64), (96, 96, 96), (128, 128, 128), (160, 160, 160)]
    results = autotune.tune(spec, shapes, [{"BM": 64}, {"BM": 32}], gpus=(0, 1), journal=journal)
    assert [r.shape for r in results] == shapes
    for r in results:
        assert r.baseline_tflops == 10.0 and sorted(t.tflops for t in r.trials) == [32.0, 64.0]
        assert len({t.gpu for t in r.trials}) == 1  # a shape's trials share its operands: one GPU
    assert {t.gpu for r in results for t in r.trials} <= {0, 1}
    assert len(journal.load()) == len(shapes) * 3  # every trial once, baselines included


def test_a_sweep_hands_out_the_shapes_of_most_trials_first(monkeypatch):
    handed = []

    def completed(runner, tasks, groups, gpu):  # the spread, in this process: records the order
        for group in groups:
            handed.append(tasks[group[0]].shape)
            for index in group:
                yield index, Trial(tasks[index].tunables, "ok", "", 1.0, 10.0), gpu

    monkeypatch.setattr(autotune, "runner_on", lambda gpus, handler, **settings: None)
    monkeypatch.setattr(autotune, "completed", completed)
    configs = {64: [{"BM": 64}], 96: [{"BM": 64}, {"BM": 32}, {"BM": 128}], 128: [{"BM": 64}, {"BM": 32}]}
    shapes = [(64, 64, 64), (96, 96, 96), (128, 128, 128)]
    results = autotune.tune(kernels.KERNELS["warptiled"], shapes, lambda shape: configs[shape[0]], gpus=(0, 1))
    assert handed == [(96, 96, 96), (128, 128, 128), (64, 64, 64)]  # no long shape left for the tail
    assert [r.shape for r in results] == shapes and [len(r.trials) for r in results] == [1, 3, 2]


def test_the_vote_needs_entries_and_an_offered_configuration():
    entries = [_entry((4096, 4096, 4096), {(("BM", 64),): 10.0})]
    offer = lambda problem: [{"BM": 64}]  # noqa: E731
    assert tuned.vote(entries, GemmProblem(4096, 4096, 4096), offer)[0] == {"BM": 64}
    assert tuned.vote([], GemmProblem(4096, 4096, 4096), offer) is None
    assert tuned.vote(entries, GemmProblem(4096, 4096, 4096), lambda problem: []) is None
    assert tuned.vote(entries, GemmProblem(4096, 4096, 4096), lambda problem: [{"BM": 128}]) is None  # unmeasured


def test_a_tie_goes_to_the_nearest_shape_s_faster_configuration():
    """Two neighbours that disagree: BM=64 is predicted 0.2% ahead of BM=32 by the weighted mean,
    yet the nearer shape measured BM=32 faster. Without ``tie`` the mean decides; with a tie of
    0.5% the nearer shape does, and the reason says so; at 0.1% they are no tie."""
    near = _entry((1024, 1024, 1024), {(("BM", 32),): 100.0, (("BM", 64),): 93.0})
    far = _entry((2048, 1024, 1024), {(("BM", 32),): 79.3, (("BM", 64),): 100.0})
    offer = lambda problem: [{"BM": 32}, {"BM": 64}]  # noqa: E731
    p = GemmProblem(1100, 1024, 1024)
    weights = [1 / (tuned.distance((1100, 1024, 1024), e["shape"]) + 0.25) for e in (near, far)]
    predicted = {bm: (weights[0] * 100.0 / t_near + weights[1] * 100.0 / t_far) / sum(weights)
                 for bm, t_near, t_far in ((32, 100.0, 79.3), (64, 93.0, 100.0))}
    assert predicted[64] < predicted[32] < predicted[64] * 1.005 and predicted[32] > predicted[64] * 1.001
    assert tuned.vote([near, far], p, offer)[0] == {"BM": 64}
    picked, why = tuned.vote([near, far], p, offer, tie=0.005)
    assert picked == {"BM": 32} and "within 0.5% of BM=64" in why and "faster of them at 1024x1024x1024" in why
    assert tuned.vote([near, far], p, offer, tie=0.001)[0] == {"BM": 64}



def test_the_left_out_check_names_a_table_written_with_every_tunable_as_the_vote_does():
    """A table written before tables named only what differs from the defaults (the H100's) holds
    full configurations: checked with warptiling.named, its left-out slowdowns are those of the
    same table written sparsely, not an empty list of unmatched names."""
    full = kernels.KERNELS["warptiled"].resolve
    small_sk = {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TN": 4, "STREAMK": 1}
    timings = [((4096, 4096, 4096), 50.0, 20.0), ((8192, 4096, 4096), 51.0, 21.0),
               ((16, 4096, 4096), 2.0, 9.0), ((32, 6144, 4096), 3.0, 12.0)]
    sparse = [_entry(s, {(): big, tuple(small_sk.items()): sk}) for s, big, sk in timings]
    written_full = [_entry(s, {tuple(full({}).items()): big, tuple(full(small_sk).items()): sk})
                    for s, big, sk in timings]
    expected = tuned.left_out_slowdowns(sparse, warptiling.offered, warptiling.named)
    assert len(expected) == 4
    assert tuned.left_out_slowdowns(written_full, warptiling.offered, warptiling.named) == expected


def test_a_spill_in_the_entry_a_configuration_launches_refuses_it():
    """A cluster configuration of hopper_bf16 runs its cluster entry: a spill there refuses the
    trial though the build's main entry is clean (the sweep read the main entry's alone)."""
    from types import SimpleNamespace

    from gemm_driver.cuda.nvrtc import Compiled, Resources
    from gemm_driver.kernels.build import Build

    spec = kernels.KERNELS["hopper_bf16"]
    tunables = spec.resolve({"BN": 128, "STAGES": 6, "CN": 4})

    def session(cluster: Resources):
        compiled = Compiled("sm_90a", b"", b"", "", resources={"m": Resources(), "c": cluster})
        built = Build(spec, tunables, compiled, {"main": "m", "cluster": "c"}, False)
        assert built.gemm_entry == "c"  # what inspect reports for these tunables
        return SimpleNamespace(load=lambda spec, t: SimpleNamespace(build=built))

    task = autotune.TrialTask("hopper_bf16", (128, 4096, 4096), 0, "bf16", dict(tunables), 1, 0.1)
    refused = autotune._refusal(session(Resources(stack_bytes=16, spill_store_bytes=16)), task)
    assert (refused.status, refused.detail) == ("spills", "16 B stack")
    assert autotune._refusal(session(Resources()), task) is None
    unclustered = Build(spec, spec.resolve({"BN": 128, "STAGES": 6}), Compiled("sm_90a", b"", b"", ""),
                        {"main": "m"}, False)
    assert unclustered.gemm_entry == "m"


# --- the final round: close candidates timed again in alternation ---------------------------
def _trial(bm: int, ms: float, flops: float = 2e9) -> Trial:
    return Trial({"BM": bm}, "ok", "", ms, flops / ms / 1e9)


def test_the_finalists_are_the_fastest_few_within_the_margin_of_the_fastest():
    result = ShapeResult((64, 64, 64), [_trial(32, 1.05), _trial(64, 1.0), _trial(128, 1.2), _trial(16, 1.08),
                                        _trial(8, 1.09), Trial({"BM": 4}, "FAILED", "3 wrong")])
    assert [t.tunables["BM"] for t in autotune.finalists(result)] == [64, 32, 16]  # FINALISTS = 3
    alone = ShapeResult((64, 64, 64), [_trial(64, 1.0), _trial(128, 1.2)])
    assert autotune.finalists(alone) == []  # nothing within 10% to decide between


def test_a_final_round_times_the_close_candidates_again_and_its_times_replace_the_first_pass(tmp_path, monkeypatch):
    from gemm_driver.bench import isolation
    from gemm_driver.bench.spread import Journal

    first_ms = {64: 1.00, 32: 1.05, 128: 2.0}  # BM=64 ahead by 5% when timed one after another
    final_ms = {64: 1.10, 32: 1.00}  # ... and behind when timed in alternation
    ran = []

    class Runner:  # the worker, in this process: both kinds of task
        def __init__(self, handler, finish=None, **settings):
            pass

        def run(self, tasks):
            for index, task in enumerate(tasks):
                ran.append(task.key)
                if isinstance(task, autotune.FinalTask):
                    labels = {autotune.tunables_label(t): t["BM"] for t in task.configurations}
                    yield index, {"medians_ms": {label: final_ms[bm] for label, bm in labels.items()}, "wrong": {}}
                elif task.tunables:
                    ms = first_ms[task.tunables["BM"]]
                    yield index, Trial(task.tunables, "ok", "", ms, GemmProblem(*task.shape).flops / ms / 1e9)
                else:
                    yield index, Trial({}, "ok", "", 1.0, 1.0)  # the baseline

    monkeypatch.setitem(isolation.RUNNERS, "fake", Runner)
    spec, journal = kernels.KERNELS["warptiled"], Journal(tmp_path / "sweep.jsonl")
    space = [{"BM": 64}, {"BM": 32}, {"BM": 128}]
    [result] = autotune.tune(spec, [(256, 256, 256)], space, isolation="fake", journal=journal, final=True)
    finals = [key for key in ran if key.startswith("final ")]
    assert len(finals) == 1 and "BM=64" in finals[0] and "BM=32" in finals[0] and "BM=128" not in finals[0]
    flops = GemmProblem(256, 256, 256).flops
    best, second, third = result.ranked
    assert best.tunables["BM"] == 32 and best.tflops == flops / 1.00 / 1e9
    assert best.first_tflops == flops / 1.05 / 1e9 and second.first_tflops == flops / 1.00 / 1e9
    assert third.tunables["BM"] == 128 and third.first_tflops is None  # not a finalist: as first timed
    assert "(final round; first pass" in result.report_lines()[1]
    table = autotune.table_document([result], spec, {})
    assert table["entries"][0]["best"] == {k: v for k, v in best.tunables.items() if spec.resolve().get(k) != v}
    ran.clear()
    [again] = autotune.tune(spec, [(256, 256, 256)], space, isolation="fake", journal=journal, final=True)
    assert ran == [] and again.ranked[0].tflops == best.tflops  # the round came from the journal too
    [plain] = autotune.tune(spec, [(256, 256, 256)], space, isolation="fake", journal=journal)
    assert plain.ranked[0].tunables["BM"] == 64  # without final=True: the first pass's times


def test_a_finalist_whose_check_fails_in_the_final_round_is_failed_and_the_others_keep_their_times():
    result = ShapeResult((64, 64, 64), [_trial(64, 1.0), _trial(32, 1.05)])
    labels = [autotune.tunables_label(t.tunables) for t in result.trials]
    autotune.apply_final(result, {"medians_ms": {}, "wrong": {labels[0]: "3 wrong"}})
    assert (result.trials[0].status, result.trials[0].tflops) == ("FAILED", None)
    assert "final round: 3 wrong" in result.trials[0].detail
    assert result.trials[1].tflops == 2e9 / 1.05 / 1e9 and result.trials[1].first_tflops is None


def test_alternation_shuffles_each_round_and_takes_the_median():
    from gemm_driver.bench.alternate import alternate_ms, launches_for

    order, times = [], {"a": iter([5.0, 1.0, 1.1, 9.0, 1.2]), "b": iter([2.0, 2.1, 2.2, 2.3, 2.4])}
    runs = {label: (lambda label=label: label) for label in times}

    class Timer:
        def batch_ms(self, launch, launches):
            if launches == 10:  # the untimed warm-up batch
                return 0.0
            order.append(launch())
            return next(times[launch()])

    medians = alternate_ms(Timer(), runs, launches=20)
    assert medians == {"a": 1.2, "b": 2.2}  # the median shrugs off the rounds at 5 and 9 ms
    rounds = [tuple(order[i:i + 2]) for i in range(0, 10, 2)]
    assert len(set(rounds)) == 2 and sorted(map(sorted, rounds)) == [["a", "b"]] * 5  # both orders
    assert (launches_for(0.001), launches_for(2.5), launches_for(100.0)) == (100, 20, 1)
