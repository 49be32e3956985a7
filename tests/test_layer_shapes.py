"""Layers of different shapes: a sliding layer may carry its own KV heads and head sizes.

Gemma 4 31B (google/gemma-4-31B config.json, text_config): 60 layers, every
sixth a global (full-attention) layer; sliding layers have 16 KV heads of 256
and a 1,024-token window, global layers 4 KV heads (`num_global_key_value_heads`)
of 512 (`global_head_dim`).  In bf16 one token costs the 50 sliding layers
50 x 16 x (256 + 256) x 2 B = 800 KiB and the 10 global layers
10 x 4 x (512 + 512) x 2 B = 80 KiB.
"""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths
from kvdsl.errors import KvdslError, flatten

KIB, GIB = 1024, 2**30
CATALOG = Path(__file__).resolve().parents[1] / "specs" / "catalog.kvspec"

GEMMA4 = """
model gemma4 "Gemma-4-31B-like" {{
    layer_kinds = [[sliding(1024, kv_heads = 16, head_dim = 256)] * 5, full] * 10
    heads = 32
    kv_heads = 4
    head_dim = 512
    params = 31e9
    {extra}
}}
deployment on_h100 "on H100s" {{
    model = gemma4
    hardware = h100_sxm
    gpus = {gpus}
    context = 16K
}}
"""


def values(tmp_path: Path, extra: str = "", gpus: int = 1, pattern: str = None):
    text = f'import "{CATALOG}"\n' + GEMMA4.format(extra=extra, gpus=gpus)
    if pattern:
        text = text.replace("[[sliding(1024, kv_heads = 16, head_dim = 256)] * 5, full] * 10", pattern)
    path = tmp_path / "g4.kvspec"
    path.write_text(textwrap.dedent(text))
    program, vals = evaluate_paths([str(path)])
    return {k[1]: v for k, v in vals.items() if k[0] == "gemma4"}, {k[1]: v for k, v in vals.items() if k[0] == "on_h100"}


def test_a_sliding_layer_with_its_own_shape(tmp_path):
    model, _ = values(tmp_path)
    assert (model["sliding_layers"], model["full_layers"], model["window"]) == (50, 10, 1024)
    assert (model["sliding_kv_heads"], model["sliding_k_head_dim"], model["sliding_v_head_dim"]) == (16, 256, 256)
    assert model["sliding_elements_per_token"] == 50 * 16 * 512
    assert model["full_elements_per_token"] == 10 * 4 * 1024
    assert model["kv_bytes_per_token"] == 800 * KIB + 80 * KIB


def test_without_a_shape_sliding_layers_take_the_models(tmp_path):
    model, _ = values(tmp_path, pattern="[[sliding(1024)] * 5, full] * 10")
    assert model["sliding_kv_heads"] == 4 and model["sliding_k_head_dim"] == 512
    assert model["kv_bytes_per_token"] == 60 * 4 * 1024 * 2


def test_tensor_parallel_splits_each_kind_by_its_own_heads(tmp_path):
    _, four = values(tmp_path, gpus=8)
    # 16 sliding KV heads over 8 GPUs: 2 each; 4 global KV heads: replicated, 1 each
    assert four["sliding_kv_heads_per_gpu"] == 2 and four["kv_heads_per_gpu"] == 1
    per_stage = Fraction(50) * 2 * 512 * 2 + Fraction(10) * 1 * 1024 * 2
    assert four["sliding_bytes_per_token"] + four["full_bytes_per_token"] == per_stage


def test_k_and_v_head_sizes_apart(tmp_path):
    model, _ = values(tmp_path, pattern="[[sliding(1024, kv_heads = 16, k_head_dim = 192, v_head_dim = 128)] * 5, full] * 10")
    assert model["sliding_elements_per_token"] == 50 * 16 * (192 + 128)


@pytest.mark.parametrize("pattern, message", [
    ("[[sliding(1024, kv_heads = 16)] * 5, full(kv_heads = 2)] * 10", "only `sliding` layers take a shape of their own"),
    ("[[sliding(1024, kv_head = 16)] * 5, full] * 10", "a layer's shape has no `kv_head`"),
    ("[[sliding(1024, kv_heads = 16)] * 4, sliding(1024, kv_heads = 8), full] * 10", "every `sliding` layer of a pattern must have the same shape"),
    ("[[sliding(1024, kv_heads = 1.5)] * 5, full] * 10", "`kv_heads` is a whole number"),
    ("[[sliding(1024, 16)] * 5, full] * 10", "a layer kind takes one plain argument"),
])
def test_shape_mistakes_are_positioned_errors(tmp_path, pattern, message):
    with pytest.raises(KvdslError) as caught:
        values(tmp_path, pattern=pattern)
    errors = flatten(caught.value)
    assert any(message in e.message for e in errors), [e.message for e in errors]
    assert all(e.span is not None and e.span.path.endswith("g4.kvspec") for e in errors)


