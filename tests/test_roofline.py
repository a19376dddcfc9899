"""Roofline arithmetic and the datasheet peak table, without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemm_driver.bench import roofline

REPO = Path(__file__).resolve().parents[1]

# FLOP per clock per SM, from the architecture whitepapers: (FP32 CUDA cores, TF32, BF16/FP16
# with FP32 accumulate). The table's peaks must equal SMs x rate x clock: a typo in a peak,
# an SM count or a clock shows up here.
RATES = {
    "H100 SXM": (256, 2048, 4096), "H100 PCIe": (256, 2048, 4096), "H200 SXM": (256, 2048, 4096),
    "A100 SXM4 80GB": (128, 1024, 2048), "A100 SXM4 40GB": (128, 1024, 2048),
    "A100 PCIe 80GB": (128, 1024, 2048), "A100 PCIe 40GB": (128, 1024, 2048),
    "A10": (256, 512, 1024), "L4": (256, 512, 1024), "L40S": (256, 512, 1024),
    "RTX 4090": (256, 256, 512), "RTX 3090": (256, 256, 512),  # GeForce: FP32-accumulate at half rate
    "V100 SXM2": (128, None, 1024), "V100 PCIe": (128, None, 1024), "T4": (128, None, 1024),
}


@pytest.mark.parametrize("entry", roofline.PEAKS, ids=lambda e: e.key)
def test_peaks_agree_with_sms_rate_and_clock(entry):
    fp32_rate, tf32_rate, half_rate = RATES[entry.key]
    def model(rate, clock):
        return entry.sm_count * rate * clock * 1e6 / 1e12
    assert entry.fp32 == pytest.approx(model(fp32_rate, entry.fp32_clock_mhz), rel=0.015)
    if tf32_rate is None:
        assert entry.tf32 is None and entry.bf16 is None  # no TF32/BF16 tensor cores before Ampere
    else:
        assert entry.tf32 == pytest.approx(model(tf32_rate, entry.tensor_clock_mhz), rel=0.015)
        assert entry.bf16 == pytest.approx(model(half_rate, entry.tensor_clock_mhz), rel=0.015)
    assert entry.fp16 == pytest.approx(model(half_rate, entry.tensor_clock_mhz), rel=0.015)


def test_table_covers_the_required_gpus():
    keys = {e.key for e in roofline.PEAKS}
    for want in ("H100 SXM", "H100 PCIe", "H200 SXM", "A100 SXM4 80GB", "A100 PCIe 80GB", "A10", "L4", "L40S",
                 "RTX 4090", "RTX 3090", "V100 SXM2", "T4"):
        assert want in keys


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"), ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"), ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A10", "A10"), ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA GeForce RTX 3090", "RTX 3090"),
    ("Tesla V100-SXM2-32GB", "V100 SXM2"), ("Tesla V100-PCIE-16GB", "V100 PCIe"), ("Tesla T4", "T4"),
])
def test_lookup_known(name, key):
    assert roofline.lookup(name).key == key


@pytest.mark.parametrize("name", [
    "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GeForce RTX 3090 Ti", "NVIDIA A10G", "NVIDIA L40",
    "NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA B200", "", None,
])
def test_lookup_unknown_is_none_not_a_guess(name):
    assert roofline.lookup(name) is None


def test_bytes_and_intensity():
    # 1024^3 FP32, beta = 0: A and B read (4 MiB each), C written (4 MiB)
    assert roofline.gemm_bytes(1024, 1024, 1024) == 3 * 4 * 2**20
    assert roofline.gemm_bytes(1024, 1024, 1024, beta=1.0) == 4 * 4 * 2**20  # C read too
    assert roofline.gemm_bytes(1024, 1024, 1024, "bf16") == (2 * 2 + 4) * 2**20  # 2-byte A, B; FP32 C
    assert roofline.gemm_bytes(8, 16, 32, "fp16", batch=3) == 3 * ((8 * 32 + 32 * 16) * 2 + 8 * 16 * 4)
    assert roofline.intensity(1024, 1024, 1024) == pytest.approx(2 * 2**30 / (12 * 2**20))
    assert roofline.intensity(4096, 4096, 4096, "tf32") == roofline.intensity(4096, 4096, 4096, "fp32")
    assert roofline.attainable_tflops(66.9, 3.35, 10.0) == pytest.approx(33.5)  # bandwidth-bound
    assert roofline.attainable_tflops(66.9, 3.35, 1000.0) == 66.9  # compute-bound


def case(kernel="cublas", tflops=40.0, clocks=None, **extra):
    return {"kernel": kernel, "m": 4096, "n": 4096, "k": 4096, "batch": 1, "beta": 0.0, "tflops": tflops,
            "status": "ok", "timing": {"clock": "cuda-events", "clocks": clocks}, **extra}


def test_case_on_a_known_gpu_uses_the_measured_clock():
    r = roofline.case_roofline(case(clocks={"sm_mhz_max": 1755, "sm_mhz_min": 1700}, dtype="fp32"),
                               "NVIDIA H100 80GB HBM3")
    peak = 66.9 * 1755 / 1980
    assert r["peak_tflops"] == pytest.approx(peak) and r["clock_mhz"] == 1755
    assert r["pct_of_peak"] == pytest.approx(100 * 40 / peak)
    assert r["attainable_tflops"] == pytest.approx(peak)  # 4096^3 is far right of the ridge
    assert r["pct_of_attainable"] == pytest.approx(r["pct_of_peak"]) and r["roofline_note"] is None


def test_case_without_clock_says_it_used_the_datasheet_clock():
    r = roofline.case_roofline(case(kernel="cublas_bf16", tflops=700.0, dtype="bf16"), "NVIDIA H100 80GB HBM3")
    assert r["peak_tflops"] == 989.4 and r["clock_mhz"] == 1830
    assert r["pct_of_peak"] == pytest.approx(100 * 700 / 989.4)
    assert "datasheet clock 1830 MHz" in r["roofline_note"]


def test_bandwidth_bound_case():
    c = case(tflops=1.0, dtype="fp32")
    c.update(m=16384, n=1, k=16384)  # matrix-vector: ~0.5 FLOP/byte
    r = roofline.case_roofline(c, "NVIDIA A100-SXM4-80GB")
    assert r["intensity"] < 1
    assert r["attainable_tflops"] == pytest.approx(2.039 * r["intensity"])
    assert r["pct_of_attainable"] > r["pct_of_peak"]


@pytest.mark.parametrize("c, gpu, note", [
    (case(dtype="fp32"), "Imaginary GPU", "no datasheet peaks for GPU 'Imaginary GPU'"),
    (case(kernel="cublas_bf16", dtype="bf16"), "Tesla T4", "T4 has no bf16 tensor-core peak"),
    (case(kernel="numpy", dtype="fp32"), "NVIDIA H100 80GB HBM3", "CPU"),
])
def test_unknowable_fields_are_none_with_the_reason(c, gpu, note):
    r = roofline.case_roofline(c, gpu)
    assert r["intensity"] > 0  # a property of the GEMM, known on any GPU
    assert r["peak_tflops"] is r["pct_of_peak"] is r["attainable_tflops"] is r["pct_of_attainable"] is None
    assert note in r["roofline_note"]


def test_failed_case_gets_the_roof_but_no_percentages():
    r = roofline.case_roofline(case(tflops=None, status="FAILED", dtype="fp32"), "NVIDIA L4")
    assert r["attainable_tflops"] is not None and r["pct_of_peak"] is None


def test_annotate_a_committed_run():
    doc = json.loads((REPO / "results" / "h100-80gb-hbm3" / "archive" / "bench-foundation.json").read_text())
    roofline.annotate(doc)
    assert doc["roofline"]["model"] == "H100 SXM" and doc["roofline"]["peaks_tflops"]["bf16"] == 989.4
    cublas = [c for c in doc["results"] if c["kernel"] == "cublas" and c["m"] == 4096][0]
    assert 50 < cublas["pct_of_peak"] < 100  # FP32 cuBLAS at 4096^3 on an H100: ~52 of 66.9 TFLOP/s
    assert all(c["pct_of_peak"] is None for c in doc["results"] if c["kernel"] == "numpy")
