"""Engine accounting rules beyond the logged cases, the `engine` switch and `kvdsl compare`."""

from __future__ import annotations

import json
from fractions import Fraction
from math import ceil, floor
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths, parse_setting

from cli_helpers import cli as shared_cli

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
GIB, MIB = 1 << 30, 1 << 20
ENGINES = ["ideal", "llamacpp", "sglang", "trtllm", "vllm"]  # the baseline first, then in load order
FIGURES = ["kv_bytes_per_token_per_gpu", "kv_cache_tokens", "num_blocks", "max_concurrency", "max_context"]

MODEL = 'model m "M" {{\n    layers = 4; heads = 8; kv_heads = {kv}; head_dim = 64; params = 1e9\n}}\n'
HARDWARE = 'hardware h "H" {\n    memory = 80 GiB; bandwidth = 1 TB/s\n}\n'


def cli(*args, code=0):
    return shared_cli(*args, code=code)


def block_values(path, block, *settings):
    values = evaluate_paths([str(path)], [parse_setting(s) for s in settings])[1]
    return {cell: value for (b, cell), value in values.items() if b == block}


def small(tmp_path, kv=8, body="gpus = 1") -> Path:
    path = tmp_path / "d.kvspec"
    path.write_text(MODEL.format(kv=kv) + HARDWARE + f'deployment d "D" {{\n    model = m\n    hardware = h\n    {body}\n}}\n')
    return path


# ---------------------------------------------------------------- the switch

@pytest.mark.parametrize("engine", ENGINES)
def test_engine_cells_follow_the_chosen_engine(engine):
    spec = SPECS / "deployments" / "gpt_oss_120b_h100.kvspec"
    v = block_values(spec, "gpt_oss_120b_h100", f"engine={engine}")
    assert v["engine"] == engine
    for figure in FIGURES:
        assert v[f"engine_{figure}"] == v[f"{engine}.{figure}"], figure


