"""A program built again after a change, from the program built before: the same program a full build makes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvdsl import build as build_module
from kvdsl import cache
from kvdsl.api import build_program, evaluate_paths, forget_programs, parse_setting, solve_unknowns
from kvdsl.errors import KvdslError
from kvdsl.evaluate import evaluate
from kvdsl.graph import build, rebuild
from kvdsl.loader import load
from kvdsl.reuse import carry_over, rebuilt_blocks

ROOT = Path(__file__).resolve().parents[1]
FP8 = "llama_3_1_70b_h100x4_fp8"
DEPLOYMENTS = [FP8, "llama_3_1_70b_h100x16", "qwen3_32b_h200_solved"]  # two share a model; one has `batch = ?`
READER = f'''import "{FP8}.kvspec"

deployment wider "Twice the GPUs" extends {FP8} {{
    gpus = 8
}}

deployment reader "Reads another deployment" {{
    model = llama_3_1_70b
    hardware = h100_sxm
    context = 8K
    batch = {FP8}.batch
}}
'''


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rebuild")
    for sub in ("deployments", "models", "hardware"):
        shutil.copytree(ROOT / "specs" / sub, folder / sub)
    (folder / "deployments" / "reader.kvspec").write_text(READER)
    return folder


def paths(specs: Path, extra=("reader",)) -> list:
    return [str(specs / "deployments" / f"{name}.kvspec") for name in [*DEPLOYMENTS, *extra]]


def full(files: list):
    program = build(load(files))
    values = evaluate(program)
    return program, values, solve_unknowns(program, values)


def fields(rc) -> tuple:
    return (rc.form, rc.origin, rc.dim, rc.expr, rc.cell, rc.shadowed, rc.scope, rc.ref_target, rc.ref_expr)


def assert_same(rebuilt, program) -> None:
    """Every cell, the order, the blocks, what reads what, the values and the answers."""
    assert list(rebuilt.cells) == list(program.cells) and rebuilt.order == program.order
    assert [k for k, rc in rebuilt.cells.items() if fields(rc) != fields(program.cells[k])] == []
    assert [(b.name, b.kind, b.cells, b.requirements) for b in rebuilt.blocks.values()] == \
           [(b.name, b.kind, b.cells, b.requirements) for b in program.blocks.values()]
    assert {b: r for b, r in rebuilt.readers.items() if r} == program.readers
    # a block rebuilt keeps the blocks its cells taken as they were looked in: a cell resolved again
    # may no longer look in one (which only makes a later rebuild redo more)
    assert set(rebuilt.consulted) >= set(program.consulted)
    assert [b for b, others in program.consulted.items() if not rebuilt.consulted[b] >= others] == []
    assert rebuilt.evaluated[0] == evaluate(program) and rebuilt.evaluated[1] == program.evaluated[1]
    assert solve_unknowns(rebuilt, rebuilt.evaluated[0]) == solve_unknowns(program, program.evaluated[0])


def edit(path: Path, old: str, new: str) -> str:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return text


def test_a_changed_file_rebuilds_its_blocks_and_those_that_read_them(specs):
    files = paths(specs)
    base, values, _ = full(files)
    changes = [
        # a deployment: it, the one that extends it and the one that reads it
        ("deployments", FP8, "batch = 24", "batch = 20", {FP8, "wider", "reader"}),
        # a prelude rule's value set in a deployment
        ("deployments", "llama_3_1_70b_h100x16", "{", "{\n    utilization = 0.8", {"llama_3_1_70b_h100x16"}),
        # a model: every deployment that runs it
        ("models", "llama_3_1_70b", "layers = 80", "layers = 40",
         {"llama_3_1_70b", FP8, "llama_3_1_70b_h100x16", "wider", "reader"}),
        # a reference to another block: every cell of the deployment is resolved again
        ("deployments", FP8, "kv_dtype = fp8", "kv_dtype = fp16", {FP8, "wider", "reader"}),
        # a deployment that no longer reads another: its other cells are taken as they were
        ("deployments", "reader", f"batch = {FP8}.batch", "batch = 12", {"reader", "wider"}),
    ]
    for folder, name, old, new, expected in changes:
        path = specs / folder / f"{name}.kvspec"
        before = edit(path, old, new)
        try:
            workspace = load(files)
            blocks = rebuilt_blocks(workspace, base)
            assert blocks == expected, name
            rebuilt = rebuild(workspace, base, blocks)
            carry_over(rebuilt, base, blocks)
            program, changed, answers = full(files)
            assert_same(rebuilt, program)
            assert rebuilt.kept_answers == answers  # the solved deployment's answer is kept: nothing it reads changed
            assert changed != values
        finally:
            path.write_text(before)
    assert values[(FP8, "batch")] == 24 and values[("reader", "batch")] == 24


def test_changes_that_every_block_may_read_are_built_in_full(specs):
    files = paths(specs)
    base = full(files)[0]
    fp8 = specs / "deployments" / f"{FP8}.kvspec"
    for old, new in [
        ("deployment ", "defaults deployment {\n    utilization = 0.85\n}\n\ndeployment "),  # a user's default
        ("deployment ", 'import "../models/qwen3_8b.kvspec"\n\ndeployment '),  # an import: another file
        ("deployment ", "fn twice(x) = 2 * x\n\ndeployment "),
        (f"deployment {FP8}", f"deployment {FP8}_renamed"),  # another block name
    ]:
        before = edit(fp8, old, new)
        try:
            assert rebuilt_blocks(load(files), base) is None, new
        finally:
            fp8.write_text(before)
    assert rebuilt_blocks(load(paths(specs, extra=())), base) is None  # other files given


def test_the_edit_loop_rebuilds_from_the_program_on_disk(specs, tmp_path, monkeypatch):
    monkeypatch.setenv("KVDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVDSL_NO_CACHE", raising=False)
    cache.directory.cache_clear()
    files = paths(specs)
    fp8 = specs / "deployments" / f"{FP8}.kvspec"
    try:
        for _ in range(2):  # the second build is kept on disk
            forget_programs()
            evaluate_paths(files)
        forget_programs()
        full_builds = []
        monkeypatch.setattr(build_module, "build", lambda *a, **k: full_builds.append(1) or build(*a, **k))
        before = edit(fp8, "batch = 24", "batch = 20")
        try:
            _, values = evaluate_paths(files)  # a new process after the edit
            assert full_builds == [] and values[("reader", "batch")] == 20
            forget_programs()
            edit(fp8, "batch = 20", "batch = 16")  # and with a setting of a number
            _, values = evaluate_paths(files, [parse_setting(f"{FP8}.context=8K")])
            assert full_builds == [] and values[("reader", "batch")] == 16 and values[(FP8, "context")] == 8192
            forget_programs()
            edit(fp8, "batch = 16", "batch = 20")
            edit(fp8, "batch = 20", "batch = 1 GiB")  # a mistake: the full build reports it
            with pytest.raises(KvdslError) as rebuilt_error:
                build_program(files)
            assert full_builds == [1]
            forget_programs()
            with pytest.raises(KvdslError) as full_error:
                build(load(files))
            assert str(rebuilt_error.value) == str(full_error.value)
        finally:
            fp8.write_text(before)
    finally:
        forget_programs()
        cache.directory.cache_clear()
