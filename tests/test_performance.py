"""Speed and cost rules (kvdsl/prelude/performance.kvspec, calibration.kvspec): published measurements and hand checks."""

import sys
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def deployments(tmp_path, model, hardware, blocks: dict, workloads: str = ""):
    """Deployments of one model on one GPU, each block setting its cells: a lookup of (block, cell)."""
    text = [f'import "{ROOT}/specs/models/{model}.kvspec"', f'import "{ROOT}/specs/hardware/{hardware}.kvspec"', workloads]
    for name, cells in blocks.items():
        body = "\n".join(f"    {k} = {v}" for k, v in cells.items())
        text.append(f'deployment {name} "{name}" {{\n    model = {model}\n    hardware = {hardware}\n{body}\n}}')
    spec = tmp_path / "d.kvspec"
    spec.write_text("\n".join(text) + "\n")
    _, values = evaluate_paths([str(spec)])
    return lambda block, cell: values[(block, cell)]


def deployment(tmp_path, model, hardware, name="d", **cells):
    v = deployments(tmp_path, model, hardware, {name: cells})
    return lambda cell, block=name: v(block, cell)


# ---- the published measurements -------------------------------------------------------------

@pytest.fixture(scope="module")
def calibration():
    import calibrate

    return calibrate.Calibration()


def _meets_the_issue(results: dict):
    """Each table: the median predicted / measured in [0.9, 1.11], 70% of rows within [0.8, 1.25], 95% within [0.5, 2]."""
    for table, (rows, median, near, within) in results.items():
        assert rows >= 30, (table, rows)
        assert 0.9 <= median <= 1.11, (table, median)
        assert near >= 0.70, (table, near)
        assert within >= 0.95, (table, within)


def test_the_calibration_table_fits_every_published_table(calibration):
    import calibrate

    ratios = calibration.ratios()
    results = calibrate.summary(calibration.tables_of(range(len(ratios))), ratios)
    assert set(results) == {"max throughput", "static batch", "online serving"}
    _meets_the_issue(results)


def test_a_table_fitted_on_half_the_rows_predicts_the_other_half(calibration):
    import calibrate

    _meets_the_issue(calibrate.cross_validated(calibration))


def test_skipped_rows_say_why(calibration):
    # every model and GPU of the published tables is in the catalog: the only rows left out are those
    # of a saturated server (their figures measure the run's length) and of a split not stated
    assert len(calibration.rows) >= 730
    reasons = {reason for _, _, reason in calibration.skipped}
    assert all(r.startswith(("a saturated server", "parallel split not stated")) for r in reasons), reasons
    assert {row["model_key"] for _, _, row, _ in calibration.rows} >= {
        "gpt-j-6b", "llama-2-13b", "llama-2-70b", "falcon-180b", "mixtral-8x22b", "llama-4-maverick-17b-128e"}
    assert "GB200" in {row["gpu"] for _, _, row, _ in calibration.rows}


# ---- the engine's scheduler ----------------------------------------------------------------------

SHORT = 'workload short "128 in, 128 out" {\n    prompt_tokens = 128 tokens\n    output_tokens = 128 tokens\n}'


def test_a_128_128_max_throughput_run_is_capped_by_the_engines_batch_limit(tmp_path):
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        "vllm_8b": {"engine": "vllm", "workload": "short", "weight_dtype": "fp8", "kv_dtype": "fp8"},
        "trtllm_8b": {"engine": "trtllm", "workload": "short", "weight_dtype": "fp8", "kv_dtype": "fp8"},
        "narrow": {"engine": "vllm", "workload": "short", "engine_max_batch_size": 300}}, SHORT)
    # vLLM's --max-num-seqs on a large GPU (1,024) and trtllm-serve's --max_batch_size (2,048), not the memory
    assert v("vllm_8b", "max_batch") == v("vllm_8b", "engine_max_batch_size") == 1024
    assert v("vllm_8b", "memory_max_batch") > 3 * 1024
    assert v("vllm_8b", "max_batch_limit") == "scheduler"
    assert v("trtllm_8b", "max_batch") == 2048 < v("trtllm_8b", "memory_max_batch")
    # the limit is the deployment's to change, and its throughput follows
    assert v("narrow", "max_batch") == 300 and v("narrow", "max_batch_limit") == "scheduler"


