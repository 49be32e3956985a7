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
    # window 128, 8192 batched tokens on an 80 GiB GPU, two batches in flight (async scheduling), context 128K, block 16
    assert v["max_num_batched_tokens"] == 8192 and v["vllm.in_flight_tokens"] == 2 * 8192
    assert v["vllm.sliding_pages"] == ceil(min(128 - 1 + 2 * 8192, 131072) / 16) + 1 == 1033
    assert v["vllm.pages_per_request"] == 131072 // 16 + 1033
    # before 0.26 one scheduled chunk
    old = block_values(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec", "gpt_oss_120b_h100", "vllm.version=0.25")
    assert old["vllm.sliding_pages"] == ceil(min(128 - 1 + 8192, 131072) / 16) + 1 == 521


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
        v = block_values(small(tmp_path, body=f"gpus = {gpus}\n    sglang.version = 0.4"), "d")
        assert v["sglang.mem_fraction_static"] == Fraction(fraction), gpus


def hardware_block(mib: int) -> str:
    return f'hardware g "G" {{\n    memory = {mib} MiB; bandwidth = 1 TB/s\n}}\n'


@pytest.mark.parametrize("mib, gpus, settings, fraction", [
    # H100 (81559 MiB), TP 1: chunked prefill 8192, CUDA graphs to 256:
    # 512 + 8192 x 1.5 + 256 x 2 + 1/8 x 1024 = 13440 MiB reserved; (81559 - 13440) / 81559 = 0.83521.
    # SGLang's own documentation prints mem_fraction_static=0.835 for one Hopper GPU (docs offline engine, Feb 2026)
    (81559, 1, "", "0.835"),
    # H100, TP 8: graphs to 512: 512 + 12288 + 1024 + 1024 = 14848; 66711 / 81559 = 0.81795
    (81559, 8, "", "0.818"),
    # L4 (23034 MiB), TP 1: chunked 2048, graphs to 24: 512 + 3072 + 48 + 128 = 3760; 19274 / 23034 = 0.83676
    (23034, 1, "", "0.837"),
    # 16 GiB, TP 1: graphs to 8: 512 + 3072 + 16 + 128 = 3728; 12656 / 16384 = 0.77246
    (16384, 1, "", "0.772"),
    # H200 (143771 MiB), TP 1: 13440 MiB; (143771 - 13440) / 143771 = 0.90652; an EAGLE draft adds 2048: 0.89227
    (143771, 1, "", "0.907"),
    (143771, 1, 'sglang.speculative_algorithm = "EAGLE"', "0.892"),
    # B200-class (183359 MiB), TP 1: chunked 16384, graphs 512: 512 + 24576 + 1024 + 128 = 26240; 157119 / 183359 = 0.85689
    (183359, 1, "", "0.857"),
])
def test_sglang_05_fraction_from_gpu_memory(tmp_path, mib, gpus, settings, fraction):
    path = tmp_path / "d.kvspec"
    path.write_text(MODEL.format(kv=8) + hardware_block(mib) +
                    f'deployment d "D" {{\n    model = m\n    hardware = g\n    gpus = {gpus}\n    {settings}\n}}\n')
    v = block_values(path, "d")
    assert v["sglang.mem_fraction_static"] == Fraction(fraction)


def test_sglang_05_ten_gib_floor(tmp_path):
    """Above 60 GiB at least 10 GiB is reserved: a 64 GiB GPU with --chunked-prefill-size 2048 and 8 graphs."""
    path = tmp_path / "d.kvspec"
    path.write_text(MODEL.format(kv=8) + hardware_block(65536) +
                    'deployment d "D" {\n    model = m\n    hardware = g\n'
                    '    sglang.chunked_prefill_size = 2048 tokens\n    sglang.cuda_graph_max_bs = 8\n}\n')
    v = block_values(path, "d")
    # 512 + 3072 + 16 + 128 = 3728 MiB < 10240: (65536 - 10240) / 65536 = 0.84375 -> 0.844
    assert v["sglang.reserved_memory"] == 10 * GIB
    assert v["sglang.mem_fraction_static"] == Fraction("0.844")


def test_sglang_sliding_pool_ratio():
    v = block_values(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec", "gpt_oss_120b_h100")
    # 0.5.23's HybridSWAPoolConfigurator: a token costs the 18 full layers and 0.8 x the 18 sliding ones
    layer = v["sglang.kv_bytes_per_token_per_gpu"] / 36
    assert v["sglang.tokens_in_memory"] == floor(v["sglang.kv_memory_bytes"] / (18 * layer + Fraction(8, 10) * 18 * layer))
    assert v["sglang.swa_tokens"] == floor(v["sglang.kv_cache_tokens"] * Fraction(8, 10))


def test_trtllm_rounds_blocks_up(tmp_path):
    v = block_values(small(tmp_path), "d")
    assert v["trtllm.num_blocks"] == ceil(v["trtllm.max_tokens"] / 32)
    free = v["trtllm.free_memory_bytes"]
    assert v["trtllm.max_tokens"] == floor(Fraction(9, 10) * free / (4 * 8 * 128 * 2))


def test_trtllm_predicts_the_memory_its_profile_leaves(tmp_path):
    """KvCacheCreator: total - (weights + the activations of max_num_tokens + what lies outside torch)."""
    v = block_values(small(tmp_path), "d")
    activations = 8192 * v["forward_elements_per_token"] * 2
    outside_torch = Fraction("0.15") * GIB + Fraction("0.2") * GIB  # NCCL and workspaces, the CUDA context
    assert v["trtllm.activation_peak_bytes"] == activations
    assert v["trtllm.free_memory_bytes"] == 80 * GIB - v["weights_loaded_bytes_per_gpu"] - activations - outside_torch
    reserved = block_values(small(tmp_path, body="gpus = 1\n    reserve_bytes = 3 GiB"), "d")
    assert reserved["trtllm.free_memory_bytes"] == 80 * GIB - reserved["weights_bytes_per_gpu"] - 3 * GIB


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
    assert "sliding_pages = ceil(min(model.window - 1 tokens + in_flight_tokens, context) / sliding_block_size) + 1" in out
    assert "= 521" in out


def test_compare_explains_a_hybrid_mamba_deployment():
    out = cli("compare", SPECS / "engine_logs" / "v25_nemotron_3_nano_4b_gb10.kvspec").output
    assert "page_bytes = max(attention_block_size * bytes_per_token_per_layer, 0 B) = max(992 tokens * 2.00 KiB/token, 0 B) = 1.94 MiB" in out
    assert "= 992 tokens" in out
    assert "groups = full_groups + sliding_groups + state_groups = 1 + 0 + 6 = 7" in out
    assert "state_groups = ceil(model_state_layers / model_group_size) = ceil(21 / 4) = 6" in out
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


def test_llamacpp_separate_streams():
    """-np 3 without -kvu: each sequence its own stream of pad(n_ctx / 3, 256) cells."""
    spec = SPECS / "engine_logs" / "l03_qwen3_8b_131k.kvspec"
    block = "l03_qwen3_8b_131k"
    unified = block_values(spec, block, "context=10000", "batch=3")
    # -c 30000 pads to 30208 (118 x 256) cells, shared
    assert (unified["llamacpp.cells"], unified["llamacpp.streams"]) == (30208, 1)
    assert unified["llamacpp.k_bytes"] == 36 * 30208 * 8 * 128 * 2          # layers x cells x K elements x f16
    split = block_values(spec, block, "context=10000", "batch=3", "llamacpp.kv_unified=false")
    # 30208 // 3 = 10069, padded to 10240 (40 x 256), in 3 streams: 30720 cells
    assert (split["llamacpp.cells"], split["llamacpp.streams"]) == (10240, 3)
    assert split["llamacpp.kv_cache_tokens"] == 30720
    assert split["llamacpp.k_bytes"] == split["llamacpp.v_bytes"] == 36 * 30720 * 1024 * 2 == 2160 * MIB
    assert split["llamacpp.slot_context"] == 10240 and unified["llamacpp.slot_context"] == 30208 // 3
    assert split["llamacpp.max_concurrency"] == 3
    # two requests more than streams: none of them has a stream
    assert block_values(spec, block, "context=10000", "batch=3", "llamacpp.kv_unified=false",
                        "llamacpp.n_seq=2")["llamacpp.slot_context"] == 0


def test_llamacpp_separate_streams_sliding_window():
    spec = SPECS / "deployments" / "gpt_oss_120b_h100.kvspec"
    v = block_values(spec, "gpt_oss_120b_h100", "llamacpp.kv_unified=false")
    # per stream pad(min(n_ctx_seq, 128 + 512), 256) = 768, in 2 streams (batch 2); unified: pad(128 x 2 + 512) = 768 once
    assert v["llamacpp.swa_cells"] == 768 and v["llamacpp.streams"] == 2
    # gpt-oss-120b: 18 full and 18 sliding layers
    assert v["llamacpp.full_layer_cells"] == 18 * v["llamacpp.cells"] * 2
    assert v["llamacpp.sliding_layer_cells"] == 18 * 768 * 2


def test_llamacpp_separate_k_and_v_types():
    """-ctk q8_0 -ctv q4_0 on L03's cache (131072 cells, 36 layers, 8 x 128 per K and per V)."""
    spec = SPECS / "engine_logs" / "l03_qwen3_8b_131k.kvspec"
    v = block_values(spec, "l03_qwen3_8b_131k", "llamacpp.cache_type_k=q8_0", "llamacpp.cache_type_v=q4_0")
    assert v["llamacpp.k_bytes"] == 36 * 131072 * 1024 * Fraction(34, 32) == 4896 * MIB   # 34 bytes per 32
    assert v["llamacpp.v_bytes"] == 36 * 131072 * 1024 * Fraction(18, 32) == 2592 * MIB   # 18 bytes per 32
    assert v["llamacpp.kv_cache_bytes"] == 7488 * MIB
    q5 = block_values(spec, "l03_qwen3_8b_131k", "llamacpp.cache_type_v=q5_1")
    assert q5["llamacpp.v_bytes"] == 9216 * MIB * Fraction(24, 64) and q5["llamacpp.k_bytes"] == 9216 * MIB


def test_sglang_mamba_pool_comes_first():
    """Qwen3-Next-80B on 2 GPUs: 36 gated delta-net layers, 12 attention layers (2 KV heads of 256)."""
    spec = SPECS / "engine_logs" / "v23_qwen3_next_80b_h200x2.kvspec"
    v = block_values(spec, "v23_qwen3_next_80b_h200x2", "engine=sglang", "sglang.version=0.4",
                     "sglang.free_memory_bytes=100 GiB", "weights_loaded_bytes_per_gpu=70 GiB")
    # TP 2: 0.87 x 100 - 70 = 17 GiB left after the weights
    assert v["sglang.mem_fraction_static"] == Fraction("0.87")
    assert v["sglang.rest_memory_bytes"] == 17 * GIB
    # per request and GPU: 36 layers x (conv 8192 x 3 bf16 + state 4096 x 128 fp32) / 2 = 36 x 1,073,152 = 38,633,472 bytes
    assert v["sglang.mamba_cache_per_req"] == 36 * (8192 * 3 * 2 + 4096 * 128 * 4) // 2 == 38633472
    # 0.9 / 1.9 of 17 GiB holds floor(8,646,447,750.7 / 38,633,472) = 223 states
    assert v["sglang.max_mamba_cache_size"] == 223 == floor(Fraction(17 * GIB) * 9 / 19 / 38633472)
    # the rest, 17 GiB - 223 x 38,633,472 = 9,638,346,752 bytes, at 12 layers x 1 head x (256 + 256) x 2 = 12,288 bytes a token
    assert v["sglang.kv_bytes_per_token_per_gpu"] == 12 * 1 * 512 * 2
    assert v["sglang.kv_cache_tokens"] == 784370 == (17 * GIB - 223 * 38633472) // 12288
    # a third of the states serve requests at once (radix cache on): 74
    assert v["sglang.max_mamba_requests"] == 74
    assert v["sglang.max_concurrency"] == min(Fraction(784370, 262144), 74)
    no_mamba = block_values(SPECS / "engine_logs" / "s02_qwq_32b_l4x4.kvspec", "s02_qwq_32b_l4x4")
    assert no_mamba["sglang.mamba_pool_bytes"] == 0 and no_mamba["sglang.max_mamba_cache_size"] == 0


DSV32 = ('import "{models}/deepseek_v3_2_exp.kvspec"\nimport "{hardware}/h200.kvspec"\n'
         'deployment d "DeepSeek-V3.2-Exp on 8 x H200" {{\n    model = deepseek_v3_2_exp\n    hardware = h200\n'
         '    gpus = 8\n    context = 32K\n    kv_dtype = {dtype}\n}}\n')


def dsv32(tmp_path, dtype, *settings):
    """The deployment's cells, with the model's as model.x."""
    path = tmp_path / "dsv32.kvspec"
    path.write_text(DSV32.format(models=SPECS / "models", hardware=SPECS / "hardware", dtype=dtype))
    values = block_values(path, "d", *settings)
    values.update({f"model.{k}": v for k, v in block_values(path, "deepseek_v3_2_exp").items()})
    return values


def test_sparse_attention_indexer_bytes_per_token(tmp_path):
    """DeepSeek-V3.2-Exp config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128."""
    v = dsv32(tmp_path, "bf16")
    # the indexer: 128 FP8 bytes + 128 / 128 = 1 FP32 scale of 4 bytes = 132 bytes per token and layer
    assert v["model.index_bytes_per_token_per_layer"] == 132
    # the latent: (512 + 64) x 2 bytes = 1152; with the indexer 1284 per layer, x 61 = 78,324 bytes a token,
    # the same on every GPU (MLA and the indexer keys are not split by TP)
    assert v["model.kv_bytes_per_token"] == 61 * (576 * 2 + 132) == 78324
    # the deployment's ideal answers count the latent only (61 x 1152 = 70,272 bytes): see docs/engines.md
    assert v["ideal.kv_bytes_per_token_per_gpu"] == 61 * 1152 == 70272
    # SGLang's cell_size: (512 + 64) x 61 x 2 + (128 + 4) x 61 x 1 (get_cell_size_per_token), pages of 64 tokens
    assert v["sglang.kv_bytes_per_token_per_gpu"] == 576 * 61 * 2 + 132 * 61 == 78324
    assert v["sglang.page_size"] == 64 and v["sglang.kv_cache_tokens"] % 64 == 0
    # vLLM: one group of 61 MLA and 61 indexer layers; a block of 16 tokens costs 61 x 16 x (1152 + 132) bytes
    assert v["vllm.bytes_per_token_per_layer"] == 1284
    assert v["vllm.page_bytes"] * v["vllm.group_size"] == 61 * 16 * 1284
    # the model's sequence of 32K tokens: 32768 x 78,324 bytes
    assert v["model.kv_bytes_per_sequence"] == 32768 * 78324


def test_sparse_attention_indexer_with_fp8_latent(tmp_path):
    # vLLM's fp8_ds_mla latent: 656 bytes, the indexer 132 more: 788 bytes per token and layer
    v = dsv32(tmp_path, "fp8_ds_mla")
    assert v["vllm.bytes_per_token_per_layer"] == 656 + 132 == 788
    assert v["vllm.num_blocks"] == floor(v["vllm.kv_memory_bytes"] / (61 * 16 * 788))
    # SGLang sizes its FP8 pool at the 656 bytes each latent stores (0.5.23): 61 x (656 + 132) = 48,068 a token
    fp8 = dsv32(tmp_path, "fp8")
    assert fp8["sglang.kv_bytes_per_token_per_gpu"] == 61 * (656 + 132) == 48068
    # a model without an indexer pays nothing
    v3 = block_values(SPECS / "deployments" / "deepseek_v3_h200x8.kvspec", "deepseek_v3_h200x8", "kv_dtype=bf16")
    assert v3["vllm.bytes_per_token_per_layer"] == 1152 and v3["sglang.kv_bytes_per_token_per_gpu"] == 61 * 1152
