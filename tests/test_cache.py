"""The on-disk cache of parsed spec files: never stale, never in the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdsl import cache
from kvdsl.api import build_program, evaluate_paths, forget_programs, parse_setting, settings_by_block
from kvdsl.errors import KvdslError, UsageError
from kvdsl.evaluate import evaluate
from kvdsl.graph import build, merged_blocks, with_literals
from kvdsl.loader import load
from kvdsl.parser import forget_parsed, parse_file

ROOT = Path(__file__).resolve().parents[1]
SPEC = 'model m "M" {\n    layers = 2; heads = 4; head_dim = 8; params = 1e9\n}\n'


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    forget_programs()  # what earlier tests built goes where they kept it
    monkeypatch.setenv("KVDSL_CACHE_DIR", str(folder))
    monkeypatch.delenv("KVDSL_NO_CACHE", raising=False)
    cache.directory.cache_clear()
    forget_parsed()  # files parsed earlier in this process would not reach the new folder
    yield folder
    cache.directory.cache_clear()


def entries(folder: Path) -> list:
    return sorted(folder.glob("*.pickle"))


def test_a_parsed_file_is_stored_and_read_back(cache_dir, tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    first = parse_file(spec, "m.kvspec")
    assert len(entries(cache_dir)) == 1
    assert cache.load(SPEC, "m.kvspec") == first
    assert parse_file(spec, "m.kvspec") == first


def test_changed_text_or_path_is_a_new_entry(cache_dir, tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    parse_file(spec, "m.kvspec")
    spec.write_text(SPEC.replace("layers = 2", "layers = 3"))
    changed = parse_file(spec, "m.kvspec")
    assert "3" in str(changed)
    other = parse_file(spec, "elsewhere/m.kvspec")
    assert other.items[0].span.path == "elsewhere/m.kvspec"
    assert len(entries(cache_dir)) == 3


def test_a_damaged_entry_is_parsed_again(cache_dir, tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    expected = parse_file(spec, "m.kvspec")
    for entry in entries(cache_dir):
        entry.write_bytes(b"not a pickle")
    assert parse_file(spec, "m.kvspec") == expected


def test_errors_are_not_cached(cache_dir, tmp_path):
    spec = tmp_path / "bad.kvspec"
    spec.write_text('model m "M" {\n    layers = = 2\n}\n')
    for _ in range(2):
        with pytest.raises(KvdslError) as caught:
            parse_file(spec, "bad.kvspec")
        assert "bad.kvspec:2" in caught.value.render()
    assert entries(cache_dir) == []


def test_off_or_unusable_the_cache_is_skipped(tmp_path, monkeypatch):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("KVDSL_CACHE_DIR", str(blocked / "cache"))   # cannot be created
    cache.directory.cache_clear()
    assert cache.directory() is None
    assert parse_file(spec, "m.kvspec").items
    monkeypatch.setenv("KVDSL_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("KVDSL_NO_CACHE", "1")
    cache.directory.cache_clear()
    assert parse_file(spec, "m.kvspec").items
    assert not (tmp_path / "c").exists()
    cache.directory.cache_clear()


# ---- programs kept in memory by build_program ----------------------------------


def test_the_same_texts_and_settings_give_the_program_built_before(tmp_path):
    forget_programs()
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    first = build_program([str(spec)])
    assert build_program([str(spec)]) is first
    with_set = build_program([str(spec)], [parse_setting("m.layers=3")])
    assert with_set is not first
    assert build_program([str(spec)], [parse_setting("m.layers=3")]) is with_set
    assert build_program([str(spec)], [parse_setting("m.layers=4")]) is not with_set


def test_a_changed_file_is_built_again(tmp_path):
    forget_programs()
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    first = build_program([str(spec)])
    spec.write_text(SPEC.replace("layers = 2", "layers = 5"))
    again = build_program([str(spec)])
    assert again is not first
    assert evaluate_paths([str(spec)])[1][("m", "layers")] == 5


def test_forgotten_programs_are_built_again(tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    first = build_program([str(spec)])
    forget_programs()
    assert build_program([str(spec)]) is not first


def test_a_file_parsed_before_in_this_process_is_not_read_again(cache_dir, tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    first = parse_file(spec, "m.kvspec")
    for entry in entries(cache_dir):
        entry.unlink()
    assert parse_file(spec, "m.kvspec") is first
    spec.write_text(SPEC.replace("layers = 2", "layers = 3"))
    assert parse_file(spec, "m.kvspec") is not first


# ---- literal settings applied to the program built without them ------------------

# two deployments, one with `batch = ?`, their models and GPUs, and every engine
SPECS = [str(ROOT / "specs" / "deployments" / f"{name}.kvspec") for name in ("llama_3_1_70b_h100x4_fp8", "qwen3_32b_h200_solved")]
LITERAL_SETTINGS = [
    ["context=64K"], ["batch=3"], ["gpus=2", "utilization=0.8"], ["llama_3_1_70b_h100x4_fp8.context=8K", "llama_3_1_70b_h100x4_fp8.batch=12"],
    ["batch=8", "context=32K"],  # qwen3_32b_h200_solved's `batch = ?` becomes a number
    ["llama_3_1_70b.layers=40"], ["h100_sxm.memory=96 GiB"], ["flashinfer_sampler=false"],
    ["llama_3_1_70b_h100x4_fp8.context=40000"],  # a bare number takes the unit of the literal it replaces
    ["h100_sxm.memory=90000000000"], ["kv_cache_memory_bytes=0"], ["context=32768"],
]
FULL_BUILD_SETTINGS = [
    ["max_num_batched_tokens=4096"],  # a bare number the full build gives the unit of a rule it replaces
    ["llama_3_1_70b_h100x4_fp8.engine=sglang"], ["llama_3_1_70b_h100x4_fp8.model=qwen3_8b"],  # names
    ["vllm.block_size=32 tokens"],  # an engine's rule
    ["llama_3_1_70b_h100x4_fp8.context=?"], ['llama_3_1_70b_h100x4_fp8.notes="x"'],
]


def full_build(paths: list, settings: list):
    """What the resolver makes of the settings, every pass run."""
    workspace = load(paths)
    return build(workspace, settings_by_block(merged_blocks(workspace), settings))


def cell_fields(rc) -> tuple:
    return (rc.form, rc.origin, rc.dim, rc.expr, rc.cell, rc.shadowed, rc.scope, rc.ref_target, rc.ref_expr)


@pytest.mark.parametrize("texts", LITERAL_SETTINGS, ids=" ".join)
def test_literal_settings_give_the_program_a_full_build_gives(texts):
    settings = [parse_setting(t) for t in texts]
    base = build_program(SPECS)
    fast = with_literals(base, settings_by_block(base.blocks, settings))
    assert fast is not None, texts
    full = full_build(SPECS, settings)
    assert fast.cells.keys() == full.cells.keys()
    assert [k for k in fast.cells if cell_fields(fast.cells[k]) != cell_fields(full.cells[k])] == []
    assert evaluate(fast) == evaluate(full)
    assert evaluate(build_program(SPECS, settings)) == evaluate(full)


@pytest.mark.parametrize("texts", FULL_BUILD_SETTINGS, ids=" ".join)
def test_other_settings_are_built_in_full(texts):
    settings = [parse_setting(t) for t in texts]
    base = build_program(SPECS)
    try:
        overrides = settings_by_block(base.blocks, settings)
    except UsageError:  # refused before any build
        return
    assert with_literals(base, overrides) is None


# ---- programs kept on disk -------------------------------------------------------


def _kept(folder: Path, suffix: str) -> list:
    return sorted((folder / "programs").glob("*" + suffix))


def _built_anew(paths: list):
    """What a new process would get: nothing kept in memory."""
    forget_programs()
    return build_program(paths)


def kept_fingerprint(spec: Path) -> str:
    return load([str(spec)]).fingerprint


def _same(one, other) -> None:
    assert list(one.cells) == list(other.cells) and one.order == other.order
    for key, rc in one.cells.items():
        twin = other.cells[key]
        assert (rc.form, rc.origin, rc.dim, rc.ref_target, rc.scope, repr(rc.expr)) == \
               (twin.form, twin.origin, twin.dim, twin.ref_target, twin.scope, repr(twin.expr))
    assert evaluate(one) == evaluate(other)


def test_a_program_is_kept_on_disk_the_second_time_its_files_are_built(cache_dir, tmp_path, monkeypatch):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    first = _built_anew([str(spec)])
    assert _kept(cache_dir, ".pickle") == [] and len(_kept(cache_dir, ".seen")) == 1
    second = _built_anew([str(spec)])
    evaluate(second)  # kept with the program once the command is done
    forget_programs()
    assert len(_kept(cache_dir, ".pickle")) == 1
    third = _built_anew([str(spec)])
    assert third.evaluated  # read back with its evaluation
    for program in (second, third):
        _same(first, program)
    spec.write_text(SPEC.replace("layers = 2", "layers = 5"))  # a changed file: built again, never the stale entry
    assert evaluate(_built_anew([str(spec)]))[("m", "layers")] == 5
    spec.write_text(SPEC)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "m.kvspec").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        evaluate(_built_anew(["m.kvspec"]))
    monkeypatch.chdir(elsewhere)  # the same texts at the same display paths: the same program
    assert _built_anew(["m.kvspec"]).evaluated
    forget_programs()


def test_an_export_keeps_what_it_derives_with_the_program_on_disk(cache_dir, monkeypatch):
    """What an export derives from the program alone (the formulas it prints through SymPy, a solved cell's and
    the What-if sheet's; the GPU counts an engine runs) goes to disk with the program, also one another command
    kept there: an export of the program read back writes the same bytes without deriving them again."""
    import io

    from kvdsl.excel import charts, plan_sheet, values
    from kvdsl.excel.saving import save_fixed
    from kvdsl.excel.workbook import build_workbook

    paths = [str(ROOT / "specs" / "deployments" / "qwen3_32b_h200_solved.kvspec")]

    def exported() -> bytes:
        forget_programs()
        stream = io.BytesIO()
        save_fixed(build_workbook(*evaluate_paths(paths), paths)[0], stream)
        return stream.getvalue()

    for _ in range(2):  # kept on disk by `eval`, without closed forms
        evaluate(_built_anew(paths))
    first = exported()  # read back; what the export derives is written with it when forgotten
    forget_programs()

    def printed_again(*_):
        raise AssertionError("derived again")

    monkeypatch.setattr(values, "_solved_formula", printed_again)
    monkeypatch.setattr(charts, "_what_if_formula", printed_again)
    monkeypatch.setattr(plan_sheet, "_tensor_parallel_counts", printed_again)
    assert exported() == first
    forget_programs()


def test_a_program_on_disk_is_not_read_for_other_code_or_when_damaged(cache_dir, tmp_path, monkeypatch):
    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    for _ in range(3):
        kept = _built_anew([str(spec)])
        evaluate(kept)
    forget_programs()
    [entry] = _kept(cache_dir, ".pickle")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # cut short
    _same(kept, _built_anew([str(spec)]))
    _same(kept, _built_anew([str(spec)]))  # built again, and kept again the next time
    assert cache.load_program(kept_fingerprint(spec)) is not None
    monkeypatch.setattr(cache, "_package_fingerprint", lambda: b"another version of kvdsl")
    assert cache.load_program(kept_fingerprint(spec)) is None
    _same(kept, _built_anew([str(spec)]))
    forget_programs()


def test_a_file_that_became_a_fifo_is_not_read_to_check_a_kept_program(cache_dir, tmp_path, monkeypatch):
    import os
    import signal

    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    for _ in range(2):
        _built_anew([str(spec)])
    spec.unlink()
    os.mkfifo(spec)
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("reading the FIFO blocked"))
    signal.alarm(20)
    try:
        forget_programs()
        with pytest.raises(KvdslError, match="not a regular file"):
            build_program([str(spec)])
    finally:
        signal.alarm(0)


def test_commands_run_in_one_process_leave_their_garbage_to_the_collector(cache_dir, tmp_path, monkeypatch):
    """Only a process's first command freezes what is alive: a later one reading its program back from
    disk leaves the reference cycles of those before it to the collector (the fuzzer runs 100,000)."""
    import gc
    import weakref

    from click.testing import CliRunner

    from kvdsl.cli import main

    spec = tmp_path / "m.kvspec"
    spec.write_text(SPEC)
    runner = CliRunner()
    read_back = []
    load_program = cache.load_program
    monkeypatch.setattr(cache, "load_program", lambda key: read_back.append(load_program(key)) or read_back[-1])
    for _ in range(3):  # built, built again and kept on disk, read back
        forget_programs()
        assert runner.invoke(main, ["eval", str(spec)]).exit_code == 0

    class Cycle:
        pass

    garbage = Cycle()
    garbage.itself = garbage
    alive = weakref.ref(garbage)
    del garbage
    forget_programs()
    read_back.clear()
    gc.disable()  # no collection before the command's own: only the collector may free a cycle
    try:
        assert runner.invoke(main, ["eval", str(spec)]).exit_code == 0
    finally:
        gc.enable()
    assert read_back and read_back[-1] is not None
    gc.collect()
    assert alive() is None
    forget_programs()