def test_batch_never_exceeds_the_engines_limit(tmp_path):
    v = deployment(tmp_path, "llama_3_1_8b", "h100_sxm", engine="vllm", context=256, batch=1025)
    assert v("fits") is False
    assert v("verdict") == "does not fit: 1,025 sequences of 256 tokens asked, 1,024 fit"


def test_prompts_are_chunked_into_the_steps_of_the_decoding_sequences(tmp_path):
    workloads = 'workload long_prompts "20,000 in, 1,000 out" {\n    prompt_tokens = 20000 tokens\n    output_tokens = 1000 tokens\n}\n' \
                'workload brief_prompts "1,000 in, 1,000 out" {\n    prompt_tokens = 1000 tokens\n    output_tokens = 1000 tokens\n}'
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        "long": {"engine": "vllm", "workload": "long_prompts", "batch": 16, "kv_dtype": "fp8"},
        "brief": {"engine": "vllm", "workload": "brief_prompts", "batch": 16, "kv_dtype": "fp8"}}, workloads)
    assert v("long", "fits") is True
    # a step of 8,192 tokens carries the 16 decoding sequences and 8,176 of the prompt: three chunks
    assert v("long", "engine_max_tokens_per_step") == 8192
    assert v("long", "prompt_chunk_tokens") == 8192 - 16 and v("long", "prefill_chunks") == 3
    assert v("long", "prefill_seconds") == 3 * v("long", "pass_seconds[4]")
    # the first token comes after the wait for the step it joins, the chunks, and the request's own cost
    assert v("long", "ttft_seconds") == (v("long", "request_overhead") + v("long", "first_chunk_wait_seconds") +
                                         v("long", "prefill_seconds"))
    # every step also carries the prompts that keep the batch fed, so a longer prompt slows every token
    assert v("long", "pass_prompt_tokens[3]") == 20 * 16
    assert v("long", "tpot_seconds") > 1.5 * v("brief", "tpot_seconds")


def test_sglangs_decoding_sequences_wait_for_its_prompt_steps(tmp_path):
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        "sglang_8b": {"engine": "sglang", "context": 4096, "batch": 64},
        "vllm_8b": {"engine": "vllm", "context": 4096, "batch": 64}})
    assert v("sglang_8b", "engine_mixes_prefill") is False and v("vllm_8b", "engine_mixes_prefill") is True
    # SGLang's decode step runs no prompt tokens, and waits for the prompt steps (chunks alone) its batch needs
    assert v("sglang_8b", "pass_prompt_tokens[3]") == 0
    # 64 sequences of 2,048-token answers need 64 / 2,048 of a 2,048-token prompt each step
    assert v("sglang_8b", "alone_chunk_tokens") == 2048
    waits = v("sglang_8b", "pass_seconds[3]") - v("sglang_8b", "pass_forward_seconds[3]")
    assert float(waits) == pytest.approx(float(v("sglang_8b", "pass_forward_seconds[5]")) * 64 / 2048)


def test_a_static_batch_waits_for_every_prompt_of_the_batch(tmp_path):
    v = deployments(tmp_path, "gpt_j_6b", "h100_sxm", {
        "one": {"static_batching": "true", "batch": 1, "context": 256, "weight_dtype": "fp8"},
        "many": {"static_batching": "true", "batch": 64, "context": 256, "weight_dtype": "fp8"}})
    # the batch's 64 prompts of 128 tokens are prefilled in one pass before any first token
    assert v("many", "pass_prompt_tokens[4]") == 64 * 128 and v("many", "prefill_chunks") == 1
    assert v("many", "ttft_seconds") > 10 * v("one", "ttft_seconds")
    assert v("many", "first_chunk_wait_seconds") == 0


