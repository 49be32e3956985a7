"""`kvdsl import`: published config.json files become model specs that agree with the catalog."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths
from kvdsl.errors import ConfigError, KvdslError
from kvdsl.hf import import_config, layer_pattern

from cli_helpers import cli as shared_cli
from test_configs import SPEC_OF as CATALOG_SPEC  # shared config -> the catalog spec it must agree with

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "tests" / "configs"
SHARED = FAMILIES   # the configs of ../shared/configs, copied byte for byte
SHARED_ORIGINALS = ROOT.parent / "shared" / "configs"

# Published totals (model cards / reports); the count must land within 1%.
PUBLISHED_PARAMS = {
    "meta-llama__Llama-3.1-8B.json": 8.03e9,
    "meta-llama__Llama-3.1-70B.json": 70.6e9,
    "mistralai__Mixtral-8x7B-v0.1.json": 46.7e9,
    "deepseek-ai__DeepSeek-V3.json": 671e9,
    "Qwen__Qwen3-235B-A22B.json": 235e9,
}
FAMILY_PARAMS = {  # tests/configs: the published totals of each model's language model
    "Qwen__Qwen3-0.6B.json": 0.6e9,
    "deepseek-ai__DeepSeek-V2-Lite.json": 15.7e9,
    "ai21labs__Jamba-v0.1.json": 51.6e9,        # transformers docs: "52B" total; the Hub lists 51.6B
    "microsoft__Phi-3-mini-4k-instruct.json": 3.82e9,
    "google__gemma-3-27b-it.json": 27.0e9,      # 27.4B with the 0.4B SigLIP encoder, not counted
    "google__gemma-3-4b-it.json": 3.88e9,       # 4.3B with the vision encoder
    "Qwen__Qwen3-Next-80B-A3B-Instruct.json": 80e9,
    "tiiuae__falcon-7b.json": 6.92e9,
    "Qwen__Qwen3-Coder-30B-A3B-Instruct.json": 30.5e9,
    "Qwen__QwQ-32B.json": 32.8e9,               # the Hub's safetensors count (the model card rounds to 32.5B)
    "nvidia__NVIDIA-Nemotron-3-Nano-4B-BF16.json": 3.97e9,
    "deepseek-ai__DeepSeek-V3.2-Exp.json": 671e9,   # DeepSeek-V3's 671B and the indexers; 685B on the Hub with the MTP layer
    "meta-llama__Llama-2-13b-hf.json": 13.0e9,      # Llama 2 paper: 13B
    "meta-llama__Llama-2-70b-hf.json": 69.0e9,      # the Hub's safetensors count (the paper says 70B)
    "mistralai__Mixtral-8x22B-v0.1.json": 141e9,    # Mistral: 141B total, 39B active
    "tiiuae__falcon-180B.json": 180e9,              # TII: 180B
}
CONTEXTS = ["1", "4096", "32K", "128K"]
CHECKED_CELLS = ["layers", "heads", "head_dim", "kv_lora_rank", "rope_head_dim", "full_layers", "sliding_layers",
                 "ssm_layers", "window", "ssm_inner", "ssm_state_size", "ssm_conv_kernel", "ssm_state_elements",
                 "kv_elements_per_layer", "kv_elements_per_token", "mha_elements_per_token"]

needs_shared = pytest.mark.skipif(not SHARED_ORIGINALS.is_dir(), reason="../shared/configs is not beside this checkout")


def cli(*args, code=0):
    return shared_cli(*args, code=code)


def write_config(tmp_path: Path, data, name="org__Model-7B.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def imported_values(tmp_path: Path, config: Path, *settings: str):
    spec = tmp_path / (config.stem + ".kvspec")
    spec.write_text(import_config(str(config)).render())
    from kvdsl.api import parse_setting

    return evaluate_paths([str(spec)], [parse_setting(s) for s in settings])[1]


def block_values(path, block, *settings):
    from kvdsl.api import parse_setting

    values = evaluate_paths([str(path)], [parse_setting(s) for s in settings])[1]
    return {cell: value for (b, cell), value in values.items() if b == block}


# ---------------------------------------------------------------- the shared configs

@needs_shared
def test_the_copies_of_the_shared_configs_are_byte_for_byte():
    for original in sorted(SHARED_ORIGINALS.glob("*.json")):
        assert (SHARED / original.name).read_bytes() == original.read_bytes(), original.name
    assert sorted(p.name for p in SHARED_ORIGINALS.glob("*.json")) == sorted(CATALOG_SPEC)


@pytest.mark.parametrize("config_name", sorted(CATALOG_SPEC))
def test_import_agrees_with_the_catalog_spec(tmp_path, config_name):
    block = CATALOG_SPEC[config_name]
    imported = import_config(str(SHARED / config_name))
    assert imported.name == block
    spec = tmp_path / f"{block}.kvspec"
    spec.write_text(imported.render())
    catalog = ROOT / "specs" / "models" / f"{block}.kvspec"
    for context in CONTEXTS:
        for dtype in ("fp16", "fp8", "q4_0"):
            settings = (f"context={context}", f"kv_dtype={dtype}")
            mine, theirs = block_values(spec, block, *settings), block_values(catalog, block, *settings)
            for cell in CHECKED_CELLS + ["kv_bytes_per_token", "kv_bytes_per_sequence", "state_bytes_per_sequence"]:
                assert mine[cell] == theirs[cell], (cell, context, dtype)
    mine, theirs = block_values(spec, block), block_values(catalog, block)
    if "max_position_embeddings" in json.loads((SHARED / config_name).read_text()):
        assert mine["context_limit"] == theirs["context_limit"]
    # Kimi K2's report gives 1.04T, more than the released checkpoint (num_nextn_predict_layers 0)
    # holds; the catalog spec notes that the config computes to 1.026e12.
    tolerance = 0.02 if block == "kimi_k2_instruct" else 0.01
    assert abs(mine["params"] / theirs["params"] - 1) < tolerance, "the count agrees with the catalog's cited total"
    assert mine["kv_heads"] == theirs["kv_heads"] or mine["mla"]


@pytest.mark.parametrize("config_name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_published_totals(config_name):
    count = import_config(str(SHARED / config_name)).params.total
    assert abs(count / PUBLISHED_PARAMS[config_name] - 1) < 0.01, count


def test_exact_counts_by_hand():
    # Llama-3.1-8B: embeddings and lm_head 128256 x 4096 each; per layer q,o 4096^2, k,v 4096 x 1024,
    # MLP 3 x 4096 x 14336, two norms; a final norm.
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert import_config(str(SHARED / "meta-llama__Llama-3.1-8B.json")).params.total == 2 * 128256 * 4096 + 32 * per_layer + 4096 == 8_030_261_248
    # DeepSeek-V3 without its MTP layer: 671.03e9, the 671B of the technical report.
    assert import_config(str(SHARED / "deepseek-ai__DeepSeek-V3.json")).params.total == 671_026_419_200
    # DeepSeek-V3.2-Exp: V3's shape and, in each of 61 layers, the indexer's wq_b 1536 x 64 x 128, wk 7168 x 128,
    # a LayerNorm of 128 (weight and bias) and weights_proj 7168 x 64
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    v32 = import_config(str(FAMILIES / "deepseek-ai__DeepSeek-V3.2-Exp.json"))
    assert v32.params.total == 671_026_419_200 + 61 * indexer == 671_877_944_064
    text = v32.render()
    assert "    index_head_dim = 128       # index_head_dim\n" in text and "    index_topk = 2048          # index_topk\n" in text
    assert "index_head_dim" not in import_config(str(SHARED / "deepseek-ai__DeepSeek-V3.json")).render()


def test_whole_folder_imports_and_checks(tmp_path):
    out = tmp_path / "models"
    out.mkdir()
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in CATALOG_SPEC:
        (folder / name).write_bytes((SHARED / name).read_bytes())
    result = cli("import", folder, "-o", out)
    written = sorted(p.name for p in out.glob("*.kvspec"))
    assert written == sorted(f"{b}.kvspec" for b in CATALOG_SPEC.values())
    assert "wrote" in result.output
    checked = cli("check", *sorted(out.glob("*.kvspec")))
    assert "ok: 15 models" in checked.output
    again = cli("import", folder, "-o", out, code=2)
    assert "exists: pass --force" in again.output
    cli("import", folder, "-o", out, "--force")


def test_each_cell_names_its_config_key():
    text = import_config(str(SHARED / "Qwen__Qwen3-8B.json")).render()
    assert "    head_dim = 128             # head_dim\n" in text
    assert "    kv_heads = 8               # num_key_value_heads\n" in text
    assert 'model qwen3_8b "Qwen3-8B" {' in text
    assert 'source = "Qwen/Qwen3-8B config.json (Qwen__Qwen3-8B.json)"' in text


def test_mla_keeps_the_latent_and_says_why():
    text = import_config(str(SHARED / "deepseek-ai__DeepSeek-V3.json")).render()
    assert "kv_lora_rank = 512" in text and "rope_head_dim = 64" in text
    assert "not what MLA caches" in text
    assert "weight_dtype = fp8_block128" in text
    assert "multi-token-prediction" in text


def test_mxfp4_experts(tmp_path):
    imported = import_config(str(SHARED / "openai__gpt-oss-20b.json"))
    assert imported.value("layer_kinds") == "[sliding(128), full] * 12"
    assert imported.value("expert_params") == str(24 * 32 * 3 * 2880 * 2880)
    assert imported.value("expert_weight_dtype") == "mxfp4"


# ---------------------------------------------------------------- families beyond the shared configs

@pytest.mark.parametrize("config_name", sorted(FAMILY_PARAMS))
def test_family_counts_match_published_totals(config_name):
    count = import_config(str(FAMILIES / config_name)).params.total
    assert abs(count / FAMILY_PARAMS[config_name] - 1) < 0.01, count


@pytest.mark.parametrize("config_name", sorted(p.name for p in FAMILIES.glob("*.json")))
def test_every_family_config_checks(tmp_path, config_name):
    values = imported_values(tmp_path, FAMILIES / config_name)
    assert values, "the spec evaluates"


def test_gemma3_text_config_and_library_defaults(tmp_path):
    v = imported_values(tmp_path, FAMILIES / "google__gemma-3-4b-it.json")
    model = "gemma_3_4b_it"
    # text_config leaves heads, KV heads and head_dim at Gemma3TextConfig's defaults: 8, 4, 256
    assert (v[(model, "heads")], v[(model, "kv_heads")], v[(model, "head_dim")]) == (8, 4, 256)
    # 34 layers, every 6th global: 5 full and 29 sliding (1024)
    assert (v[(model, "full_layers")], v[(model, "sliding_layers")], v[(model, "window")]) == (5, 29, 1024)
    imported = import_config(str(FAMILIES / "google__gemma-3-4b-it.json"))
    said = " ".join(a.message for a in imported.assumptions)
    for key in ("num_attention_heads", "num_key_value_heads", "head_dim"):
        assert f"text_config.{key}` is not set: using the Gemma 3 library default" in said
    big = imported_values(tmp_path, FAMILIES / "google__gemma-3-27b-it.json")
    catalog = block_values(ROOT / "specs" / "models" / "gemma_3_27b_it.kvspec", "gemma_3_27b_it")
    for cell in ("full_layers", "sliding_layers", "window", "kv_heads", "head_dim", "kv_elements_per_token"):
        assert big[("gemma_3_27b_it", cell)] == catalog[cell]


def test_jamba_layers_and_state(tmp_path):
    v = imported_values(tmp_path, FAMILIES / "ai21labs__Jamba-v0.1.json")
    catalog = block_values(ROOT / "specs" / "models" / "jamba_v0_1.kvspec", "jamba_v0_1")
    for cell in ("full_layers", "ssm_layers", "ssm_state_elements", "kv_elements_per_token"):
        assert v[("jamba_v0_1", cell)] == catalog[cell]
    for context in CONTEXTS:
        mine = block_values(tmp_path / "ai21labs__Jamba-v0.1.kvspec", "jamba_v0_1", f"context={context}")
        theirs = block_values(ROOT / "specs" / "models" / "jamba_v0_1.kvspec", "jamba_v0_1", f"context={context}")
        assert mine["kv_bytes_per_sequence"] == theirs["kv_bytes_per_sequence"]


def test_nemotron_h_pattern(tmp_path):
    pattern = "M-M-M-MM*-M-M*-M-M-M*-M-"
    config = {"model_type": "nemotron_h", "hidden_size": 1024, "num_hidden_layers": len(pattern), "hybrid_override_pattern": pattern,
              "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "mamba_num_heads": 32, "mamba_head_dim": 64,
              "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "intermediate_size": 4096, "vocab_size": 1000,
              "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
    v = imported_values(tmp_path, write_config(tmp_path, config, "nvidia__Nemotron-H-Tiny.json"))
    m = "nemotron_h_tiny"
    assert (v[(m, "full_layers")], v[(m, "ssm_layers")], v[(m, "mlp_layers")]) == (3, pattern.count("M"), pattern.count("-"))
    # Mamba-2 state: 32 heads x 64 x 128 plus (kernel - 1) inputs of 2048 + 2 x 8 x 128 conv channels
    assert v[(m, "ssm_state_elements")] == 32 * 64 * 128 + (2048 + 2 * 8 * 128) * 3
    assert v[(m, "kv_elements_per_token")] == 3 * 2 * 2 * 128
    # vLLM keeps Nemotron-H's SSM state in float32 unless the config's mamba_ssm_cache_dtype says otherwise
    assert v[(m, "ssm_state_dtype")] == "fp32" and v[(m, "conv_state_dtype")] == "fp16"
    assert v[(m, "state_bytes_per_layer")] == 32 * 64 * 128 * 4 + (2048 + 2 * 8 * 128) * 3 * 2
    half = import_config(str(write_config(tmp_path, {**config, "mamba_ssm_cache_dtype": "float16", "chunk_size": 128},
                                          "nvidia__Nemotron-H-Half.json")))
    assert half.value("ssm_state_dtype") == "fp16" and half.value("ssm_chunk_size") == "128"
    odd = import_config(str(write_config(tmp_path, {**config, "mamba_ssm_cache_dtype": "float8"}, "nvidia__Nemotron-H-Odd.json")))
    assert odd.value("ssm_state_dtype") is None
    assert any("`mamba_ssm_cache_dtype` `float8` is not a dtype kvdsl knows" in a.message for a in odd.assumptions)


def test_falcon_multi_query_and_new_architecture():
    small = import_config(str(FAMILIES / "tiiuae__falcon-7b.json"))
    assert (small.value("kv_heads"), small.value("head_dim")) == ("1", "64")
    large = import_config(str(FAMILIES / "tiiuae__falcon-40b.json"))
    assert (large.value("layers"), large.value("heads"), large.value("kv_heads")) == ("60", "128", "8")


def test_qwen3_next_linear_attention(tmp_path):
    v = imported_values(tmp_path, FAMILIES / "Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    m = "qwen3_next_80b_a3b_instruct"
    assert (v[(m, "full_layers")], v[(m, "ssm_layers")]) == (12, 36)
    # gated delta net: 32 value heads x 128 x 128 state, conv over 2 x 16 x 128 + 4096 channels, kernel 4
    assert v[(m, "ssm_state_elements")] == 32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3
    assert v[(m, "kv_elements_per_layer")] == 2 * 2 * 256


def test_qwen3_5_text_config_and_state_dtypes(tmp_path):
    """Qwen3.5-0.8B (the Hub's config.json): gated delta-net layers with a float32 recurrent state, under text_config."""
    path = FAMILIES / "Qwen__Qwen3.5-0.8B.json"
    text = json.loads(path.read_text())["text_config"]
    imported = import_config(str(path))
    assert imported.family == "Qwen3.5" and imported.value("ssm_state_dtype") == "fp32"
    spec = tmp_path / "qwen3_5.kvspec"
    spec.write_text(imported.render() + f"""
import "{(ROOT / 'specs' / 'hardware' / 'h200.kvspec').as_posix()}"
deployment qwen3_5_h200 "Qwen3.5-0.8B on one H200" {{
    model = qwen3_5_0_8b
    hardware = h200
    engine = vllm
    context = 32768
}}
deployment qwen3_5_h200_bf16_state "the same with --mamba-ssm-cache-dtype bfloat16" extends qwen3_5_h200 {{
    mamba_ssm_cache_dtype = bf16
}}
""")
    model = block_values(spec, "qwen3_5_0_8b")
    kinds = text["layer_types"]
    assert model["full_layers"] == kinds.count("full_attention") == 6
    assert model["ssm_layers"] == kinds.count("linear_attention") == 18
    assert (model["heads"], model["kv_heads"], model["head_dim"]) == (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"])
    assert model["ssm_recurrent_elements"] == text["linear_num_value_heads"] * text["linear_value_head_dim"] * text["linear_key_head_dim"]
    conv_dim = 2 * text["linear_num_key_heads"] * text["linear_key_head_dim"] + text["linear_num_value_heads"] * text["linear_value_head_dim"]
    assert model["ssm_conv_elements"] == conv_dim * (text["linear_conv_kernel_dim"] - 1)
    # the conv state in the model's dtype (2 bytes), the recurrent state in mamba_ssm_dtype float32 (4 bytes)
    assert model["state_bytes_per_layer"] == model["ssm_conv_elements"] * 2 + model["ssm_recurrent_elements"] * 4
    # vLLM (layers/mamba/mamba_utils.py gated_delta_net_state_shape, TP 1):
    #   conv state (kernel 4 - 1, 2 x 16 x 128 + 16 x 128 = 6144) bfloat16: 3 x 6144 x 2     =    36,864 B
    #   temporal state (16 value heads, 128, 128) float32:               16 x 128 x 128 x 4 = 1,048,576 B
    #   MambaSpec.page_size_bytes                                                              1,085,440 B
    # one token of one attention layer: 2 KV heads x (256 + 256) x 2 B = 2,048 B, so the
    # attention block is 16 x cdiv(1085440, 16 x 2048) = 16 x 34 = 544 tokens, a page of
    # 544 x 2048 = 1,114,112 B, and the Mamba page is padded by 2.64%
    v = block_values(spec, "qwen3_5_h200")
    assert v["vllm.state_bytes"] == 3 * 6144 * 2 + 16 * 128 * 128 * 4 == 1085440
    assert v["vllm.bytes_per_token_per_layer"] == 2048
    assert v["vllm.block_size"] == 544 and v["vllm.page_bytes"] == 544 * 2048
    assert f"{float((v['vllm.page_bytes'] - v['vllm.state_bytes']) / v['vllm.state_bytes'] * 100):.2f}" == "2.64"
    # 6 full and 18 delta-net layers: groups of 6, one full-attention group and 3 state groups;
    # a request of 32768 tokens takes cdiv(32768, 544) = 61 pages of the full group and one of each state group
    assert (v["vllm.groups"], v["vllm.group_size"], v["vllm.pages_per_request"]) == (4, 6, 61 + 3)
    # with the recurrent state in bfloat16 the state halves and the block with it: 16 x cdiv(561152, 32768) = 288
    half = block_values(spec, "qwen3_5_h200_bf16_state")
    assert half["vllm.state_bytes"] == 3 * 6144 * 2 + 16 * 128 * 128 * 2 and half["vllm.block_size"] == 288


def test_mamba_cache_modes_change_the_state_pages(tmp_path):
    spec = tmp_path / "modes.kvspec"
    spec.write_text(import_config(str(FAMILIES / "Qwen__Qwen3.5-0.8B.json")).render() + f"""
import "{(ROOT / 'specs' / 'hardware' / 'h200.kvspec').as_posix()}"
deployment d "Qwen3.5-0.8B" {{
    model = qwen3_5_0_8b
    hardware = h200
    engine = vllm
    context = 32768
}}
""")
    base = block_values(spec, "d")
    assert base["mamba_cache_mode"] == "none" and base["vllm.state_pages"] == 1
    # "align" keeps two pages a request, each draft token one more (MambaSpec.max_memory_usage_bytes)
    assert block_values(spec, "d", 'd.mamba_cache_mode="align"')["vllm.state_pages"] == 2
    drafts = block_values(spec, "d", 'd.mamba_cache_mode="align"', "d.num_speculative_tokens=3")
    assert drafts["vllm.state_pages"] == 5
    # and the conv state keeps 3 more inputs: (4 - 1 + 3) x 6144 x 2 B beside the float32 recurrent state
    assert drafts["vllm.state_bytes"] == 6 * 6144 * 2 + 16 * 128 * 128 * 4
    assert block_values(spec, "d", "d.num_speculative_blocks=2")["vllm.state_pages"] == 3
    # "all" (Mamba-2 models; vLLM refuses it for Qwen3.5) keeps a state per block, and the block is a
    # multiple of the scan's chunk: Nemotron-3-Nano-4B's 2,024,448-byte state is cdiv(2024448, 2048) = 989
    # tokens of fp8 attention, 256 x cdiv(989, 256) = 1024, and 8192 tokens take 8 state pages
    nemotron = ROOT / "specs" / "engine_logs" / "v25_nemotron_3_nano_4b_gb10.kvspec"
    every = block_values(nemotron, "v25_nemotron_3_nano_4b_gb10", 'v25_nemotron_3_nano_4b_gb10.mamba_cache_mode="all"')
    assert every["vllm.block_size"] == 1024 and every["vllm.state_pages"] == 8
    assert every["vllm.pages_per_request"] == 1 * 8 + 6 * 8
    with pytest.raises(KvdslError, match="mamba_cache_mode"):
        block_values(spec, "d", 'd.mamba_cache_mode="some"')


# ---------------------------------------------------------------- variations

BASE = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
        "hidden_size": 512, "intermediate_size": 1024, "vocab_size": 1000, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}


def variant(**changes):
    data = dict(BASE)
    for key, value in changes.items():
        if value is ...:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def import_error(tmp_path, data, strict=False) -> str:
    path = write_config(tmp_path, data)
    with pytest.raises(KvdslError) as caught:
        import_config(str(path), strict=strict)
    return caught.value.render()


def test_missing_key_is_named(tmp_path):
    message = import_error(tmp_path, variant(num_hidden_layers=...))
    assert "error: `num_hidden_layers` is missing" in message


@pytest.mark.parametrize("value, expect", [
    (0, "`num_hidden_layers` is 0: it must be at least 1"),
    (-3, "`num_hidden_layers` is -3: it must be at least 1"),
    ("32", 'must be a whole number, not "32"'),
    (2.5, "must be a whole number, not 2.5"),
    (True, "must be a whole number, not true"),
    (10**9, "it must be at most 100,000"),
])
def test_junk_values_are_refused_at_their_key(tmp_path, value, expect):
    message = import_error(tmp_path, variant(num_hidden_layers=value))
    assert expect in message
    assert message.startswith(f"{tmp_path / 'org__Model-7B.json'}:3:3: error:")
    assert '"num_hidden_layers"' in message.splitlines()[1] and "^" in message.splitlines()[2]


def test_errors_are_reported_together(tmp_path):
    message = import_error(tmp_path, variant(num_hidden_layers=0, hidden_size="wide"))
    assert "num_hidden_layers" in message and "hidden_size" in message


def test_invalid_json_points_at_the_mistake(tmp_path):
    path = write_config(tmp_path, '{\n  "num_hidden_layers": 32,\n  "hidden_size": 4096,,\n}\n')
    with pytest.raises(ConfigError) as caught:
        import_config(str(path))
    assert caught.value.render().startswith(f"{path}:3:23: error: invalid JSON: Expecting property name")


@pytest.mark.parametrize("text, kind", [("[1, 2]", "a list"), ('"llama"', "a string"), ("null", "null"), ("42", "a number")])
def test_json_that_is_not_an_object(tmp_path, text, kind):
    message = import_error(tmp_path, text)
    assert f"a config.json holds one JSON object, not {kind}" in message


def test_null_kv_heads_means_mha_with_a_warning(tmp_path):
    path = write_config(tmp_path, variant(num_key_value_heads=None))
    imported = import_config(str(path))
    assert imported.value("kv_heads") == "8"
    assert any("multi-head attention" in a.message for a in imported.assumptions)
    assert "# assumed: `num_key_value_heads` is not set" in imported.render()
    message = import_error(tmp_path, variant(num_key_value_heads=None), strict=True)
    assert "error: `num_key_value_heads` is not set" in message


def test_unknown_model_type_is_read_generically_or_refused_when_strict(tmp_path):
    path = write_config(tmp_path, variant(model_type="brand_new", head_dim=80))
    imported = import_config(str(path))
    assert imported.value("head_dim") == "80"
    assert any("`brand_new` is not one kvdsl knows" in a.message for a in imported.assumptions)
    assert "is not one kvdsl knows" in import_error(tmp_path, variant(model_type="brand_new"), strict=True)
    chunked = import_config(str(write_config(tmp_path, variant(model_type="llama4_text", attention_chunk_size=8192, global_attn_every_n_layers=4))))
    said = [a.message for a in chunked.assumptions]
    assert any("did not read `attention_chunk_size`, `global_attn_every_n_layers`" in m for m in said), said
    assert not any("did not read" in a.message for a in import_config(str(write_config(tmp_path, BASE))).assumptions)


def test_heads_must_share_kv_heads_evenly(tmp_path):
    assert "not a multiple of the 3 KV heads" in import_error(tmp_path, variant(num_key_value_heads=3))


def test_qwen2_sliding_window_only_when_enabled(tmp_path):
    qwen = variant(model_type="qwen2", sliding_window=4096, use_sliding_window=False, max_window_layers=2)
    assert import_config(str(write_config(tmp_path, qwen))).value("layer_kinds") is None
    qwen["use_sliding_window"] = True
    imported = import_config(str(write_config(tmp_path, qwen)))
    assert imported.value("layer_kinds") == "[full] * 2 + [sliding(4096)] * 2"
    mistral = variant(model_type="mistral", sliding_window=None)
    assert import_config(str(write_config(tmp_path, mistral))).value("layer_kinds") is None


def test_odd_layer_types(tmp_path):
    kinds = ["full_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
    data = variant(num_hidden_layers=5, layer_types=kinds, sliding_window=512)
    v = imported_values(tmp_path, write_config(tmp_path, data))
    assert (v[("model_7b", "full_layers")], v[("model_7b", "sliding_layers")]) == (2, 3)
    short = import_error(tmp_path, variant(layer_types=["full_attention"] * 3))
    assert "lists 3 layers but `num_hidden_layers` is 4" in short
    odd = import_error(tmp_path, variant(layer_types=["full_attention", "chunky", "full_attention", "x"]))
    assert "layer types kvdsl does not know: chunky, x" in odd


def test_layer_patterns_round_trip(tmp_path):
    rng = random.Random(7)
    for trial in range(40):
        n = rng.randint(1, 30)
        kinds = [rng.choice(["full", "sliding", "ssm"]) for _ in range(n)] if trial % 2 else (["sliding"] * 5 + ["full"]) * rng.randint(1, 5) + ["sliding"] * rng.randint(0, 3)
        pattern = layer_pattern(kinds, 64)
        spec = tmp_path / "p.kvspec"
        spec.write_text(f'model p "P" {{\n layer_kinds = {pattern}\n heads = 4\n kv_heads = 4\n head_dim = 8\n params = 1\n'
                        f' ssm_inner = 4\n ssm_state_size = 2\n}}\n')
        v = evaluate_paths([str(spec)])[1]
        for kind in ("full", "sliding", "ssm"):
            assert v[("p", f"{kind}_layers")] == kinds.count(kind), (kinds, pattern)
    assert layer_pattern(["sliding"] * 5 + ["full"] + ["sliding"] * 5 + ["full"] + ["sliding"] * 2, 1024) == \
        "[[sliding(1024)] * 5, full] * 2 + [sliding(1024)] * 2"


def test_weights_dtype_and_quantization(tmp_path):
    fp8 = import_config(str(write_config(tmp_path, variant(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]}))))
    assert fp8.value("weight_dtype") == "fp8_block128"
    awq = import_config(str(write_config(tmp_path, variant(quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128}))))
    assert awq.value("weight_dtype") == "int4_g128"
    odd = import_config(str(write_config(tmp_path, variant(quantization_config={"quant_method": "bitsandbytes"}))))
    assert any("quantization_config" in a.message for a in odd.assumptions)


