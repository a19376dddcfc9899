"""The shape corpus and its split (gemm_driver/corpus.py), and the corpus summary (bench/corpus_summary.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gemm_driver import corpus
from gemm_driver.bench import corpus_summary

TUNED = Path(__file__).resolve().parent.parent / "gemm_driver" / "tuned"


def _gemms(shapes):
    return {(s.m, s.n, s.k) for s in shapes}


def test_every_shape_has_one_set_and_the_sets_share_no_gemm():
    shapes = corpus.split()
    assert {s.set for s in shapes} == set(corpus.SETS)
    tune, validate = (_gemms(s for s in shapes if s.set == which) for which in corpus.SETS)
    assert tune and validate and not tune & validate
    assert len(_gemms(shapes)) == len(shapes), "a GEMM is listed twice"


def test_split_is_reproducible():
    assert corpus.split() == corpus.split()


def test_the_split_rule_separates_models_and_token_counts():
    assert not {m.name for m in corpus.TUNING_MODELS} & {m.name for m in corpus.VALIDATION_MODELS}
    assert not set(corpus.TUNING_TOKENS) & set(corpus.VALIDATION_TOKENS)
    for shape in corpus.split():
        if shape.kind == "model":
            tokens = corpus.TUNING_TOKENS if shape.set == "tune" else corpus.VALIDATION_TOKENS
            models = corpus.TUNING_MODELS if shape.set == "tune" else corpus.VALIDATION_MODELS
            assert shape.m in tokens
            assert shape.origin.split()[0] in {m.name for m in models}


def test_model_layers_follow_their_configs():
    llama8b = corpus.TUNING_MODELS[0]
    assert llama8b.layers() == [("qkv", 6144, 4096), ("attn_out", 4096, 4096),
                                ("mlp_up", 28672, 4096), ("mlp_down", 4096, 14336)]
    gpt2 = next(m for m in corpus.TUNING_MODELS if not m.gated)
    assert dict((name, (n, k)) for name, n, k in gpt2.layers())["mlp_up"] == (6400, 1600)


def test_corpus_spans_decode_to_long_prefill_and_odd_sizes():
    shapes = corpus.split()
    assert min(s.m for s in shapes if s.kind == "model") == 1
    assert max(s.m for s in shapes if s.kind == "model") == 16384
    assert all(s.flops <= corpus.MAX_FLOPS for s in shapes)
    odd = [s for s in shapes if s.kind == "odd"]
    assert len(odd) == 2 * corpus.ODD_PER_SET
    assert all(d % 8 and 48 <= d <= 8192 for s in odd for d in (s.m, s.n, s.k))
    assert any(s.small_m for s in shapes if s.set == "validate")


def test_no_tuned_table_read_a_validation_shape():
    validate = _gemms(corpus.corpus("all:validate"))
    for table in TUNED.glob("*.json"):
        shapes = {tuple(entry["shape"][:3]) for entry in json.loads(table.read_text())["entries"]}
        assert not shapes & validate, f"{table.name} was tuned on validation shapes {shapes & validate}"


@pytest.mark.parametrize("spec, kind, which", [("llm", "model", None), ("odd:tune", "odd", "tune"),
                                               ("sized:validate", "sized", "validate"), ("all", None, None)])
def test_corpus_names_select(spec, kind, which):
    chosen = corpus.corpus(spec)
    assert chosen
    assert all((kind is None or s.kind == kind) and (which is None or s.set == which) for s in chosen)


@pytest.mark.parametrize("spec, message", [("llama", "unknown corpus 'llama'"), ("llm:test", "tune or validate")])
def test_corpus_refuses_bad_names(spec, message):
    with pytest.raises(ValueError, match=message):
        corpus.corpus(spec)


def _case(kernel, m, n, k, tflops, dtype="bf16", status="ok"):
    ms = 2 * m * n * k / (tflops * 1e12) * 1e3
    return {"kernel": kernel, "m": m, "n": n, "k": k, "batch": 1, "dtype": dtype, "status": status,
            "tflops": tflops if status == "ok" else None, "timing": {"median_ms": ms}}


def test_summary_takes_the_best_on_each_side():
    odd = next(s for s in corpus.split() if s.kind == "odd")
    doc = {"environment": {"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "copy_bandwidth_tbs": 3.0},
           "results": [_case("hopper_bf16", 4096, 4096, 4096, 700), _case("mma_sync_tuned_bf16", 4096, 4096, 4096, 500),
                       _case("cublas_bf16", 4096, 4096, 4096, 740), _case("cublaslt_bf16", 4096, 4096, 4096, 720),
                       _case("hopper_bf16", odd.m, odd.n, odd.k, 300), _case("cublas_bf16", odd.m, odd.n, odd.k, 100),
                       _case("hopper_bf16", 16, 4096, 4096, 10), _case("cublas_bf16", 16, 4096, 4096, 12.5),
                       _case("hopper_bf16", 512, 512, 512, 1, status="FAILED"), _case("cublas_bf16", 512, 512, 512, 100)]}
    [summary] = corpus_summary.summarize(doc)
    d = summary.as_dict()
    ratios = sorted(r.ratio for r in summary.ratios)
    assert ratios == pytest.approx(sorted([700 / 740, 3.0, 0.8]))  # the FAILED shape has no ratio
    assert d["all"]["geomean"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3))
    assert d["all"]["min"] == pytest.approx(0.8) and d["all"]["min_shape"] == "16x4096x4096"
    assert d["all"]["share_at_least_1"] == pytest.approx(1 / 3)
    assert d["without_odd"]["shapes"] == 2
    small = next(r for r in summary.ratios if r.m == 16)
    expected_bytes = (16 * 4096 + 4096 * 4096) * 2 + 16 * 4096 * 4
    assert small.bandwidth_share == pytest.approx(expected_bytes / (small.own_ms * 1e-3) / 3.0e12)
    text = "\n".join(corpus_summary.summary_lines(doc))
    assert "measured device-to-device copy" in text and "bf16" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_corpus_plot_draws_a_png_and_nothing_without_ratios(tmp_path):
    pytest.importorskip("matplotlib")
    doc = {"corpus": {"name": "llm:validate"},
           "results": [_case("hopper_bf16", 16, 4096, 4096, 10), _case("cublas_bf16", 16, 4096, 4096, 12.5),
                       _case("hopper_bf16", 1024, 1024, 1024, 300), _case("cublas_bf16", 1024, 1024, 1024, 290)]}
    from gemm_driver.bench import plots

    plt = plots._pyplot()
    path = plots.corpus_plot(plt, doc, tmp_path / "corpus.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plots.corpus_plot(plt, {"results": [_case("cublas_bf16", 64, 64, 64, 1)]}, tmp_path / "none.png") is None


def test_bench_takes_a_corpus_alone():
    from gemm_driver.bench import command

    shapes = command.select_shapes([], [], None, corpus="odd:validate")
    assert shapes == [(s.m, s.n, s.k, 1) for s in corpus.corpus("odd:validate")]
    with pytest.raises(ValueError, match="leave out --sizes"):
        command.select_shapes([512], [], None, corpus="llm")


@pytest.mark.parametrize("argv, message", [(["--corpus", "llama"], "unknown corpus 'llama'"),
                                           (["--corpus", "llm:all"], "tune or validate")])
def test_bench_refuses_a_bad_corpus_in_one_line(argv, message, capsys):
    from gemm_driver import cli

    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_plot_command_draws_a_corpus_run_s_plot_too(tmp_path):
    pytest.importorskip("matplotlib")
    from gemm_driver.bench import plots

    doc = {"corpus": {"name": "llm:validate"},
           "results": [_case("hopper_bf16", 16, 4096, 4096, 10), _case("cublas_bf16", 16, 4096, 4096, 12.5)]}
    assert "corpus.png" in [path.name for path in plots.write_plots(doc, tmp_path)]