# ---- the roofline ------------------------------------------------------------------------------

def test_llama_8b_batch_1_on_h100_is_bandwidth_bound(tmp_path):
    v = deployment(tmp_path, "llama_3_1_8b", "h100_sxm", weight_dtype="bf16", batch=1, context="2048")
    assert v("bound") == "memory bandwidth"
    weights_time = v("weights_bytes") / v("bandwidth", "h100_sxm")
    # the step reads the weights (and a little cache) at the calibrated share of the bandwidth
    reading = float(weights_time / v("bandwidth_efficiency"))
    assert reading <= float(v("memory_seconds")) <= 1.02 * reading
    assert float(v("memory_seconds")) > 3 * float(v("compute_seconds"))
    # plus the fixed cost of a step
    assert weights_time < float(v("tpot_seconds")) < 2 * float(weights_time)


def test_the_calibration_table_reads_the_gpus_generation_and_the_weights_precision(tmp_path):
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        "in_fp8": {"weight_dtype": "fp8"}, "in_bf16": {"weight_dtype": "bf16"}})
    assert v("h100_sxm", "generation") == "hopper"
    assert v("in_fp8", "compute_efficiency") == v("h100_sxm", "dense_gemm_efficiency_fp8")
    assert v("in_bf16", "compute_efficiency") == v("h100_sxm", "dense_gemm_efficiency_bf16")
    assert v("in_fp8", "peak_flops") == v("h100_sxm", "flops_fp8")


def test_moe_reads_fewer_weights_at_batch_1(tmp_path):
    v = deployments(tmp_path, "mixtral_8x7b_v0_1", "h100_sxm", {
        "one": {"gpus": 2, "batch": 1, "context": "2048", "static_batching": "true"},
        "many": {"gpus": 2, "batch": 256, "context": "2048", "static_batching": "true"}})
    # one token touches 2 of 8 experts per layer: a quarter of the routed experts' weights
    assert v("one", "experts_touched") == 2
    # 256 tokens touch them all
    assert v("many", "experts_touched") == 8
    assert v("one", "pass_moe_seconds[3]") < 0.3 * v("many", "pass_moe_seconds[3]")


def test_tensor_parallel_8_halves_neither_ttft_nor_tpot(tmp_path):
    v = deployments(tmp_path, "llama_3_1_70b", "h100_sxm", {
        "four": {"gpus": 4, "batch": 16, "context": "4096"}, "eight": {"gpus": 8, "batch": 16, "context": "4096"}})
    assert v("eight", "communication_seconds") > v("four", "communication_seconds") > 0
    assert v("eight", "tpot_seconds") > v("four", "tpot_seconds") / 2
    assert v("eight", "ttft_seconds") > v("four", "ttft_seconds") / 2
    assert v("eight", "tpot_seconds") < v("four", "tpot_seconds")


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


# ---- mixtures of experts: expert and attention parallelism ----------------------------------------

def test_dep8_deepseek_r1_holds_eight_times_the_sequences_of_tp8(tmp_path):
    layouts = {"tp8": {"gpus": 8, "kv_dtype": "fp8", "context": "8K"},
               "dep8": {"gpus": 8, "kv_dtype": "fp8", "context": "8K", "attention_data_parallel": 8, "expert_parallel": 8}}
    v = deployments(tmp_path, "deepseek_r1_0528", "h200", layouts)
    # under TP8 every GPU holds every sequence's MLA latent; under DEP8 each replica only its own sequences'
    assert v("tp8", "kv_bytes_per_sequence_per_gpu") == v("dep8", "kv_bytes_per_sequence_per_gpu")
    assert v("dep8", "tensor_parallel") == 1 and v("dep8", "rank_batch") == 1
    per_byte = {d: v(d, "max_batch") / v(d, "kv_budget_bytes_per_gpu") for d in layouts}
    assert 7.9 < per_byte["dep8"] / per_byte["tp8"] < 8.1
    # the routed experts' weights per GPU are an eighth of them either way; the dense weights are in every replica
    for d in layouts:
        assert v(d, "routed_weight_bytes_per_gpu") == v(d, "routed_weight_bytes") / 8
    assert v("dep8", "weights_bytes_per_gpu") == v("dep8", "routed_weight_bytes") / 8 + v("dep8", "dense_weight_bytes")
    assert v("tp8", "weights_bytes_per_gpu") == v("tp8", "weights_bytes") / 8
    # the experts' tokens cross the GPUs twice a layer (all-to-all), the busiest GPU with the imbalance
    assert v("dep8", "communication_seconds") > 0 and v("dep8", "expert_imbalance") > 1 == v("tp8", "expert_imbalance")


