"""Every startup log in engine-logs/cases.json, reproduced by the engine accounting.

Each case is a deployment in specs/engine_logs/.  The engines print the
available KV memory (vLLM) or the free memory (SGLang) rounded to 0.01 GiB,
so the exact bytes lie within +-0.005 GiB of the log: a case passes when some
value in that interval reproduces every figure the log prints at once (the
token count, the block count, the concurrency to two decimals).
"""

from __future__ import annotations

import json
from fractions import Fraction
from math import ceil
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths, parse_setting

ROOT = Path(__file__).resolve().parents[1]
CASES_FILE = ROOT / "tests" / "engine_logs" / "cases.json"   # a copy of ../shared/engine-logs/cases.json
SHARED_CASES = ROOT.parent / "shared" / "engine-logs" / "cases.json"
SPECS = ROOT / "specs" / "engine_logs"
GIB = 1 << 30
MIB = 1 << 20
HALF_STEP = Fraction(5, 1000) * GIB   # the log rounds GiB to two decimals

DEPLOYMENT = {
    "V01": "v01_llama_3_1_8b_rtx3090",
    "V04": "v04_llama_3_3_70b_fp8_h200x4",
    "V05": "v05_mistral_7b_gptq_gb10",
    "V07": "v07_qwen3_0_6b_a100",
    "V10": "v10_qwen3_8b_rtx4090",
    "V14": "v14_qwen3_coder_30b_l40sx4",
    "V19": "v19_deepseek_r1_h200x8",
    "V20": "v20_deepseek_v2_lite_l4x4",
    "V22": "v22_gpt_oss_120b",
    "V23": "v23_qwen3_next_80b_h200x2",
    "V25": "v25_nemotron_3_nano_4b_gb10",
    "S02": "s02_qwq_32b_l4x4",
    "L01": "l01_llama_3_1_70b_q4_0",
    "L03": "l03_qwen3_8b_131k",
}


def load_cases() -> dict:
    return {case["id"]: case for case in json.loads(CASES_FILE.read_text())}


CASES = load_cases()


def deployment(block: str, *settings: str) -> dict:
    values = evaluate_paths([str(SPECS / f"{block}.kvspec")], [parse_setting(s) for s in settings])[1]
    return {cell: value for (b, cell), value in values.items() if b == block}


def test_every_case_has_a_deployment():
    assert sorted(CASES) == sorted(DEPLOYMENT)


@pytest.mark.skipif(not SHARED_CASES.is_file(), reason="../shared/engine-logs is not beside this checkout")
def test_the_copy_of_the_cases_is_current():
    assert json.loads(CASES_FILE.read_text()) == json.loads(SHARED_CASES.read_text())


def test_each_case_names_its_engine():
    for case_id, block in DEPLOYMENT.items():
        engine = deployment(block)["engine"]
        assert engine == {"V": "vllm", "S": "sglang", "L": "llamacpp"}[case_id[0]], case_id


# ---------------------------------------------------------------- vLLM

def vllm_logged(case: dict) -> dict:
    logged = {}
    if case["gpu_kv_cache_tokens"] is not None:
        logged["engine_kv_cache_tokens"] = case["gpu_kv_cache_tokens"]
    if case["num_gpu_blocks"] is not None:
        logged["engine_num_blocks"] = case["num_gpu_blocks"]
    if case["max_concurrency"] is not None:
        logged["engine_max_concurrency"] = f"{case['max_concurrency']:.2f}"
    return logged


def reproduces(figures: dict, logged: dict) -> bool:
    for cell, expected in logged.items():
        value = figures[cell]
        if cell == "engine_max_concurrency":
            if f"{float(value):.2f}" != expected:
                return False
        elif value != expected:
            return False
    return True


