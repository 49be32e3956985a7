"""vLLM's, SGLang's and TensorRT-LLM's own sizing tests, translated into deployments (tests/engine_tests/).

Each deployment there states what a test of vLLM's
tests/v1/core/test_kv_cache_utils.py or tests/v1/worker/test_gpu_model_runner.py (SGLang's
test_pool_configurator.py, TensorRT-LLM's test_resource_manager.py and kvCacheManagerTest.cpp) asserts as `expect_X` cells; the rules of
the engine the deployment runs must give the same `ENGINE.X`.  A second check places the layers of real
layer patterns on pipeline stages the way vLLM does (get_pp_indices, groups
formed over the whole model and projected onto each stage) and compares the
layers one block spans on the deciding stage.
"""

from __future__ import annotations

from math import ceil
from pathlib import Path

import pytest

from kvdsl.api import evaluate_paths, parse_setting

ROOT = Path(__file__).resolve().parents[1]
ENGINE_TESTS = ROOT / "tests" / "engine_tests"
SPEC_FILES = sorted(p for p in ENGINE_TESTS.glob("*.kvspec") if p.name != "models.kvspec")
EXPECT = "expect_"


def deployments(path: Path) -> dict:
    """{deployment: {cell: value}} for every block of `path` that runs the vLLM rules."""
    values = evaluate_paths([str(path)], [])[1]
    blocks: dict = {}
    for (block, cell), value in values.items():
        blocks.setdefault(block, {})[cell] = value
    return {name: cells for name, cells in blocks.items() if any(cell.startswith(EXPECT) for cell in cells)}


def test_every_translation_is_collected():
    names = {p.stem for p in SPEC_FILES}
    assert {"one_worker", "multiple_workers", "pp_sharding", "estimate_max_model_len",
            "max_concurrency", "hybrid_groups", "page_size", "gpu_model_runner", "sglang_pool_configurator",
            "trtllm_kv_cache_manager"} <= names


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_vllm_rules_give_what_vllm_tests_assert(path):
    found = deployments(path)
    assert found, f"{path.name} has no deployment"
    for name, cells in found.items():
        expected = {cell[len(EXPECT):]: value for cell, value in cells.items() if cell.startswith(EXPECT)}
        assert expected, f"{name} expects nothing"
        got = {cell: cells[f"{cells['engine']}.{cell}"] for cell in expected}
        assert got == expected, name


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_each_translation_cites_its_source(path):
    head = path.read_text().split("\nimport", 1)[0]
    assert ("test_kv_cache_utils.py::test_" in head or "test_gpu_model_runner.py::test_" in head
            or "test_resource_manager.py::" in head or "test_pool_configurator.py::" in head
            or "kvCacheManagerTest.cpp::" in head
            or "vllm" in head.lower() and ".py" in head)


# ---------------------------------------------------------------- pipeline stages