def test_ideal_is_the_default_and_matches_the_ideal_answers():
    v = block_values(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec", "gpt_oss_120b_h100")
    assert v["engine"] == "ideal"
    assert v["engine_kv_cache_tokens"] == v["token_capacity"]
    assert v["engine_max_context"] == v["max_context"]
    assert floor(v["engine_max_concurrency"]) == v["max_batch"]


def test_unknown_engine_is_a_clear_error(tmp_path):
    r = cli("eval", small(tmp_path, body="engine = vlm"), code=1)
    assert "vlm" in r.output and "did you mean `vllm`" in r.output


# ---------------------------------------------------------------- heads and memory

def test_heads_per_gpu_floor_or_ceil_when_tp_does_not_divide(tmp_path):
    v = block_values(small(tmp_path, kv=8, body="gpus = 3"), "d")
    assert (v["vllm.kv_heads_per_gpu"], v["sglang.kv_heads_per_gpu"], v["trtllm.kv_heads_per_gpu"]) == (2, 2, 3)
    v = block_values(small(tmp_path, kv=8, body="gpus = 16"), "d")
    assert (v["vllm.kv_heads_per_gpu"], v["trtllm.kv_heads_per_gpu"], v["kv_heads_per_gpu"]) == (1, 1, 1)


def test_vllm_memory_from_utilization_or_given(tmp_path):
    v = block_values(small(tmp_path, body="reserve_bytes = 2 GiB"), "d")
    # ceil(80 GiB x 0.9) - 2e9 x 2 bytes of weights - 2 GiB (cuda_memory defaults to memory)
    assert v["vllm.kv_memory_bytes"] == ceil(Fraction(80 * GIB) * Fraction(9, 10)) - 2 * 10**9 - 2 * GIB
    page = 16 * 8 * 128 * 2   # block x KV heads x (K + V: 2 x 64) x 2 bytes (fp16 cache)
    assert v["vllm.page_bytes"] == page
    assert v["vllm.num_blocks"] == floor(v["vllm.kv_memory_bytes"] / (page * 4))
    given = block_values(small(tmp_path, body="kv_cache_memory_bytes = 10 GiB"), "d")
    assert given["vllm.num_blocks"] == 10 * GIB // (page * 4)
    assert given["vllm.max_concurrency"] == Fraction(given["vllm.num_blocks"], ceil(given["context"] / 16))


def test_vllm_fp8_cache_is_one_byte(tmp_path):
    v = block_values(small(tmp_path, body="kv_dtype = fp8"), "d")
    assert v["vllm.dtype_bytes"] == 1 and v["vllm.page_bytes"] == 16 * 8 * 128


def test_speculative_layers_share_the_pool(tmp_path):
    v = block_values(small(tmp_path, body="speculative_layers = 1"), "d")
    assert v["vllm.full_layers"] == 5 and v["vllm.group_size"] == 5


def test_hybrid_allocator_off_keeps_sliding_layers_whole():
    spec = SPECS / "deployments" / "gpt_oss_120b_h100.kvspec"
    on = block_values(spec, "gpt_oss_120b_h100")
    off = block_values(spec, "gpt_oss_120b_h100", "vllm.hybrid_allocator=false")
    assert (on["vllm.groups"], on["vllm.group_size"]) == (2, 18)
    assert (off["vllm.groups"], off["vllm.group_size"], off["vllm.full_layers"]) == (1, 36, 36)
    # whole layers hold every token: fewer requests fit
    assert off["vllm.max_concurrency"] < on["vllm.max_concurrency"]


def test_vllm_sliding_window_reservation():
    v = block_values(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec", "gpt_oss_120b_h100")
    # window 128, 8192 batched tokens on an 80 GiB GPU, context 128K, block 16
    assert v["max_num_batched_tokens"] == 8192
    assert v["vllm.sliding_pages"] == ceil(min(128 - 1 + 8192, 131072) / 16) + 1 == 521
    assert v["vllm.pages_per_request"] == 131072 // 16 + 521


def test_vllm_max_context_is_the_longest_that_batch_requests_hold(tmp_path):
    path = small(tmp_path, body="kv_cache_memory_bytes = 1 GiB\n    batch = 3")
    v = block_values(path, "d")
    longest = v["vllm.max_context"]
    assert longest % 16 == 0
    at = block_values(path, "d", f"context={longest}")
    assert at["vllm.max_concurrency"] >= 3
    past = block_values(path, "d", f"context={longest + 1}")
    assert past["vllm.max_concurrency"] < 3


# ---------------------------------------------------------------- SGLang, TensorRT-LLM

def test_sglang_fraction_by_tensor_parallel(tmp_path):
    fractions = {1: "0.88", 2: "0.87", 4: "0.85", 8: "0.81", 16: "0.79"}
    for gpus, fraction in fractions.items():
        v = block_values(small(tmp_path, body=f"gpus = {gpus}"), "d")
        assert v["sglang.mem_fraction_static"] == Fraction(fraction), gpus


def test_sglang_sliding_pool_ratio():
    v = block_values(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec", "gpt_oss_120b_h100")
    n = v["sglang.tokens_in_memory"]
    assert v["sglang.full_tokens"] == floor(n * 36 / (18 + Fraction(8, 10) * 18))


def test_trtllm_rounds_blocks_up(tmp_path):
    v = block_values(small(tmp_path), "d")
    assert v["trtllm.num_blocks"] == ceil(v["trtllm.max_tokens"] / 32)
    free = Fraction(80 * GIB) - 2 * 10**9
    assert v["trtllm.max_tokens"] == floor(Fraction(9, 10) * free / (4 * 8 * 128 * 2))


def test_trtllm_worked_example(tmp_path):
    """TensorRT-LLM issue #2268: Qwen1.5-7B, 21.89 GiB free after the model, 64-token blocks: 631 blocks."""
    path = tmp_path / "q.kvspec"
    path.write_text('model q "Qwen1.5-7B" {\n layers = 32; heads = 32; head_dim = 128; params = 7.7e9\n}\n' + HARDWARE +
                    'deployment t "T" {\n model = q; hardware = h; engine = trtllm\n trtllm.tokens_per_block = 64 tokens\n'
                    ' trtllm.free_memory_bytes = 21.89 GiB\n}\n')
    v = block_values(path, "t")
    assert v["engine_num_blocks"] == 631
    for free in (Fraction("21.885"), Fraction("21.8949")):
        assert block_values(path, "t", f"trtllm.free_memory_bytes={float(free * GIB)!r} B")["trtllm.num_blocks"] == 631


# ---------------------------------------------------------------- llama.cpp

def test_llamacpp_quantized_rows_and_padding():
    spec = SPECS / "engine_logs" / "l01_llama_3_1_70b_q4_0.kvspec"
    block = "l01_llama_3_1_70b_q4_0"
    q8 = block_values(spec, block, "kv_dtype=q8_0")
    assert q8["llamacpp.kv_cache_bytes"] == 1280 * MIB * Fraction(34, 64)   # 34 bytes per 32 elements, not 2 per element
    q4 = block_values(spec, block, "kv_dtype=q4_0")
    assert q4["llamacpp.kv_cache_bytes"] == 1280 * MIB * Fraction(18, 64)
    padded = block_values(spec, block, "context=4000", "batch=3")
    assert padded["llamacpp.cells"] == 12032 == ceil(12000 / 256) * 256


def test_llamacpp_sliding_and_recurrent_caches():
    gpt = block_values(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec", "gpt_oss_120b_h100")
    assert gpt["llamacpp.swa_cells"] == ceil((128 * 2 + 512) / 256) * 256   # batch 2
    mamba = block_values(SPECS / "deployments" / "mamba_2_8b_l4.kvspec", "mamba_2_8b_l4")
    per_layer = 5120 * 16 + 5120 * 3   # state plus conv inputs, elements
    assert mamba["llamacpp.state_bytes"] == 64 * per_layer * 4 * mamba["batch"]
    assert mamba["llamacpp.k_bytes"] == 0


# ---------------------------------------------------------------- compare

def test_compare_text_shows_every_engine_and_why():
    r = cli("compare", SPECS / "engine_logs" / "v22_gpt_oss_120b.kvspec")
    out = r.output
    for engine in ENGINES:
        assert f"\n{engine}" in out
    assert "vllm *" in out
    # the rules themselves, with their values
    assert "kv_cache_tokens = floor(num_blocks / groups) * block_size = floor(9,793 / 2) * 16 tokens = 78,336 tokens" in out
    assert "max_concurrency = num_blocks / pages_per_request = 9,793 / 8,713 = 1.124" in out
    assert "sliding_pages = ceil(min(model.window - 1 tokens + max_num_batched_tokens, context) / block_size) + 1" in out
    assert "= 521" in out


def test_compare_explains_a_hybrid_mamba_deployment():
    out = cli("compare", SPECS / "engine_logs" / "v25_nemotron_3_nano_4b_gb10.kvspec").output
    assert "block_size = max(deployment.block_size, 16 tokens * ceil(state_bytes / (16 tokens * bytes_per_token_per_layer)))" in out
    assert "= 992 tokens" in out
    assert "groups = full_groups + sliding_groups + state_groups = 1 + 0 + 6 = 7" in out
    assert "group_size = min(full_layers, layers, state_layers) = min(4, 25, 21) = 4" in out
    assert "floor(1,473 / 7) * 992 tokens = 208,320 tokens" in out and "1,473 / 15 = 98.2" in out
    assert "pages_per_request = full_groups * full_pages + sliding_groups * sliding_pages + state_groups * state_pages" in out


def test_compare_json_contract():
    r = cli("compare", SPECS / "engine_logs" / "v23_qwen3_next_80b_h200x2.kvspec", "--json")
    data = json.loads(r.output)
    assert set(data) == {"block", "title", "engine", "context", "batch", "engines", "reasons"}
    assert list(data["engines"]) == ENGINES
    for row in data["engines"].values():
        assert set(row) == set(FIGURES)
    assert data["engines"]["vllm"]["kv_cache_tokens"] == 973760
    assert data["engines"]["vllm"]["num_blocks"] == 7162
    assert set(data["reasons"]) == set(ENGINES) - {"ideal"}
    assert all(isinstance(r, str) for reasons in data["reasons"].values() for r in reasons)


def test_compare_set_and_block_choice(tmp_path):
    out = cli("compare", SPECS / "deployments" / "mistral_7b_l4.kvspec", "--set", "engine=trtllm").output
    assert "trtllm *" in out
    assert "blocks have `engine`: choose one with --block" in cli("compare", SPECS / "catalog.kvspec", code=2).output
    assert "is a model: compare takes a deployment" in cli("compare", SPECS / "catalog.kvspec", "--block", "qwen3_8b", code=2).output
    assert "no block named" in cli("compare", SPECS / "catalog.kvspec", "--block", "nope", code=2).output


def test_vllm_fp8_mla_cache_keeps_its_scales_in_the_page():
    spec = SPECS / "deployments" / "deepseek_v3_h200x8.kvspec"
    v = block_values(spec, "deepseek_v3_h200x8", "kv_dtype=fp8_ds_mla")
    # 512 FP8 latent + 4 FP32 scales + 64 BF16 RoPE values = 656 bytes per token and layer
    assert v["vllm.page_bytes"] == 16 * 656
    assert v["vllm.bytes_per_token_per_layer"] * 1 == 656
    plain = block_values(spec, "deepseek_v3_h200x8", "kv_dtype=fp8")
    assert plain["vllm.page_bytes"] == 16 * 576
