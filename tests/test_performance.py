"""Speed and cost rules (kvdsl/prelude/performance.kvspec): published measurements and hand checks."""

import sys
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def deployment(tmp_path, model, hardware, name="d", **cells):
    body = "\n".join(f"    {k} = {v}" for k, v in cells.items())
    spec = tmp_path / f"{name}.kvspec"
    spec.write_text(f'import "{ROOT}/specs/models/{model}.kvspec"\nimport "{ROOT}/specs/hardware/{hardware}.kvspec"\n'
                    f'deployment {name} "{name}" {{\n    model = {model}\n    hardware = {hardware}\n{body}\n}}\n')
    _, values = evaluate_paths([str(spec)])
    return lambda cell, block=name: values[(block, cell)]


@pytest.fixture(scope="module")
def calibration():
    import calibrate

    return calibrate.predict()


@pytest.mark.parametrize("table", ["max throughput", "static batch", "online serving"])
def test_published_measurements_agree(calibration, table):
    import calibrate

    results, _ = calibration
    rows, median, share = calibrate.summary(results)[table]
    assert rows >= 18
    assert 0.8 <= median <= 1.25, median
    assert share >= 0.9, share


def test_skipped_rows_say_why(calibration):
    results, skipped = calibration
    assert len(results) >= 763
    # every model and GPU of the published tables is in the catalog: the only
    # rows left out are TTFTs of a saturated server, which measure its queue
    reasons = {reason for _, _, reason in skipped}
    assert all(r.startswith("TTFT of a saturated server") for r in reasons), reasons
    assert {row["model_key"] for _, _, row, _, _, _ in results} >= {
        "gpt-j-6b", "llama-2-13b", "llama-2-70b", "falcon-180b", "mixtral-8x22b", "llama-4-maverick-17b-128e"}
    assert "GB200" in {row["gpu"] for _, _, row, _, _, _ in results}


def test_llama_8b_batch_1_on_h100_is_bandwidth_bound(tmp_path):
    v = deployment(tmp_path, "llama_3_1_8b", "h100_sxm", weight_dtype="bf16", batch=1, context="2048")
    assert v("bound") == "memory bandwidth"
    weights_time = v("weights_bytes") / v("bandwidth", "h100_sxm")
    # the step reads the weights (and a little cache) at the calibrated share of the bandwidth
    reading = float(weights_time / v("bandwidth_efficiency"))
    assert reading <= float(v("memory_seconds")) <= 1.02 * reading
    assert float(v("memory_seconds")) > 3 * float(v("compute_seconds"))
    # plus the fixed per-step overhead: about 8 ms against 4.8 ms of weights at the datasheet peak
    assert weights_time < float(v("tpot_seconds")) < 2 * float(weights_time)


def test_moe_reads_fewer_weights_at_batch_1(tmp_path):
    one = deployment(tmp_path, "mixtral_8x7b_v0_1", "h100_sxm", name="one", gpus=2, batch=1, context="2048")
    many = deployment(tmp_path, "mixtral_8x7b_v0_1", "h100_sxm", name="many", gpus=2, batch=256, context="2048")
    # batch 1 touches 2 of 8 experts per layer: the active parameters
    assert one("experts_touched") == 2
    assert abs(one("weights_read_bytes") / (one("weights_bytes") * one("active_params", "mixtral_8x7b_v0_1") / one("params")) - 1) < 1e-9
    # batch 256 touches them all: every weight
    assert abs(float(many("experts_touched")) - 8) < 1e-9
    assert one("weights_read_bytes") < 0.3 * many("weights_read_bytes")
    assert abs(float(many("weights_read_bytes") / many("weights_bytes")) - 1) < 1e-9


def test_tensor_parallel_8_halves_neither_ttft_nor_tpot(tmp_path):
    four = deployment(tmp_path, "llama_3_1_70b", "h100_sxm", name="four", gpus=4, batch=16, context="4096")
    eight = deployment(tmp_path, "llama_3_1_70b", "h100_sxm", name="eight", gpus=8, batch=16, context="4096")
    assert eight("communication_seconds") > four("communication_seconds") > 0
    assert eight("tpot_seconds") > four("tpot_seconds") / 2
    assert eight("ttft_seconds") > four("ttft_seconds") / 2
    assert eight("tpot_seconds") < four("tpot_seconds")


def test_cost_cells(tmp_path):
    v = deployment(tmp_path, "llama_3_1_8b", "h100_sxm", gpus=2, replicas=3, batch=32, context="2048")
    assert v("total_gpus") == 6 and v("users_served") == 96
    assert v("cost_per_hour") == 6 * v("price_per_hour", "h100_sxm")
    assert v("hours_per_month") == 730 * 3600 and v("cost_per_month") == v("cost_per_hour") * 730 * 3600
    per_token = v("cost_per_hour") / (v("output_tokens_per_second") * 3)
    assert abs(float(v("cost_per_million_output_tokens") / (per_token * 10**6)) - 1) < 1e-12
    # prompt and answer counted: 1,024 + 1,024 tokens a request, twice the answer's tokens
    assert v("prompt_tokens") == v("output_tokens") == 1024
    assert v("cost_per_million_tokens") * 2 == v("cost_per_million_output_tokens")