def test_a_shape_set_twice_is_an_error(tmp_path):
    with pytest.raises(KvdslError) as caught:
        values(tmp_path, extra="sliding_kv_heads = 8")
    assert "`sliding_kv_heads` is set both by the layer pattern and explicitly" in str(flatten(caught.value)[0].message)


def test_the_catalogs_gemma_4_31b():
    program, vals = evaluate_paths([str(CATALOG.parent / "models" / "gemma_4_31b.kvspec")])
    model = {k[1]: v for k, v in vals.items() if k[0] == "gemma_4_31b"}
    assert model["kv_bytes_per_token"] == 800 * KIB + 80 * KIB
    assert model["scheme"] == "GQA 10 full + 50 sliding(1024)"
    # multi-head attention at each layer's head size: 2 x 32 x (10 x 512 + 50 x 256) elements
    assert model["mha_elements_per_token"] == 2 * 32 * (10 * 512 + 50 * 256)


def test_llamacpp_rows_of_each_kind_in_its_own_shape(tmp_path):
    """llama.cpp keeps a K and a V row per cell and layer: 16 x 256 for the local layers, 4 x 512 for the global ones."""
    text = f'import "{CATALOG}"\n' + GEMMA4.format(extra="", gpus=1).replace("context = 16K", "context = 16K\n    engine = llamacpp")
    path = tmp_path / "g4.kvspec"
    path.write_text(text)
    _, vals = evaluate_paths([str(path)])
    d = {k[1]: v for k, v in vals.items() if k[0] == "on_h100"}
    assert d["llamacpp.sliding_k_bytes_per_cell"] == 16 * 256 * 2 and d["llamacpp.k_bytes_per_cell"] == 4 * 512 * 2
    # 16,384 cells in the 10 global layers, pad(1024 + 512) = 1,536 cells in the 50 local ones
    assert d["llamacpp.k_bytes"] == 10 * 16384 * 4096 + 50 * 1536 * 8192
    assert d["engine_kv_bytes_per_token_per_gpu"] == 880 * KIB


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_pool_engines_price_a_token_in_each_kinds_shape(tmp_path, engine):
    text = f'import "{CATALOG}"\n' + GEMMA4.format(extra="", gpus=1).replace("context = 16K", f"context = 16K\n    engine = {engine}")
    path = tmp_path / "g4.kvspec"
    path.write_text(text)
    _, vals = evaluate_paths([str(path)])
    d = {k[1]: v for k, v in vals.items() if k[0] == "on_h100"}
    assert d["engine_kv_bytes_per_token_per_gpu"] == 880 * KIB


def test_vllm_pads_pages_to_the_larger_kind(tmp_path):
    """vLLM (kv_cache_utils.py unify_kv_cache_spec_page_size): 16 local tokens of 16 x 512 x 2 B make a
    256 KiB page; a global layer's token is 4 x 1024 x 2 B = 8 KiB, so its block holds 32 tokens."""
    text = f'import "{CATALOG}"\n' + GEMMA4.format(extra="", gpus=1).replace("context = 16K", "context = 16K\n    engine = vllm")
    path = tmp_path / "g4.kvspec"
    path.write_text(text)
    _, vals = evaluate_paths([str(path)])
    d = {k[1]: v for k, v in vals.items() if k[0] == "on_h100"}
    assert d["vllm.page_bytes"] == 256 * KIB
    assert (d["vllm.sliding_block_size"], d["vllm.block_size"]) == (16, 32)
    # 50 sliding layers in 5 groups of 10 and the 10 full ones in a sixth
    assert (d["vllm.groups"], d["vllm.group_size"]) == (6, 10)
    # a request of 16K tokens: 512 full pages, min(1023 + 2 x 8192 tokens in flight, 16,384) / 16 + 1 = 1,025 pages
    # in each sliding group (the window reaches past the context)
    assert d["vllm.pages_per_request"] == 512 + 5 * 1025
