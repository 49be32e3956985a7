"""The JSON of `check`, `explain` and `sweep`, and `--cells` for `eval` and `sweep`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cli

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")
BLOCK = "mistral_7b_l4"
ERRORS = ROOT / "tests" / "golden" / "errors"


def test_check_json_ok():
    doc = json.loads(cli("check", "--json", SPEC, code=0).stdout)
    assert doc["ok"] is True and doc["errors"] == []
    assert doc["blocks"] == {"model": 1, "hardware": 1, "deployment": 1}
    text = cli("check", SPEC, code=0).stdout
    assert f"{doc['cells']:,} cells" in text


def test_check_json_errors_are_objects(monkeypatch):
    monkeypatch.chdir(ERRORS)
    result = cli("check", "--json", "several_errors.kvspec", code=1)
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and len(doc["errors"]) == 3
    for error in doc["errors"]:
        assert {"path", "line", "column", "kind", "message", "hint"} <= set(error)
        assert error["path"] == "several_errors.kvspec"
    first = doc["errors"][0]
    assert (first["line"], first["column"], first["kind"]) == (6, 13, "unknown_name")
    assert first["message"] == "unknown name `qqq`"
    rendered = cli("check", "several_errors.kvspec", code=1).stderr
    for error in doc["errors"]:
        assert f"several_errors.kvspec:{error['line']}:{error['column']}: error: {error['message']}" in rendered


def test_check_json_hint_and_kind(monkeypatch):
    monkeypatch.chdir(ERRORS)
    doc = json.loads(cli("check", "--json", "typo_gpus.kvspec", code=1).stdout)
    gpu = next(e for e in doc["errors"] if "`gpu`" in e["message"])
    assert gpu["kind"] == "unknown_name" and "did you mean `gpus`?" in gpu["hint"]
    doc = json.loads(cli("check", "--json", "bytes_plus_tokens.kvspec", code=1).stdout)
    assert [e["kind"] for e in doc["errors"]] == ["dimension"]


def test_check_json_missing_file():
    doc = json.loads(cli("check", "--json", "no_such_file.kvspec", code=1).stdout)
    assert doc["ok"] is False and "no_such_file.kvspec" in doc["errors"][0]["message"]


def test_explain_json_matches_the_text():
    doc = json.loads(cli("explain", SPEC, "max_batch", "--json", code=0).stdout)
    text = cli("explain", SPEC, "max_batch", code=0).stdout
    assert doc["block"] == BLOCK and doc["cell"] == "max_batch"
    assert text.splitlines()[0] == f"{BLOCK}.max_batch = {doc['text']}"
    first = doc["steps"][0]
    assert first["form"] == "rule" and first["depth"] == 0 and first["value"] == doc["value"]
    assert first["rule"] in text and first["substituted"] in text
    assert first["path"].endswith("engines.kvspec") and first["line"] >= 1
    assert text.splitlines()[1] == f"{doc['label']}: {doc['description']}"
    assert len(doc["steps"]) == len(text.splitlines()) - 2 - sum(1 for line in text.splitlines()
                                                                 if line.strip().startswith(("=", "(as ")))
    assert {s["form"] for s in doc["steps"]} >= {"rule", "input"}
    evaluated = json.loads(cli("eval", SPEC, "--json", code=0).stdout)["blocks"][BLOCK]["cells"]
    assert doc["value"] == evaluated["max_batch"]["value"]


def test_explain_json_depth():
    doc = json.loads(cli("explain", SPEC, "max_batch", "--json", "--depth", "1", code=0).stdout)
    assert max(s["depth"] for s in doc["steps"]) == 1


def test_sweep_json_has_the_points():
    doc = json.loads(cli("sweep", SPEC, "--vary", "batch=1:4", "--vary", "context=1K:4K:x2", "--json", code=0).stdout)
    assert doc["points"] == 12 and doc["varied"] == ["batch", "context"]
    assert doc["columns"] == doc["varied"] + doc["results"]
    assert len(doc["rows"]) == 12 and all(len(r) == len(doc["columns"]) for r in doc["rows"])
    csv = cli("sweep", SPEC, "--vary", "batch=1:4", "--vary", "context=1K:4K:x2", code=0).stdout.splitlines()
    assert csv[0].split(",") == doc["columns"]
    fits = doc["columns"].index("fits")
    for line, row in zip(csv[1:], doc["rows"]):
        fields = line.split(",")
        assert float(fields[0]) == row[0] and float(fields[1]) == row[1]
        assert int(fields[fits]) == int(row[fits]) and isinstance(row[fits], bool)


def test_sweep_json_with_out_says_where_the_points_are(tmp_path):
    out = tmp_path / "grid.csv"
    doc = json.loads(cli("sweep", SPEC, "--vary", "batch=1:3", "--json", "--out", out, code=0).stdout)
    assert doc["rows"] is None and str(out) in doc["rows_note"]
    assert len(out.read_text().splitlines()) == 4


def test_sweep_json_of_a_large_grid_says_how_to_get_the_points():
    doc = json.loads(cli("sweep", SPEC, "--vary", "batch=1:400", "--vary", "context=1:400", "--cells", "fits",
                         "--json", code=0).stdout)
    assert doc["points"] == 160_000 and doc["rows"] is None and "--out" in doc["rows_note"]


def test_sweep_cells_chooses_the_columns():
    out = cli("sweep", SPEC, "--vary", "batch=1:3", "--cells", "max_context,fits", code=0).stdout.splitlines()
    assert out[0] == "batch,max_context,fits" and len(out) == 4
    assert all(line.split(",")[2] in ("0", "1") for line in out[1:])


@pytest.mark.parametrize("cells, fragment", [("nope", "has no such cell"), ("gpus", "does not depend on batch"),
                                             ("max_contxt", "did you mean `max_context`?"), (",", "--cells needs")])
def test_sweep_cells_errors(cells, fragment):
    result = cli("sweep", SPEC, "--vary", "batch=1:3", "--cells", cells, code=2)
    assert fragment in result.stderr


def test_eval_cells_text_and_json():
    text = cli("eval", SPEC, "--cells", "max_batch,fits", code=0).stdout
    assert text.splitlines() == [f'deployment {BLOCK} "Mistral-7B-v0.1 on 1 x L4"', "  max_batch  13", "  fits       true"]
    doc = json.loads(cli("eval", SPEC, "--json", "--cells", "layers,max_batch", code=0).stdout)["blocks"]
    assert list(doc) == ["mistral_7b_v0_1", BLOCK]
    assert list(doc["mistral_7b_v0_1"]["cells"]) == ["layers"] and list(doc[BLOCK]["cells"]) == ["max_batch"]
    full = json.loads(cli("eval", SPEC, "--json", code=0).stdout)["blocks"]
    assert doc[BLOCK]["cells"]["max_batch"] == full[BLOCK]["cells"]["max_batch"]


def test_eval_cells_unknown_name():
    result = cli("eval", SPEC, "--cells", "max_bach", code=2)
    assert "no block has a cell `max_bach`" in result.stderr and "did you mean `max_batch`?" in result.stderr


def test_eval_hides_other_engines_unless_all():
    spec = str(ROOT / "specs" / "engine_logs" / "v22_gpt_oss_120b.kvspec")
    shown = cli("eval", spec, code=0).stdout
    every = cli("eval", spec, "--all", code=0).stdout
    assert "vllm.num_blocks" in shown and "sglang." not in shown and "cells of the other engines: --all shows them" in shown
    assert "sglang.mem_fraction_static" in every and "trtllm." in every