def test_engines_run_the_layouts_they_support(tmp_path):
    import json

    from cli_helpers import cli

    spec = tmp_path / "layouts.kvspec"
    spec.write_text(f'import "{ROOT}/specs/models/deepseek_r1_0528.kvspec"\nimport "{ROOT}/specs/hardware/h200.kvspec"\n'
                    'deployment dep "DEP" {\n    model = deepseek_r1_0528\n    hardware = h200\n    gpus = 8\n    context = 8K\n'
                    '    attention_data_parallel = 2\n    expert_parallel = 4\n}\n')
    # vLLM spreads the experts over every GPU of its replicas; TensorRT-LLM's attention replicas are single GPUs
    for engine in ("vllm", "trtllm"):
        out = cli("eval", spec, "--set", f"engine={engine}", code=2).stderr
        assert "breaks `require engine_runs_parallel_layout`" in out, out
    result = json.loads(cli("eval", spec, "--set", "engine=sglang", "--cells", "fits,tensor_parallel", "--json", code=0).stdout)
    assert result["blocks"]["dep"]["cells"]["tensor_parallel"]["value"] == 4
    assert cli("eval", spec, "--set", "engine=vllm", "--set", "expert_parallel=8", code=0)
    # (a tensor-parallel deployment is sized as before: tests/test_engine_logs.py)


# ---- disaggregated prefill and decode, load, speculation, prefix caching --------------------------

def test_a_disaggregated_deployments_tpot_does_not_depend_on_the_prompt(tmp_path):
    # the same average context (prompt + half the answer: 2,000 tokens), prompts of 1,000 and of 1,500 tokens
    workloads = 'workload short_prompt "1,000 in, 2,000 out" {\n    prompt_tokens = 1000 tokens\n    output_tokens = 2000 tokens\n}\n' \
                'workload long_prompt "1,500 in, 1,000 out" {\n    prompt_tokens = 1500 tokens\n    output_tokens = 1000 tokens\n}'
    common = {"weight_dtype": "fp8", "kv_dtype": "fp8", "gpus": 4, "batch": 64, "engine": "vllm"}
    v = deployments(tmp_path, "llama_3_1_70b", "h200", {
        "apart_short": {**common, "workload": "short_prompt", "prefill_gpus": 2},
        "apart_long": {**common, "workload": "long_prompt", "prefill_gpus": 2},
        "together_short": {**common, "workload": "short_prompt"},
        "together_long": {**common, "workload": "long_prompt"}}, workloads)
    assert v("apart_short", "tpot_seconds") == v("apart_long", "tpot_seconds")
    assert v("apart_short", "pass_prompt_tokens[3]") == 0
    # aggregated, every step carries the prompts that keep the batch fed: a longer prompt, a slower token
    assert v("together_long", "tpot_seconds") > v("together_short", "tpot_seconds")
    # the first token waits for the prompt's cache to reach the decode GPUs; both pools cost
    assert v("apart_long", "kv_transfer_seconds") == v("apart_long", "prompt_kv_bytes") / v("apart_long", "kv_transfer_bandwidth")
    assert v("apart_long", "ttft_seconds") > v("apart_long", "prefill_seconds") + v("apart_long", "kv_transfer_seconds")
    assert v("apart_long", "total_gpus") == 6 and v("apart_long", "decode_gpus") == 4


