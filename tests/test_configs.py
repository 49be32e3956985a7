"""Every model spec agrees with the published config.json it cites (../shared/configs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "configs"   # holds copies of ../shared/configs

SPEC_OF = {
    "Qwen__Qwen2.5-7B.json": "qwen2_5_7b",
    "Qwen__Qwen3-235B-A22B.json": "qwen3_235b_a22b",
    "Qwen__Qwen3-32B.json": "qwen3_32b",
    "Qwen__Qwen3-8B.json": "qwen3_8b",
    "deepseek-ai__DeepSeek-V3.json": "deepseek_v3",
    "google__gemma-2-9b-it.json": "gemma_2_9b_it",
    "meta-llama__Llama-2-7b-hf.json": "llama_2_7b_hf",
    "meta-llama__Llama-3.1-70B.json": "llama_3_1_70b",
    "meta-llama__Llama-3.1-8B.json": "llama_3_1_8b",
    "mistralai__Mistral-7B-v0.1.json": "mistral_7b_v0_1",
    "mistralai__Mixtral-8x7B-v0.1.json": "mixtral_8x7b_v0_1",
    "moonshotai__Kimi-K2-Instruct.json": "kimi_k2_instruct",
    "openai__gpt-oss-20b.json": "gpt_oss_20b",
    "state-spaces__mamba-2.8b-hf.json": "mamba_2_8b_hf",
    "zai-org__GLM-4.5.json": "glm_4_5",
}



@pytest.fixture(scope="module")
def values():
    _, values = evaluate_paths([str(ROOT / "specs" / "models" / f"{block}.kvspec") for block in SPEC_OF.values()])
    return values


def test_every_shared_config_has_a_spec():
    shared = ROOT.parent / "shared" / "configs"
    if shared.is_dir():
        assert sorted(p.name for p in shared.glob("*.json")) == sorted(SPEC_OF)
    assert all((CONFIGS / name).is_file() for name in SPEC_OF)


@pytest.mark.parametrize("config_name", sorted(SPEC_OF))
def test_spec_copies_its_config(values, config_name):
    config = json.loads((CONFIGS / config_name).read_text())
    block = SPEC_OF[config_name]
    v = lambda cell: values[(block, cell)]  # noqa: E731
    assert v("layers") == config["num_hidden_layers"]
    spec_text = (ROOT / "specs" / "models" / f"{block}.kvspec").read_text()
    assert config_name in spec_text, "the spec cites its config file"
    if config.get("model_type") == "mamba":
        assert v("ssm_layers") == config["num_hidden_layers"]
        assert v("ssm_inner") == config["intermediate_size"]
        assert v("ssm_state_size") == config["state_size"]
        assert v("ssm_conv_kernel") == config["conv_kernel"]
        return
    assert v("heads") == config["num_attention_heads"]
    if "kv_lora_rank" in config:  # MLA: the latent, not num_key_value_heads, is what is cached
        assert v("kv_lora_rank") == config["kv_lora_rank"]
        assert v("rope_head_dim") == config["qk_rope_head_dim"]
        assert v("kv_elements_per_layer") == config["kv_lora_rank"] + config["qk_rope_head_dim"]
    else:
        assert v("kv_heads") == config["num_key_value_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        assert v("head_dim") == head_dim
        assert v("kv_elements_per_layer") == 2 * config["num_key_value_heads"] * head_dim
    assert v("context_limit") == config["max_position_embeddings"]


@pytest.mark.parametrize("config_name", sorted(SPEC_OF))
def test_windows_follow_the_config(values, config_name):
    config = json.loads((CONFIGS / config_name).read_text())
    block = SPEC_OF[config_name]
    v = lambda cell: values[(block, cell)]  # noqa: E731
    layers = config["num_hidden_layers"]
    if "layer_types" in config:  # gpt-oss lists each layer
        assert v("sliding_layers") == config["layer_types"].count("sliding_attention")
        assert v("full_layers") == config["layer_types"].count("full_attention")
        assert v("window") == config["sliding_window"]
    elif config.get("model_type") == "gemma2":  # alternate layers, set by the model code
        assert (v("sliding_layers"), v("full_layers")) == (layers // 2, layers - layers // 2)
        assert v("window") == config["sliding_window"]
    elif config.get("model_type") == "mistral" and config.get("sliding_window"):
        assert v("sliding_layers") == layers and v("window") == config["sliding_window"]
    elif config.get("model_type") != "mamba":  # no window, or `use_sliding_window: false` (Qwen2.5)
        assert v("sliding_layers") == 0 and v("full_layers") == layers