def memory_candidates(logged_gib: float, block_bytes) -> list:
    """One KV memory for each block count reachable within the log's rounding."""
    centre = Fraction(str(logged_gib)) * GIB
    low, high = centre - HALF_STEP, centre + HALF_STEP
    first, last = int(low // block_bytes), int(high // block_bytes)
    return [max(low, n * block_bytes) for n in range(first, last + 1) if max(low, n * block_bytes) < high]


VLLM_CASES = sorted(case_id for case_id in DEPLOYMENT if case_id.startswith("V"))


@pytest.mark.parametrize("case_id", VLLM_CASES)
def test_vllm_reproduces_the_log(case_id):
    case, block = CASES[case_id], DEPLOYMENT[case_id]
    logged = vllm_logged(case)
    assert logged, "every case logs something to check"
    at_log = deployment(block)
    assert at_log["kv_cache_memory_bytes"] == Fraction(str(case["available_kv_gib"])) * GIB
    block_bytes = at_log["vllm.block_bytes"]
    matches = []
    for memory in memory_candidates(case["available_kv_gib"], block_bytes):
        figures = deployment(block, f"{block}.kv_cache_memory_bytes={memory.numerator / memory.denominator!r} B")
        if reproduces(figures, logged):
            matches.append(memory)
    assert matches, f"{case_id}: no available memory within the log's rounding reproduces {logged}"


def test_vllm_memory_from_the_profile_line():
    """V01 logs its profile: total 23.58 GiB, peak torch 17.06 GiB, non-torch 0.35 GiB, KV 3.81 GiB at 0.9."""
    block = DEPLOYMENT["V01"]
    weights = Fraction("14.9888") * GIB        # "Loading model weights took 14.9888 GB"
    reserve = Fraction("17.06") * GIB - weights + Fraction("0.35") * GIB
    v = deployment(block, f"{block}.kv_cache_memory_bytes=0", f"{block}.weights_bytes_per_gpu={float(weights)!r} B",
                   f"{block}.reserve_bytes={float(reserve)!r} B")
    assert v["vllm.kv_memory_bytes"] == ceil(Fraction("23.58") * GIB * Fraction(9, 10)) - Fraction("17.41") * GIB
    assert f"{float(v['vllm.kv_memory_bytes'] / GIB):.2f}" == "3.81"


def test_hybrid_mamba_block_and_padding():
    # V23: "Setting attention block size to 544 tokens", "Padding mamba page size by 1.49%"
    v = deployment(DEPLOYMENT["V23"])
    assert v["vllm.block_size"] == 544
    assert v["vllm.state_bytes"] == (3 * 8192 + 32 * 128 * 128) * 2 / 2   # conv + delta-net state, bf16, over TP 2
    assert f"{float((v['vllm.page_bytes'] - v['vllm.state_bytes']) / v['vllm.state_bytes'] * 100):.2f}" == "1.49"
    assert (v["vllm.groups"], v["vllm.group_size"]) == (4, 12)
    # V25: "Setting attention block size to 992 tokens", "Add 3 padding layers, may waste at most 14.29%"
    v = deployment(DEPLOYMENT["V25"])
    assert v["vllm.block_size"] == 992
    assert v["vllm.padding_layers"] == 3
    assert f"{3 / 21 * 100:.2f}" == "14.29" and v["vllm.state_layers"] == 21
    assert (v["vllm.groups"], v["vllm.group_size"], v["vllm.pages_per_request"]) == (7, 4, 9 + 6)


def test_pipeline_stage_with_most_layers_decides():
    v = deployment(DEPLOYMENT["V20"])
    assert v["vllm.layers"] == 14          # 27 layers over 2 stages: 14 + 13
    assert v["vllm.page_bytes"] == 16 * 576 * 2   # the MLA latent, not divided by TP


def test_mla_latent_is_not_divided_by_tensor_parallelism():
    v = deployment(DEPLOYMENT["V19"])
    assert v["vllm.page_bytes"] == 64 * 576 * 2 and v["vllm.layers"] == 61


# ---------------------------------------------------------------- SGLang

def test_sglang_reproduces_the_log():
    """S02: the free (21.63) and available (6.09) GiB are both rounded; some pair within reproduces the log."""
    case, block = CASES["S02"], DEPLOYMENT["S02"]
    v = deployment(block)
    assert v["sglang.mem_fraction_static"] == Fraction(85, 100)
    assert v["sglang.kv_bytes_per_token_per_gpu"] == 64 * 2 * 128 * 2 * 2   # 64 layers x 2 KV heads per GPU x (K + V) x 128 x bf16
    free = Fraction("21.63") * GIB
    # tokens grow with the memory left after the weights: bisect it within [6.085, 6.095) GiB
    low, high = Fraction("6.085") * GIB, Fraction("6.095") * GIB

    def at(available):
        weights = free - available
        return deployment(block, f"{block}.weights_bytes_per_gpu={float(weights)!r} B")

    assert at(low)["sglang.kv_cache_tokens"] <= case["gpu_kv_cache_tokens"] <= at(high)["sglang.kv_cache_tokens"]
    for _ in range(40):
        middle = (low + high) / 2
        if at(middle)["sglang.kv_cache_tokens"] < case["gpu_kv_cache_tokens"]:
            low = middle
        else:
            high = middle
    figures = at(high)
    assert figures["sglang.kv_cache_tokens"] == case["gpu_kv_cache_tokens"] == 46611
    assert f"{float(figures['sglang.k_bytes'] / GIB):.2f}" == f"{case['k_size_gib']:.2f}" == "1.42"
    assert f"{float(figures['sglang.v_bytes'] / GIB):.2f}" == f"{case['v_size_gib']:.2f}"


# ---------------------------------------------------------------- llama.cpp

@pytest.mark.parametrize("case_id", ["L01", "L03"])
def test_llamacpp_reproduces_the_log(case_id):
    case, v = CASES[case_id], deployment(DEPLOYMENT[case_id])
    assert v["engine_kv_cache_tokens"] == case["gpu_kv_cache_tokens"]
    assert v["llamacpp.kv_cache_bytes"] == Fraction(str(case["kv_total_mib"])) * MIB
    assert v["llamacpp.k_bytes"] == Fraction(str(case["k_mib"])) * MIB
    assert v["llamacpp.v_bytes"] == Fraction(str(case["v_mib"])) * MIB


def test_llamacpp_rpc_split_is_whole_layers():
    # L01: 656 + 624 MiB across two backends is 41 + 39 layers of 16 MiB (K and V)
    v = deployment(DEPLOYMENT["L01"])
    per_layer = (v["llamacpp.k_bytes"] + v["llamacpp.v_bytes"]) / 80
    assert per_layer == 16 * MIB and 41 * per_layer == 656 * MIB and 39 * per_layer == 624 * MIB