def test_p99_ttft_grows_without_bound_as_the_rate_nears_capacity(tmp_path):
    rates = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)
    capacity = deployment(tmp_path, "llama_3_1_8b", "h100_sxm", engine="vllm", context=2048, batch=128)("capacity")  # 1/s
    workloads = "\n".join(f'workload w{i} "a rate" {{\n    prompt_tokens = 1024 tokens\n    output_tokens = 1024 tokens\n'
                          f"    requests_per_second = {float(capacity) * r!r}\n    latency_percentile = 0.99\n}}" for i, r in enumerate(rates))
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        f"d{i}": {"engine": "vllm", "batch": 128, "workload": f"w{i}"} for i in range(len(rates))}, workloads)
    ttft = [float(v(f"d{i}", "ttft_seconds")) for i in range(len(rates))]
    assert all(a < b for a, b in zip(ttft, ttft[1:])), ttft
    assert ttft[-1] > 100 * ttft[0]
    # the wait at p99 of M/G/1 with exponential tail: mean / rho x ln(rho / 0.01)
    import math
    rho, mean = float(v("d3", "traffic_intensity")), float(v("d3", "mean_queue_seconds"))
    assert float(v("d3", "queue_seconds")) == pytest.approx(mean / rho * math.log(rho / 0.01))
    # at the capacity the copy does not keep up: no first token to speak of
    over = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {"over": {"engine": "vllm", "batch": 128, "workload": "too_many"}},
                       f'workload too_many "over capacity" {{\n    prompt_tokens = 1024 tokens\n    output_tokens = 1024 tokens\n'
                       f"    requests_per_second = {float(capacity) * 1.01!r}\n}}")
    from kvdsl.evaluate import NONE

    assert over("over", "keeps_up") is False and over("over", "ttft_seconds") is NONE
    assert over("over", "verdict").startswith("fits but does not keep up: ")


def test_speculative_decoding_gains_the_accepted_tokens_per_step(tmp_path):
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        "plain": {"batch": 8, "context": 2048},
        "drafted": {"batch": 8, "context": 2048, "speculative_tokens": 3, "acceptance_rate": 0.8, "draft_params": "1e9"}})
    # (1 - a^(k + 1)) / (1 - a) tokens per step: 2.952 for k = 3, a = 0.8
    assert v("drafted", "accepted_tokens_per_step") == (1 - 0.8**4) / (1 - 0.8) or abs(float(v("drafted", "accepted_tokens_per_step")) - 2.952) < 1e-9
    assert v("drafted", "pass_tokens[3]") > 4 * 8  # every decoding sequence verifies 4 tokens, and the prompts' share
    assert v("drafted", "tpot_seconds") < v("plain", "tpot_seconds") / 2


def test_prefix_caching_cuts_prefill_and_holds_the_prefix_once(tmp_path):
    v = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {
        "cold": {"batch": 8, "context": 8192, "engine": "vllm"},
        "cached": {"batch": 8, "context": 8192, "engine": "vllm", "prefix_hit_rate": 0.5}})
    assert v("cached", "computed_prompt_tokens") == 2048 and v("cached", "shared_prefix_tokens") == 2048
    assert v("cached", "prefill_seconds") < v("cold", "prefill_seconds") / 1.5
    assert v("cached", "memory_max_batch") > 1.25 * v("cold", "memory_max_batch")
    # the ideal accounting: each sequence's own pages, and the prefix once
    ideal = deployments(tmp_path, "llama_3_1_8b", "h100_sxm", {"ideal_cached": {"batch": 8, "context": 8192, "prefix_hit_rate": 0.5}})
    assert ideal("ideal_cached", "kv_bytes_per_gpu") == 8 * (ideal("ideal_cached", "kv_bytes_per_sequence_per_gpu") -
                                                          ideal("ideal_cached", "shared_prefix_bytes_per_gpu")) + ideal("ideal_cached", "shared_prefix_bytes_per_gpu")
