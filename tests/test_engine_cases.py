"""Figures real engines gave for settings users pass, as deployments (tests/engine_cases/).

Each deployment there states what the engine it runs (`engine = ...`) logged
or computed as `expect_X` cells; that engine's `ENGINE.X` must be the same,
exactly.  The refusals are checked as errors that quote the engine's words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths, parse_setting
from kvdsl.errors import KvdslError

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "tests" / "engine_cases").glob("*.kvspec"))
EXPECT = "expect_"


def deployments(path: Path) -> dict:
    values = evaluate_paths([str(path)], [])[1]
    blocks: dict = {}
    for (block, cell), value in values.items():
        blocks.setdefault(block, {})[cell] = value
    return {name: cells for name, cells in blocks.items() if any(c.startswith(EXPECT) for c in cells)}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_engine_gives_what_it_logged(path):
    found = deployments(path)
    assert found, f"{path.name} has no deployment"
    for name, cells in found.items():
        engine = str(cells["engine"])
        expected = {cell[len(EXPECT):]: value for cell, value in cells.items() if cell.startswith(EXPECT)}
        got = {cell: cells[f"{engine}.{cell}"] for cell in expected}
        assert got == expected, name


LLAMACPP = ROOT / "tests" / "engine_cases" / "llamacpp.kvspec"


@pytest.mark.parametrize("settings, words", [
    # llama_init_from_model: a quantized V cache with -fa off
    (["lc_gpt_oss_b256.kv_dtype=q8_0", 'lc_gpt_oss_b256.llamacpp.flash_attention="off"'],
     "quantized V cache requires flash_attn to be enabled"),
    # -ctk q8_0 on heads of 80 with flash attention on or auto (Phi-2's geometry)
    (["phi_80.kv_dtype=q8_0"], "K cache type q8_0 with block size 32 does not divide n_embd_head_k=80"),
    (["phi_80.llamacpp.cache_type_k=q4_0", 'phi_80.llamacpp.flash_attention="on"'],
     "K cache type q4_0 with block size 32 does not divide n_embd_head_k=80"),
    # MLA (deepseek2) with different K and V types
    (["mla.llamacpp.cache_type_k=q8_0"], "model does not support different K (q8_0) and V (f16) cache types"),
])
def test_llamacpp_refuses_in_its_own_words(tmp_path, settings, words):
    spec = tmp_path / "refused.kvspec"
    spec.write_text(f'import "{LLAMACPP}"\nimport "{ROOT}/specs/models/deepseek_v2_lite.kvspec"\n'
                    'model head_80 "heads of 80" {\n    layers = 32\n    heads = 32\n    head_dim = 80\n    params = 2.7e9\n}\n'
                    'deployment phi_80 "heads of 80" extends lc_gpt_oss_b256 {\n    model = head_80\n}\n'
                    'deployment mla "DeepSeek-V2-Lite" extends lc_gpt_oss_b256 {\n    model = deepseek_v2_lite\n}\n')
    evaluate_paths([str(spec)], [])          # every setting alone starts
    with pytest.raises(KvdslError) as caught:
        evaluate_paths([str(spec)], [parse_setting(s) for s in settings])
    assert words in caught.value.render() and "refusal" in caught.value.render()


def test_llamacpp_flash_attention_off_with_a_quantized_k_only_starts(tmp_path):
    # heads of 80 with -ctk q8_0 but -fa off: the block check applies only with flash attention
    spec = tmp_path / "k.kvspec"
    spec.write_text(f'import "{LLAMACPP}"\n'
                    'model head_80 "heads of 80" {\n    layers = 32\n    heads = 32\n    head_dim = 80\n    params = 2.7e9\n}\n'
                    'deployment phi_80 "heads of 80" extends lc_gpt_oss_b256 {\n    model = head_80\n'
                    '    llamacpp.cache_type_k = q8_0\n    llamacpp.flash_attention = "off"\n}\n')
    values = evaluate_paths([str(spec)], [])[1]
    assert values[("phi_80", "llamacpp.refusal")] == "" and values[("phi_80", "llamacpp.flash_attention_on")] is False
    assert "-fa off -ctk q8_0" not in values[("phi_80", "launch_command")]
    assert values[("phi_80", "launch_command")].endswith(" -b 256 -fa off")


def test_llamacpp_flash_attention_auto_on_cuda_follows_ggml_cuda_kernels(tmp_path):
    """`-fa auto` on a CUDA device: on when ggml_cuda_get_best_fattn_kernel has a kernel for the layers' K and V
    heads, GQA ratio and cache types (ggml-cuda/fattn.cu), else off; a quantized V turns it on regardless."""
    models = {  # name: (heads, kv_heads, K head, V head, kv_lora_rank, rope_head_dim)
        "mha_512": (8, 8, 512, 512, 0, 0), "gqa_512": (8, 4, 512, 512, 0, 0),
        "mimo_192": (64, 8, 192, 128, 0, 0), "gqa4_192": (32, 8, 192, 128, 0, 0),
        "mla_320": (32, 32, 128, 128, 256, 64), "mla_320_16": (16, 16, 128, 128, 256, 64),
        "k128_v64": (32, 8, 128, 64, 0, 0), "gqa_128": (32, 8, 128, 128, 0, 0), "mha_80": (32, 32, 80, 80, 0, 0),
    }
    text = f'import "{LLAMACPP}"\nimport "{ROOT}/specs/models/deepseek_v2_lite.kvspec"\n'
    for name, (heads, kv_heads, k, v, lora, rope) in models.items():
        text += (f'model m_{name} "{name}" {{\n    layers = 4\n    heads = {heads}\n    kv_heads = {kv_heads}\n    head_dim = {k}\n'
                 f'    k_head_dim = {k}\n    v_head_dim = {v}\n    kv_lora_rank = {lora}\n    rope_head_dim = {rope}\n    params = 1e9\n}}\n'
                 f'deployment {name} "{name}" extends lc_gpt_oss_b256 {{\n    model = m_{name}\n}}\n')
    text += ('deployment mla_576 "DeepSeek-V2-Lite" extends lc_gpt_oss_b256 {\n    model = deepseek_v2_lite\n}\n'
             'deployment k_q8_0 "-ctk q8_0" extends gqa_128 {\n    llamacpp.cache_type_k = q8_0\n}\n'
             'deployment kv_q8_0 "-ctk q8_0 -ctv q8_0" extends gqa_128 {\n    kv_dtype = q8_0\n}\n'
             'deployment kv_q4_1 "-ctk q4_1 -ctv q4_1" extends gqa_128 {\n    kv_dtype = q4_1\n}\n'
             'deployment k_q4_1 "-ctk q4_1" extends gqa_128 {\n    llamacpp.cache_type_k = q4_1\n}\n')
    spec = tmp_path / "fa.kvspec"
    spec.write_text(text)
    values = evaluate_paths([str(spec)], [])[1]
    on = {name for name in [*models, "mla_576", "k_q8_0", "kv_q8_0", "kv_q4_1", "k_q4_1"] if values[(name, "llamacpp.flash_attention_on")]}
    # K 512 needs the GQA kernels; 192/128 a GQA ratio of 8k, 320/256 of 32k; V as wide as K below 512; K and V of
    # one type among f16, bf16, q8_0 and q4_0 (q4_1 V is quantized: turned on anyway)
    assert on == {"gqa_512", "mimo_192", "mla_320", "mla_576", "gqa_128", "mha_80", "kv_q8_0", "kv_q4_1"}


def test_sglang_kv_size_counts_the_indexer(tmp_path):
    """DeepSeek-V3.2 on SGLang with an FP8 cache: the log's "KV size" is (tokens + page) x 48,068 B, each of the
    61 layers storing a 656-byte latent (512 FP8 + 4 FP32 scales + 64 BF16 RoPE) and the indexer's 132 bytes."""
    spec = tmp_path / "nsa.kvspec"
    spec.write_text(f'import "{ROOT}/specs/models/deepseek_v3_2_exp.kvspec"\nimport "{ROOT}/specs/hardware/h200.kvspec"\n'
                    'deployment nsa "DeepSeek-V3.2-Exp on 8 x H200, SGLang, FP8 cache" {\n    model = deepseek_v3_2_exp\n'
                    '    hardware = h200\n    gpus = 8\n    engine = sglang\n    kv_dtype = fp8\n}\n')
    values = evaluate_paths([str(spec)], [parse_setting("nsa.sglang.kv_cache_tokens=975424 tokens")])[1]
    v = {cell: value for (block, cell), value in values.items() if block == "nsa"}
    padded = 975424 + 64
    assert v["sglang.page_size"] == 64
    assert v["sglang.kv_bytes"] == padded * 48068 and v["sglang.index_bytes"] == padded * 61 * 132
    assert v["sglang.k_bytes"] == padded * 61 * 656 and v["sglang.v_bytes"] == 0
    # the pool is sized at what each latent stores (0.5.23's pool configurator): 61 x (656 + 132) a token
    assert v["sglang.kv_bytes_per_token_per_gpu"] == 61 * (656 + 132)
    gib = 1 << 30
    assert (f"{float(v['sglang.k_bytes'] / gib):.2f}", f"{float(v['sglang.kv_bytes'] / gib):.2f}") == ("36.35", "43.67")
