"""`kvdsl import` and the files beside a config.json: the hub cache, the safetensors index, ignore lists.

The configs are the published ones of tests/configs; the files beside them
(the index, a quantization block) are written here with the figures a test
names, since a checkpoint's weights are not part of the repository.
"""

from __future__ import annotations

import json
import math
import struct
from fractions import Fraction
from pathlib import Path

import pytest

from cli_helpers import cli
from kvdsl.api import evaluate_paths
from kvdsl.hf import import_config
from kvdsl.hf_files import matches

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "configs"
QWEN3_8B = json.loads((CONFIGS / "Qwen__Qwen3-8B.json").read_text())

# Qwen3-8B: hidden 4096, 32 heads and 8 KV heads of 128, MLP 12288
Q_PROJ = O_PROJ = 4096 * 32 * 128
K_PROJ = V_PROJ = 4096 * 8 * 128
ATTENTION = Q_PROJ + K_PROJ + V_PROJ + O_PROJ + 2 * 128       # and the q and k norms
MLP = 3 * 4096 * 12288
TOTAL_SIZE = 8_190_735_360                                     # an index's metadata.total_size, in bytes


def snapshot(folder: Path, config: dict, total_size=None, quantizer=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    if total_size is not None:
        (folder / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total_size}, "weight_map": {"lm_head.weight": "model-00001-of-00005.safetensors"}}))
    if quantizer is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": quantizer}))
    return folder / "config.json"


def fp8(ignore: list, key: str = "ignore") -> dict:
    return dict(QWEN3_8B, quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic", key: ignore})


def cells(spec_text: str, tmp_path: Path, name: str) -> dict:
    path = tmp_path / f"{name}.kvspec"
    path.write_text(spec_text)
    values = evaluate_paths([str(path)])[1]
    return {cell: value for (block, cell), value in values.items() if block == name}


def test_hub_cache_import_by_id_offline(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = cache / "models--Qwen--Qwen3-8B"
    snapshot(repo / "snapshots" / "0123abc", QWEN3_8B, TOTAL_SIZE)
    snapshot(repo / "snapshots" / "old", dict(QWEN3_8B, num_hidden_layers=2))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    out = cli("import", "Qwen/Qwen3-8B", code=0).stdout
    assert 'hf_id = "Qwen/Qwen3-8B"' in out and "layers = 36" in out
    assert f"checkpoint_bytes = {TOTAL_SIZE} B" in out and "metadata.total_size" in out
    # the exact bytes are the weights vLLM loads
    v = cells(out + f'import "{ROOT}/specs/hardware/h100_sxm.kvspec"\n'
              'deployment d "d" {\n    model = qwen3_8b\n    hardware = h100_sxm\n    engine = vllm\n}\n', tmp_path, "d")
    assert v["weights_loaded_bytes"] == TOTAL_SIZE and v["weights_loaded_bytes_per_gpu"] == TOTAL_SIZE
    # HF_HOME/hub when HF_HUB_CACHE is not set
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert "layers = 36" in cli("import", "Qwen/Qwen3-8B", code=0).stdout


def test_an_id_that_is_not_cached_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    out = cli("import", "Qwen/Qwen3-8B", code=2).output
    assert "nor in the Hugging Face hub cache" in out and str(tmp_path / "empty") in out
    assert "hint: kvdsl does not fetch models: download it first (huggingface-cli download Qwen/Qwen3-8B config.json" in out


def test_a_single_safetensors_file_gives_its_tensor_bytes(tmp_path):
    config = snapshot(tmp_path / "m", QWEN3_8B)
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    (tmp_path / "m" / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(1000))
    assert import_config(str(config)).value("checkpoint_bytes") == "1000 B"


def test_fp8_checkpoint_keeps_its_ignored_modules_in_bf16(tmp_path):
    """An FP8 checkpoint whose ignore list names layer 0's attention and layer 35's MLP keeps them in BF16."""
    config = snapshot(tmp_path / "fp8", fp8(["lm_head", "model.layers.0.self_attn*", r"re:model\.layers\.35\.mlp.*"]))
    model = import_config(str(config))
    assert model.weight_dtype == "fp8"
    assert model.value("unquantized_params") == str(ATTENTION + MLP)
    v = cells(model.render() + f'import "{ROOT}/specs/hardware/h100_sxm.kvspec"\n'
              f'deployment d "d" {{\n    model = {model.name}\n    hardware = h100_sxm\n    engine = vllm\n}}\n', tmp_path, "d")
    params = int(model.value("params"))
    embeddings = 2 * 151936 * 4096          # untied: the embedding and the LM head stay BF16 too
    assert v["unquantized_params"] == ATTENTION + MLP
    assert v["weights_loaded_bytes"] == params * 1 + (embeddings + ATTENTION + MLP) * (2 - 1)


def published_tensors(folder: Path) -> list:
    """The tensors of a published checkpoint as listed beside its config: (name, count, elements, dtype, file)."""
    lines = (folder / "tensors.tsv").read_text().splitlines()[1:]
    rows = [line.split("\t") for line in lines]
    return [(name, int(count), math.prod(int(n) for n in shape.split("x")), dtype, file)
            for name, count, shape, dtype, file in rows]


def test_published_fp8_checkpoint_keeps_its_ignored_modules_in_bf16(tmp_path):
    """Qwen/Qwen3-30B-A3B-Thinking-2507-FP8: the published config's modules_to_not_convert (the LM head, the 48
    routers and the 96 layer norms) against the dtypes of the 37,491 tensors its safetensors files hold."""
    folder = CONFIGS / "Qwen__Qwen3-30B-A3B-Thinking-2507-FP8"
    tensors = published_tensors(folder)
    size = {"bfloat16": 2, "float8_e4m3fn": 1}
    stored = sum(count * elements * size[dtype] for _, count, elements, dtype, _ in tensors)
    assert sum(count for _, count, *_ in tensors) == 37_491 and stored == 31_170_895_872
    assert sum(count * elements for _, count, elements, *_ in tensors) == 30_533_947_392   # as listed, scales too
    bf16 = {name: count * elements for name, count, elements, dtype, _ in tensors if dtype == "bfloat16" and "scale" not in name}
    named = bf16["model.layers.0-47.mlp.gate.weight"] + bf16["model.layers.0-47.input_layernorm.weight"] + \
        bf16["model.layers.0-47.post_attention_layernorm.weight"]
    assert named == 12_779_520
    snap = tmp_path / "snapshot"
    snap.mkdir()
    (snap / "config.json").write_text((folder / "config.json").read_text())
    plain = import_config(str(snap / "config.json"))
    assert plain.weight_dtype == "fp8_block128" and plain.value("unquantized_params") == str(named)
    assert int(plain.value("params")) == 30_532_122_624   # every tensor but the 1,824,768 block scales
    # the index a checkpoint carries counts every tensor's bytes; its weight_map names each tensor's shard
    (snap / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": stored},
        "weight_map": {name: file for name, _, _, _, file in tensors if file.startswith("model-")}}))
    model = import_config(str(snap / "config.json"))
    assert model.value("checkpoint_bytes") == f"{stored} B"
    deployment = (f'import "{ROOT}/specs/hardware/h100_sxm.kvspec"\n'
                  'deployment d "d" {{\n    model = {}\n    hardware = h100_sxm\n    engine = vllm\n}}\n')
    loaded = cells(model.render() + deployment.format(model.name), tmp_path, "d")
    assert loaded["weights_loaded_bytes"] == stored
    # without the index: every weight at 1 B with an FP32 scale per 128 x 128 block, the embeddings, the LM head and
    # the named modules at 2 B; the checkpoint's scales are BF16 and its q and k norms BF16 too
    estimated = cells(plain.render() + deployment.format(plain.name), tmp_path, "d")["weights_loaded_bytes"]
    assert 0 < Fraction(estimated - stored) / stored < Fraction(2, 10_000)


