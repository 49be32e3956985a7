"""vLLM's available KV memory predicted from the deployment alone, against the logs.

Each case of engine-logs/cases.json whose log gives the GPU and its memory
utilization is evaluated without its logged "Available KV cache memory"
(`kv_cache_memory_bytes = 0`): the prelude's engine_memory.kvspec rules
predict the weights as loaded, the profiling pass's peak and non-torch
memory.  `python -m pytest -s tests/test_kv_prediction.py` prints the table
docs/kv-memory.md quotes.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths, parse_setting

ROOT = Path(__file__).resolve().parents[1]
CASES = {case["id"]: case for case in json.loads((ROOT / "tests" / "engine_logs" / "cases.json").read_text())}
SPECS = ROOT / "specs" / "engine_logs"
GIB = 1 << 30
TOLERANCE = Fraction(5, 100)

# case -> (deployment, why the case is expected to miss, or None)
PREDICTED = {
    "V01": ("v01_llama_3_1_8b_rtx3090", None),
    "V04": ("v04_llama_3_3_70b_fp8_h200x4", None),
    "V05": ("v05_mistral_7b_gptq_gb10", None),
    "V07": ("v07_qwen3_0_6b_a100", None),
    "V10": ("v10_qwen3_8b_rtx4090", None),
    "V14": ("v14_qwen3_coder_30b_l40sx4", None),
    "V19": ("v19_deepseek_r1_h200x8", None),
    "V20": ("v20_deepseek_v2_lite_l4x4", None),
    "V23": ("v23_qwen3_next_80b_h200x2", None),
    "V25": ("v25_nemotron_3_nano_4b_gb10", None),
}


def predict(case_id: str) -> dict:
    block = PREDICTED[case_id][0]
    settings = [parse_setting(f"{block}.kv_cache_memory_bytes=0")]
    values = evaluate_paths([str(SPECS / f"{block}.kvspec")], settings)[1]
    mine = {cell: value for (b, cell), value in values.items() if b == block}
    mine["hardware.cuda_memory"] = values[(str(mine["hardware"]), "cuda_memory")]
    return mine


def row(case_id: str) -> tuple:
    v = predict(case_id)
    logged = Fraction(str(CASES[case_id]["available_kv_gib"]))
    predicted = Fraction(v["vllm.kv_memory_bytes"]) / GIB
    return (case_id, v, logged, predicted, (predicted - logged) / logged)


def gib(x) -> str:
    return f"{float(Fraction(x) / GIB):.2f}"


def table() -> str:
    lines = ["| case | CUDA GiB x util | weights (logged) | peak | non-torch | graphs | predicted GiB | logged GiB | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case_id in PREDICTED:
        _, v, logged, predicted, error = row(case_id)
        loaded = CASES[case_id]["model_loading_gib"]
        lines.append(f"| {case_id} | {gib(v['hardware.cuda_memory'])} x {float(v['utilization']):g}"
                     f" | {gib(v['weights_loaded_bytes_per_gpu'])} ({loaded if loaded is not None else '-'})"
                     f" | {gib(v['profile_peak_bytes'])}"
                     f" | {gib(v['non_torch_bytes'])} | {gib(v['cudagraph_memory_bytes'])} | {float(predicted):.2f} | {float(logged):.2f} | {float(error) * 100:+.1f}% |")
    return "\n".join(lines)


@pytest.mark.parametrize("case_id", [
    pytest.param(case_id, marks=pytest.mark.xfail(reason=why, strict=True)) if why else case_id
    for case_id, (_, why) in PREDICTED.items()
])
def test_predicted_kv_memory_within_five_percent(case_id):
    _, _, logged, predicted, error = row(case_id)
    assert abs(error) <= TOLERANCE, f"{case_id}: predicted {float(predicted):.2f} GiB, logged {float(logged):.2f} GiB"


def test_every_case_with_gpu_and_utilization_is_predicted():
    stated = {case_id for case_id, case in CASES.items()
              if case_id.startswith("V") and case["gpu_memory_utilization"] is not None and "not stated" not in case["gpu"]}
    assert stated <= set(PREDICTED)


def test_table_prints():
    text = table()
    print("\n" + text)
    assert text.count("\n") == len(PREDICTED) + 1


def test_the_logged_memory_still_overrides_the_prediction():
    block = PREDICTED["V10"][0]
    values = evaluate_paths([str(SPECS / f"{block}.kvspec")])[1]
    assert values[(block, "vllm.kv_memory_bytes")] == Fraction("6.03") * GIB
    assert values[(block, "predicted_kv_memory_bytes")] != values[(block, "vllm.kv_memory_bytes")]


def test_quantized_weights_keep_embeddings_unquantized():
    # V05: GPTQ int4 layers, FP16 embedding and LM head: "Model loading took 3.8844 GiB"
    v = predict("V05")
    assert abs(Fraction(v["weights_loaded_bytes_per_gpu"]) / GIB - Fraction("3.8844")) < Fraction("0.05")
    assert v["weights_loaded_bytes_per_gpu"] > v["weights_bytes_per_gpu"]


def test_tensor_parallel_replicates_mla_down_projections():
    # V19: DeepSeek-R1 over 8 GPUs; the query and latent down-projections sit on each one
    v = predict("V19")
    assert v["weights_loaded_bytes_per_gpu"] > v["weights_bytes_per_gpu"]
    assert v["replicated_params"] > 61 * 7168 * (1536 + 576)


def test_the_sampler_needs_no_sampling_on_a_first_pipeline_stage():
    v = predict("V20")
    assert v["pipeline_stages"] == 2 and v["profile_peak_bytes"] == v["forward_peak_bytes"]


# vLLM's "Profiling CUDA graph memory: PIECEWISE=P (largest=L), FULL=F" and
# "Estimated CUDA graph memory: E GiB total", from public logs (single GPU, no
# speculative decoding): source, model, max_num_seqs, P, F, E
GRAPH_LOGS = [
    ("find_string id 51781852921, vLLM 0.19.0", "Qwen3.5-9B on an L40S", 256, 51, 35, "0.78"),
    ("find_string id 54492899325, vLLM 0.22.1", "Gemma-4-E4B-it on an RTX 3090 Ti", 256, 51, 35, "0.79"),
    ("find_string id 55770092662, vLLM 0.22.0", "Qwen3.5-4B", 256, 51, 35, "0.64"),
    ("find_string id 67144197265, vLLM 0.22.0", "Qwen2.5-7B-Instruct", 128, 35, 19, "0.37"),
    ("find_string id 56036894944, vLLM 0.22", "not named", 128, 35, 19, "0.40"),
]
GRAPH_TOLERANCE = Fraction(15, 100)


def graphs(settings: list[str]) -> dict:
    block = PREDICTED["V14"][0]
    parsed = [parse_setting(f"{block}.{s}") for s in ["kv_cache_memory_bytes=0", *settings]]
    values = evaluate_paths([str(SPECS / f"{block}.kvspec")], parsed)[1]
    return {cell: value for (b, cell), value in values.items() if b == block}


@pytest.mark.parametrize("source, model, seqs, piecewise, full, estimate", GRAPH_LOGS)
def test_cuda_graph_estimate_follows_the_logged_graph_counts(source, model, seqs, piecewise, full, estimate):
    v = graphs([f"max_num_seqs={seqs}", "max_num_batched_tokens=2048 tokens"])
    assert (v["cudagraph_piecewise_graphs"], v["cudagraph_full_graphs"]) == (piecewise, full)
    error = Fraction(v["cudagraph_memory_bytes"]) / GIB / Fraction(estimate) - 1
    print(f"{model}: {float(Fraction(v['cudagraph_memory_bytes']) / GIB):.2f} GiB against {estimate} ({float(error) * 100:+.0f}%)")
    assert abs(error) <= GRAPH_TOLERANCE


@pytest.mark.parametrize("settings, piecewise, full", [
    # "PIECEWISE=5 (largest=16), FULL=4" and "PIECEWISE=11 (largest=64), FULL=7":
    # find_string ids 61544841280 and 52221836498
    (["max_num_seqs=8"], 5, 4),
    (["max_num_seqs=32"], 11, 7),
    # 1,024 sequences: the sizes stop at 512 and every one has a full graph
    (["max_num_seqs=1024"], 51, 51),
    # max_num_batched_tokens off the steps is captured too (config/vllm.py _set_cudagraph_sizes)
    (["max_num_batched_tokens=100 tokens"], 16, 16),
    (["max_num_seqs=40", "max_num_batched_tokens=100 tokens"], 13, 8),
])
def test_cuda_graph_counts_follow_vllms_capture_sizes(settings, piecewise, full):
    v = graphs(settings)
    assert (v["cudagraph_piecewise_graphs"], v["cudagraph_full_graphs"]) == (piecewise, full)


def test_no_cuda_graph_estimate_where_vllm_subtracts_none():
    on, off = graphs([]), graphs(["cudagraph_estimated=false"])
    assert off["cudagraph_memory_bytes"] == 0
    # ROCm: vLLM skips the estimate (v1/worker/gpu_worker.py: current_platform.is_cuda())
    block = PREDICTED["V14"][0]
    amd = evaluate_paths([str(SPECS / f"{block}.kvspec")], [parse_setting('l40s.vendor="AMD"')])[1]
    assert amd[(block, "cudagraph_estimated")] is False and amd[(block, "cudagraph_memory_bytes")] == 0
    assert on["vllm.kv_memory_bytes"] - off["vllm.kv_memory_bytes"] == -on["cudagraph_memory_bytes"] == -86 * 8 * (1 << 20)
