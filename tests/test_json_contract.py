"""The `kvdsl eval --json` contract, which other tools read.

    {"blocks": {BLOCK: {"kind": "model" | "hardware" | "deployment",
                        "title": TITLE,
                        "cells": {CELL: {"value": NUMBER | STRING | BOOL | null,
                                         "unit": UNIT | null}}}}}

Numbers are in base units (bytes, tokens, elements, seconds and their
quotients); exact integers are JSON integers.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_helpers import answered
from kvdsl.cli import main

GIB = 2**30

SPEC = '''\
model llama "Llama-3.1-70B" {
    source = "meta-llama/Llama-3.1-70B config.json"
    layers = 80
    heads = 64
    kv_heads = 8
    head_dim = 128
    params = 70.55e9
}

hardware gpu "80 GiB accelerator" {
    memory = 80 GiB
    bandwidth = 3.35 TB/s
}

deployment chat "Llama on 4 GPUs, FP8 cache" {
    model = llama
    hardware = gpu
    gpus = 4
    kv_dtype = fp8
    context = 32K
    batch = 8
}
'''

MODEL_CELLS = {"context", "kv_dtype", "kv_elements_per_token", "mha_elements_per_token", "kv_bytes_per_sequence"}
DEPLOYMENT_CELLS = {
    "model", "hardware", "gpus", "context", "batch", "weights_bytes", "kv_budget_bytes",
    "kv_bytes_per_sequence", "max_batch", "max_context", "fits",
}
BASE_UNITS = {"bytes", "tokens", "elements", "seconds", "USD", "FLOP"}


def eval_json(tmp_path: Path, spec: str = SPEC, *args: str) -> dict:
    path = tmp_path / "plan.kvspec"
    path.write_text(spec, encoding="utf-8")
    result = CliRunner().invoke(main, ["eval", str(path), "--json", *args])
    assert answered(result), result.output
    assert result.exit_code == 1 or result.stderr == ""
    return json.loads(result.stdout)


@pytest.fixture
def doc(tmp_path):
    return eval_json(tmp_path)


def cell(doc, block, name):
    return doc["blocks"][block]["cells"][name]


def test_top_level_shape(doc):
    assert list(doc) == ["blocks"]
    assert set(doc["blocks"]) == {"llama", "gpu", "chat"}  # user blocks only: no prelude formats
    for name, block in doc["blocks"].items():
        assert list(block) == ["kind", "title", "cells"], name
        assert block["kind"] in ("model", "hardware", "deployment")
        assert isinstance(block["title"], str)
        assert isinstance(block["cells"], dict) and block["cells"]


def test_block_kinds_and_titles(doc):
    blocks = doc["blocks"]
    assert (blocks["llama"]["kind"], blocks["llama"]["title"]) == ("model", "Llama-3.1-70B")
    assert (blocks["gpu"]["kind"], blocks["gpu"]["title"]) == ("hardware", "80 GiB accelerator")
    assert (blocks["chat"]["kind"], blocks["chat"]["title"]) == ("deployment", "Llama on 4 GPUs, FP8 cache")


def test_every_cell_is_value_and_unit(doc):
    for block in doc["blocks"].values():
        for name, entry in block["cells"].items():
            assert list(entry) == ["value", "unit"], name
            value, unit = entry["value"], entry["unit"]
            assert value is None or isinstance(value, (int, float, str, bool)), (name, value)
            assert unit is None or (isinstance(unit, str) and unit), (name, unit)
            if isinstance(value, (str, bool)):
                assert unit is None, (name, entry)
            if unit is not None:
                atoms = unit.replace("*", "/").split("/")
                assert all(a.split("^")[0] in BASE_UNITS | {"byte", "token", "element", "s"} for a in atoms), unit


def test_model_cells(doc):
    cells = doc["blocks"]["llama"]["cells"]
    assert MODEL_CELLS <= set(cells)
    assert cells["context"] == {"value": 32768, "unit": "tokens"}
    assert cells["kv_dtype"] == {"value": "fp16", "unit": None}
    assert cells["kv_elements_per_token"] == {"value": 2 * 80 * 8 * 128, "unit": "elements/token"}
    assert cells["mha_elements_per_token"] == {"value": 2 * 80 * 64 * 128, "unit": "elements/token"}
    assert cells["kv_bytes_per_sequence"] == {"value": 2 * 80 * 8 * 128 * 32768 * 2, "unit": "bytes"}
    assert cells["kv_bytes_per_sequence"]["value"] == 10 * GIB
    assert cells["source"] == {"value": "meta-llama/Llama-3.1-70B config.json", "unit": None}
    assert cells["params"] == {"value": 70_550_000_000, "unit": None}
    assert cells["layers"] == {"value": 80, "unit": None}


def test_hardware_cells_in_base_units(doc):
    cells = doc["blocks"]["gpu"]["cells"]
    assert cells["memory"] == {"value": 80 * GIB, "unit": "bytes"}
    assert cells["bandwidth"] == {"value": 3_350_000_000_000, "unit": "bytes/s"}


def test_deployment_cells(doc):
    cells = doc["blocks"]["chat"]["cells"]
    assert DEPLOYMENT_CELLS <= set(cells)
    assert cells["model"] == {"value": "llama", "unit": None}
    assert cells["hardware"] == {"value": "gpu", "unit": None}
    assert cells["gpus"] == {"value": 4, "unit": None}
    assert cells["context"] == {"value": 32768, "unit": "tokens"}
    assert cells["batch"] == {"value": 8, "unit": None}
    weights = 70_550_000_000 * 2  # bf16 weights
    assert cells["weights_bytes"] == {"value": weights, "unit": "bytes"}
    budget = 4 * Fraction(9, 10) * 80 * GIB - weights
    assert cells["kv_budget_bytes"] == {"value": int(budget), "unit": "bytes"} and budget.denominator == 1
    per_sequence = 2 * 80 * 8 * 128 * 32768 * 1  # fp8: one byte per element, the whole sequence over 4 GPUs
    assert cells["kv_bytes_per_sequence"] == {"value": per_sequence, "unit": "bytes"}
    assert cells["max_batch"] == {"value": int(budget // per_sequence), "unit": None}
    assert cells["max_batch"]["value"] == 31
    assert cells["fits"] == {"value": True, "unit": None}
    max_context = cells["max_context"]
    assert max_context["unit"] == "tokens" and isinstance(max_context["value"], int)
    assert 32768 <= max_context["value"] <= doc["blocks"]["llama"]["cells"]["context_limit"]["value"]


def test_types_of_values(doc):
    chat = doc["blocks"]["chat"]["cells"]
    assert type(chat["fits"]["value"]) is bool
    assert type(chat["max_batch"]["value"]) is int
    assert type(chat["weights_bytes"]["value"]) is int
    assert type(chat["utilization"]["value"]) is float and chat["utilization"]["value"] == 0.9
    assert type(chat["kv_dtype"]["value"]) is str


def test_every_deployment_and_model_has_the_contract_cells(tmp_path):
    spec = SPEC + (
        'model small "Small" {\n    layers = 2\n    heads = 2\n    head_dim = 4\n    params = 1e6\n}\n'
        'deployment tiny "Tiny" {\n    model = small\n    hardware = gpu\n}\n'
        'deployment huge "Does not fit" {\n    model = llama\n    hardware = gpu\n    gpus = 1\n}\n'
    )
    doc = eval_json(tmp_path, spec)
    kinds = {name: b["kind"] for name, b in doc["blocks"].items()}
    assert sorted(n for n, k in kinds.items() if k == "model") == ["llama", "small"]
    assert sorted(n for n, k in kinds.items() if k == "deployment") == ["chat", "huge", "tiny"]
    for name, kind in kinds.items():
        cells = set(doc["blocks"][name]["cells"])
        if kind == "model":
            assert MODEL_CELLS <= cells, name
        elif kind == "deployment":
            assert DEPLOYMENT_CELLS <= cells, name
            assert type(doc["blocks"][name]["cells"]["fits"]["value"]) is bool
    huge = doc["blocks"]["huge"]["cells"]
    assert huge["fits"]["value"] is False
    assert huge["max_batch"]["value"] == 0
    assert huge["kv_budget_bytes"]["value"] < 0
    tiny = doc["blocks"]["tiny"]["cells"]
    assert tiny["fits"]["value"] is True
    assert tiny["gpus"]["value"] == 1


def test_set_changes_the_json(tmp_path):
    doc = eval_json(tmp_path, SPEC, "--set", "context=8K", "--set", "gpu.memory=40 GiB")
    assert cell(doc, "llama", "context") == {"value": 8192, "unit": "tokens"}
    assert cell(doc, "chat", "context") == {"value": 8192, "unit": "tokens"}
    assert cell(doc, "gpu", "memory") == {"value": 40 * GIB, "unit": "bytes"}


def test_solved_unknown_is_in_the_json(tmp_path):
    doc = eval_json(tmp_path, SPEC.replace("batch = 8", "batch = ?"))
    assert cell(doc, "chat", "batch") == {"value": 31, "unit": None}
    assert cell(doc, "chat", "fits")["value"] is True


def test_json_is_plain_json(doc):
    """No NaN or Infinity, and a round trip keeps it."""
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text) == doc


def test_block_order_models_hardware_deployments(tmp_path):
    spec = SPEC.split("deployment")[0]
    reordered = "deployment" + SPEC.split("deployment")[1] + spec
    doc = eval_json(tmp_path, reordered)
    assert [b["kind"] for b in doc["blocks"].values()] == ["model", "hardware", "deployment"]