@pytest.mark.parametrize("patterns, kept", [
    (["model.layers.1.self_attn.q_proj"], Q_PROJ),                       # one projection
    (["self_attn"], 36 * ATTENTION),                                      # transformers' part-of-a-name match
    (["model.layers.*.self_attn.k_proj", "model.layers.*.self_attn.v_proj"], 36 * (K_PROJ + V_PROJ)),
    (["re:.*layers\\.(0|1)\\.mlp$"], 2 * MLP),
    (["lm_head", "model.embed_tokens"], None),                            # counted anyway as the embeddings
])
def test_ignore_patterns_name_modules_as_quantizers_do(tmp_path, patterns, kept):
    model = import_config(str(snapshot(tmp_path / "q", fp8(patterns, "modules_to_not_convert"))))
    assert model.value("unquantized_params") == (str(kept) if kept else None)


def test_modelopt_exclude_modules_beside_the_config(tmp_path):
    config = dict(QWEN3_8B, quantization_config={"quant_method": "fp8"})
    path = snapshot(tmp_path / "mo", config, quantizer={"quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.3.mlp"]})
    model = import_config(str(path))
    assert model.value("unquantized_params") == str(MLP)
    assert "hf_quant_config.json quantization.exclude_modules" in model.render()


def test_pattern_matching():
    assert matches("backbone.layers.*.mixer", "model.layers.4.mixer")
    assert matches("re:.*mlp.gate$", "model.layers.2.mlp.gate") and not matches("re:.*mlp.gate$", "model.layers.2.mlp.gate_proj")
    assert not matches("mlp", "model.layers.2.self_attn.q_proj") and not matches("model.layers.1.mlp", "model.layers.11.mlp")


def test_top_k_experts(tmp_path):
    """google/gemma-4-26B-A4B names its routed experts per token `top_k_experts`."""
    config = json.loads((CONFIGS / "Qwen__Qwen3-Coder-30B-A3B-Instruct.json").read_text())
    config["top_k_experts"] = config.pop("num_experts_per_tok")
    model = import_config(str(snapshot(tmp_path / "g", config)))
    assert model.value("experts_per_token") == "8" and "top_k_experts" in model.render()


def test_a_prediction_without_hidden_size_or_vocab_size_says_so(tmp_path):
    spec = (f'import "{ROOT}/specs/hardware/h100_sxm.kvspec"\n'
            'model bare "no sizes" {\n    layers = 32\n    heads = 32\n    kv_heads = 8\n    head_dim = 128\n    params = 8e9\n}\n'
            'deployment d "d" {\n    model = bare\n    hardware = h100_sxm\n    engine = vllm\n    context = 8192\n}\n')
    v = cells(spec, tmp_path, "d")
    assert v["caveat"].startswith("the KV memory is predicted without the model's hidden_size and vocab_size")
    assert v["verdict"].endswith("(" + v["caveat"] + ")") and v["profile_peak_bytes"] == 0
    given = cells(spec.replace("    context = 8192\n", "    context = 8192\n    kv_cache_memory_bytes = 40 GiB\n"), tmp_path, "d")
    assert given["caveat"] == "" and "(" not in given["verdict"].split("fit)")[-1]
    sized = cells(spec.replace("params = 8e9", "params = 8e9\n    hidden_size = 4096\n    vocab_size = 128256"), tmp_path, "d")
    assert sized["caveat"] == "" and sized["profile_peak_bytes"] > 0
    assert Fraction(sized["vllm.kv_memory_bytes"]) < Fraction(v["vllm.kv_memory_bytes"])