# ---------------------------------------------------------------- the command

def test_cli_prints_to_stdout_and_writes_atomically(tmp_path):
    config = write_config(tmp_path, BASE)
    shown = cli("import", config)
    assert shown.output.startswith("# Model-7B (Llama architecture)")
    out = tmp_path / "m.kvspec"
    cli("import", config, "-o", out, "--name", "mine", "--title", "My model")
    assert 'model mine "My model" {' in out.read_text()
    assert "exists: pass --force" in cli("import", config, "-o", out, code=2).output
    assert "`1bad` is not a kvspec name" in cli("import", config, "--name", "1bad", code=2).output


def test_cli_errors_and_strict(tmp_path):
    broken = write_config(tmp_path, "{ not json", "broken.json")
    result = cli("import", broken, code=1)
    assert result.output.startswith(f"{broken}:1:3: error: invalid JSON")
    loose = write_config(tmp_path, variant(num_key_value_heads=None), "loose.json")
    assert "warning: `num_key_value_heads` is not set" in cli("import", loose).output
    assert "error: `num_key_value_heads` is not set" in cli("import", loose, "--strict", code=1).output
    assert "not found" in cli("import", tmp_path / "nope.json", code=2).output


def test_folder_with_one_broken_config_writes_the_others_and_exits_1(tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    write_config(folder, BASE, "a__Good.json")
    write_config(folder, variant(hidden_size=0), "b__Bad.json")
    write_config(folder, variant(num_hidden_layers=4), "c__AlsoGood.json")
    out = tmp_path / "out"
    out.mkdir()
    result = cli("import", folder, "-o", out, code=1)
    assert "`hidden_size` is 0" in result.output and f"not imported: {folder / 'b__Bad.json'}" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["alsogood.kvspec", "good.kvspec"]
    assert "wrote" in result.output and "Bad" not in "".join(p.read_text() for p in out.iterdir())
    (folder / "b__Bad.json").unlink()
    write_config(folder, BASE, "c__Other.json")
    assert "-o must name an existing directory" in cli("import", folder, "-o", tmp_path / "x.kvspec", code=2).output
    assert "--name and --title name one model" in cli("import", folder, "--name", "x", code=2).output


@pytest.mark.parametrize("config_name, spec", [
    ("Qwen__Qwen3-0.6B.json", "qwen3_0_6b"),
    ("deepseek-ai__DeepSeek-V2-Lite.json", "deepseek_v2_lite"),
    ("Qwen__Qwen3-Next-80B-A3B-Instruct.json", "qwen3_next_80b_a3b_instruct"),
    ("Qwen__Qwen3-Coder-30B-A3B-Instruct.json", "qwen3_coder_30b_a3b_instruct"),
    ("Qwen__QwQ-32B.json", "qwq_32b"),
    ("meta-llama__Llama-3.3-70B-Instruct.json", "llama_3_3_70b_instruct"),
    ("nvidia__NVIDIA-Nemotron-3-Nano-4B-BF16.json", "nvidia_nemotron_3_nano_4b_bf16"),
    ("deepseek-ai__DeepSeek-V3.2-Exp.json", "deepseek_v3_2_exp"),
    ("meta-llama__Llama-2-13b-hf.json", "llama_2_13b_hf"),
    ("meta-llama__Llama-2-70b-hf.json", "llama_2_70b_hf"),
    ("mistralai__Mixtral-8x22B-v0.1.json", "mixtral_8x22b_v0_1"),
    ("tiiuae__falcon-180B.json", "falcon_180b"),
])
def test_imported_catalog_specs_are_the_importers_output(config_name, spec):
    """These catalog specs are written by `kvdsl import tests/configs/X.json -o specs/models/`."""
    assert (ROOT / "specs" / "models" / f"{spec}.kvspec").read_text() == import_config(str(FAMILIES / config_name)).render()


# ---------------------------------------------------------------- families as data

def test_compressed_tensors_weights(tmp_path):
    def scheme(**weights):
        group = {"targets": ["Linear"], "weights": {"dynamic": False, "symmetric": True, **weights}}
        return variant(quantization_config={"quant_method": "compressed-tensors", "format": "float-quantized",
                                            "config_groups": {"group_0": group}, "ignore": ["lm_head"]})
    cases = [
        (dict(num_bits=8, type="float", strategy="channel", group_size=None, block_structure=None), "fp8"),
        (dict(num_bits=8, type="float", strategy="tensor", group_size=None), "fp8"),
        (dict(num_bits=8, type="float", strategy="block", block_structure=[128, 128], group_size=None), "fp8_block128"),
        (dict(num_bits=4, type="int", strategy="group", group_size=128), "int4_g128"),
        (dict(num_bits=4, type="float", strategy="tensor_group", group_size=16), "nvfp4"),
    ]
    for weights, dtype in cases:
        imported = import_config(str(write_config(tmp_path, scheme(**weights))))
        assert imported.value("weight_dtype") == dtype, weights
        assert not any("quantization_config" in a.message for a in imported.assumptions)
        assert "compressed-tensors" in next(c.comment for c in imported.cells if c.name == "weight_dtype")
    assert imported_values(tmp_path, write_config(tmp_path, scheme(**cases[3][0]))), "the spec evaluates"
    odd = import_config(str(write_config(tmp_path, scheme(num_bits=3, type="int", strategy="group", group_size=64))))
    assert odd.value("weight_dtype") == "bf16"
    assert any("compressed-tensors" in a.message and "is not one kvdsl reads" in a.message for a in odd.assumptions)


def test_a_family_is_one_row_of_the_table(tmp_path, monkeypatch):
    from kvdsl import hf

    def every_third_global(config, layers):
        return ["full" if i % 3 == 2 else "sliding" for i in range(layers)], "every third layer global"

    monkeypatch.setitem(hf.FAMILIES, "tiny_hybrid", hf.Family("Tiny", layer_kinds=every_third_global, qk_norm=True, tied=True))
    imported = import_config(str(write_config(tmp_path, variant(model_type="tiny_hybrid", num_hidden_layers=6, sliding_window=256))))
    assert imported.family == "Tiny"
    assert imported.value("layer_kinds") == "[[sliding(256)] * 2, full] * 2"
    assert "Layers: every third layer global; window 256 tokens." in imported.render()
    assert not imported.assumptions
    assert all(isinstance(family, hf.Family) for family in hf.FAMILIES.values())
    assert set(hf.ARCHITECTURES.values()) <= set(hf.FAMILIES)


def test_nemotron_h_experts_beside_dense_mlp_layers(tmp_path):
    pattern = "M-ME*E"
    config = {"model_type": "nemotron_h", "hidden_size": 256, "num_hidden_layers": len(pattern), "hybrid_override_pattern": pattern,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "mamba_num_heads": 8, "mamba_head_dim": 32,
              "ssm_state_size": 16, "n_groups": 1, "conv_kernel": 4, "intermediate_size": 512, "moe_intermediate_size": 128,
              "n_routed_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
              "torch_dtype": "bfloat16"}
    imported = import_config(str(write_config(tmp_path, config, "nvidia__Nemotron-H-MoE.json")))
    assert imported.value("intermediate_size") == "512"     # the `-` layer keeps its dense MLP
    assert imported.value("experts") == "4"
    no_dense = dict(config, hybrid_override_pattern="M*MEME", num_hidden_layers=6)
    assert import_config(str(write_config(tmp_path, no_dense, "nvidia__Nemotron-H-MoE.json"))).value("intermediate_size") is None