def pp_indices(layers: int, stages: int) -> list:
    """vllm/distributed/utils.py get_pp_indices: (start, end) of each stage."""
    partitions = [layers // stages] * stages
    for i in range(2, layers % stages + 2):
        partitions[-i] += 1
    starts = [sum(partitions[:r]) for r in range(stages)]
    return [(s, s + n) for s, n in zip(starts, partitions)]


def block_layers(kinds: list, stages: int, draft: int = 0) -> int:
    """The layers one block spans on the stage that holds fewest blocks, as vLLM
    forms it: groups over the whole model (layers[i::groups] of each kind),
    projected onto each stage's layers (kv_cache_planning.py)."""
    names = {kind: [i for i, k in enumerate(kinds) if k == kind] for kind in ("full", "sliding", "ssm")}
    names["full"] += [len(kinds) + d for d in range(draft)]          # draft layers: on the last stage
    counts = {kind: len(v) for kind, v in names.items() if v}
    size = min(counts.values())
    if max(counts.values()) < 1.5 * size:
        size = max(counts.values())
    groups = [layer_list[i::ceil(len(layer_list) / size)]
              for layer_list in names.values() if layer_list
              for i in range(ceil(len(layer_list) / size))]
    ranges = pp_indices(len(kinds), stages)
    ranges[-1] = (ranges[-1][0], len(kinds) + draft)
    return max(sum(start <= layer < end for layer in group) for start, end in ranges for group in groups)


PATTERNS = {
    "gpt_oss_120b": ["sliding", "full"] * 18,
    "gemma_3_27b_it": (["sliding"] * 5 + ["full"]) * 10 + ["sliding"] * 2,
    "qwen3_next_80b_a3b_instruct": (["ssm"] * 3 + ["full"]) * 12,
    "jamba_v0_1": (["ssm"] * 4 + ["full"] + ["ssm"] * 3) * 4,
    # block-ordered: each stage gets mostly one kind
    "t_3full_7sliding": ["full"] * 3 + ["sliding"] * 7,
    "t_6full_5sliding": ["full"] * 6 + ["sliding"] * 5,
    "t_2full_4sliding": ["full"] * 2 + ["sliding"] * 4,
}
MODEL_FILES = {name: ENGINE_TESTS / "models.kvspec" for name in PATTERNS if name.startswith("t_")}


def test_pipeline_stages_follow_get_pp_indices():
    assert pp_indices(27, 2) == [(0, 14), (14, 27)]
    assert pp_indices(45, 4) == [(0, 11), (11, 22), (22, 34), (34, 45)]   # vLLM's test: [11, 11, 12, 11]


@pytest.mark.parametrize("model", sorted(PATTERNS))
def test_the_deciding_stage_matches_vllms_grouping(model, tmp_path):
    spec = tmp_path / "stages.kvspec"
    spec.write_text(
        f'import "{MODEL_FILES.get(model, ROOT / "specs" / "models" / f"{model}.kvspec")}"\n'
        f'import "{ROOT}/specs/hardware/h100_sxm.kvspec"\n'
        'deployment d "stages" {\n'
        f'    model = {model}\n    hardware = h100_sxm\n    engine = vllm\n'
        '    kv_cache_memory_bytes = 10 GiB\n}\n')
    cases = [(pp, 0) for pp in range(1, min(8, len(PATTERNS[model])) + 1)] + [(3, 1), (4, 1)]
    for pp, draft in cases:
        values = evaluate_paths([str(spec)], [parse_setting(f"d.gpus={pp}"), parse_setting(f"d.pipeline_stages={pp}"),
                                              parse_setting(f"d.speculative_layers={draft}")])[1]
        assert values[("d", "vllm.group_size")] == block_layers(PATTERNS[model], pp, draft), (model, pp, draft)


ORDER = ("layer_period", "full_start", "full_run", "sliding_start", "sliding_run", "ssm_start", "ssm_run")


@pytest.mark.parametrize("model,order", [
    ("gpt_oss_120b", (2, 1, 1, 0, 1, 0, 0)),            # [sliding, full] * 18
    ("gemma_3_27b_it", (6, 5, 1, 0, 5, 0, 0)),          # [[sliding] * 5, full] * 10 + [sliding] * 2
    ("jamba_v0_1", (8, 4, 1, 0, 0, 0, 0)),              # ssm scattered around the one full layer: the rest
    ("nvidia_nemotron_3_nano_4b_bf16", (0, 0, 0, 0, 0, 0, 0)),   # irregular, with MLP-only layers: not described
    ("mistral_7b_v0_1", (1, 0, 0, 0, 1, 0, 0)),         # [sliding(4096)] * 32
])
def test_a_layer_pattern_gives_the_order_of_its_kinds(model, order):
    values = evaluate_paths([str(ROOT / "specs" / "models" / f"{model}.kvspec")], [])[1]
    assert tuple(values[(model, cell)] for cell in ORDER) == order

