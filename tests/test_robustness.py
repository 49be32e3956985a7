"""Regression tests for problems an adversarial tester found (inputs like /tmp/fuzz).

Each case asserts a clear message, the right exit status (1 for a spec error,
2 for a usage error) and no traceback.  Everything runs through click's
CliRunner on `kvdsl.cli.main` with files under `tmp_path`, except the
broken-pipe case, which needs a real process and pipe.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import check_seconds, cli, timed

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
CATALOG = str(SPECS / "catalog.kvspec")
LLAMA = str(SPECS / "deployments" / "llama_3_1_70b_h100x4_fp8.kvspec")
LLAMA_BLOCK = "llama_3_1_70b_h100x4_fp8"
QWEN_BLOCK = "qwen3_32b_h200_solved"

ERROR_LINE = re.compile(r"^(\S+:\d+:\d+: |--[\w-]+ \S.*?: )?error: ", re.M)  # `--set X=1: error:`, `--context 32x: error:`
LOCATION = re.compile(r"^(\S+):(\d+):(\d+): error: ", re.M)

SMALL_MODEL = 'model m "M" { layers = 2; heads = 4; head_dim = 8; params = 1e9 }\n'
HARDWARE = 'hardware h "H" { memory = 80 GiB; bandwidth = 1 TB/s }\n'
ONE_MODEL = 'model a "A" {\n    layers = 1; heads = 1; head_dim = 1; params = 1\n'


def errors(result) -> int:
    return len(ERROR_LINE.findall(result.stderr))


def write(tmp_path, text, name="spec.kvspec") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def cells(result, block):
    return {name: c["value"] for name, c in json.loads(result.stdout)["blocks"][block]["cells"].items()}


# ---------------------------------------------------------------- 1. defaults overridden "backwards"

@pytest.mark.parametrize("body, expected", [
    ("kv_heads = 8; heads = kv_heads * 8; head_dim = 128; params = 1e9; layers = 1",
     {"kv_heads": 8, "heads": 64, "head_dim": 128}),
    ("k_head_dim = 128; head_dim = k_head_dim; heads = 8; params = 1e9; layers = 1",
     {"k_head_dim": 128, "head_dim": 128, "v_head_dim": 128}),
    ("full_layers = 10; layers = full_layers; heads = 8; head_dim = 64; params = 1e9",
     {"full_layers": 10, "layers": 10}),
])
def test_prelude_default_overridden_in_the_other_direction(tmp_path, body, expected):
    spec = write(tmp_path, f'model m "M" {{ {body} }}\n')
    values = cells(cli("eval", "--json", spec, code=0), "m")
    for name, value in expected.items():
        assert values[name] == value, (name, values[name])


# ---------------------------------------------------------------- 2. sweep

def test_sweep_with_an_unknown_is_a_usage_error_naming_it():
    r = cli("sweep", CATALOG, "--block", QWEN_BLOCK, "--vary", "context=8K:64K:x2", code=2)
    assert "batch = ?" in r.stderr
    assert errors(r) == 1


def test_sweep_with_the_unknown_set_works():
    r = cli("sweep", CATALOG, "--block", QWEN_BLOCK, "--vary", "context=8K:64K:x2",
            "--set", f"{QWEN_BLOCK}.batch=4", code=0)
    rows = r.stdout.strip().splitlines()
    assert rows[0].startswith("context,")
    assert [row.split(",")[0] for row in rows[1:]] == ["8192", "16384", "32768", "65536"]


def test_sweep_utilization_stop_included():
    r = cli("sweep", CATALOG, "--block", QWEN_BLOCK, "--vary", "utilization=0.5:1:0.1",
            "--set", f"{QWEN_BLOCK}.batch=4", code=0)
    rows = r.stdout.strip().splitlines()
    assert rows[0].startswith("utilization,")
    assert [float(row.split(",")[0]) for row in rows[1:]] == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9, 1.0])


@pytest.mark.parametrize("name", ["model", "kv_dtype", "fits"])
def test_sweep_of_a_non_number_is_a_usage_error(name):
    r = cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", f"{name}=1:10", code=2)
    assert f"--vary {name}" in r.stderr and "only a number can vary" in r.stderr


def test_sweep_same_name_twice():
    r = cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "context=1:10", "--vary", "context=1:10", code=2)
    assert "twice" in r.stderr


def test_sweep_too_many_values_is_refused_quickly():
    r, seconds = timed("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:1e7:x1.000001", code=2)
    assert seconds < 5 * check_seconds(LLAMA) + 1
    assert "too many" in r.stderr


def test_sweep_huge_grid_is_refused():
    r, seconds = timed("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:10000", "--vary", "context=1:10000", code=2)
    assert seconds < 5 * check_seconds(LLAMA) + 1
    assert "100,000,000" in r.stderr and "grid" in r.stderr


@pytest.mark.parametrize("vary", ["context=1:10:", "context=a:b", "context=1:10:-1"])
def test_sweep_bad_range_mentions_vary(vary):
    r = cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", vary, code=2)
    assert "--vary" in r.stderr
    assert errors(r) == 1


def test_sweep_division_by_zero_gives_an_empty_field_without_warnings():
    r = cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=0:2", code=0)
    rows = r.stdout.strip().splitlines()
    assert len(rows) == 4
    assert rows[1].startswith("0,") and ",," in rows[1]  # not a finite number: an empty field
    assert r.stderr == ""


# ---------------------------------------------------------------- 3. output files

def test_export_into_a_missing_directory(tmp_path):
    r = cli("export", LLAMA, "-o", tmp_path / "missing" / "out.xlsx", code=2)
    assert "cannot write" in r.stderr
    assert not (tmp_path / "missing").exists()


def test_sweep_out_into_a_missing_directory(tmp_path):
    r = cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:4", "--out", tmp_path / "missing" / "out.csv", code=2)
    assert "cannot write" in r.stderr
    assert not (tmp_path / "missing").exists()


def test_out_naming_a_directory(tmp_path):
    folder = tmp_path / "folder.xlsx"
    folder.mkdir()
    cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:4", "--out", folder, "--force", code=2)
    cli("export", LLAMA, "-o", folder, "--force", code=2)
    assert folder.is_dir() and not any(folder.iterdir())


@pytest.mark.parametrize("command", ["sweep", "export"])
def test_out_an_existing_symlink_is_refused_even_with_force(tmp_path, command):
    suffix = ".csv" if command == "sweep" else ".xlsx"
    target = tmp_path / f"target{suffix}"
    target.write_text("original")
    link = tmp_path / f"link{suffix}"
    os.symlink(target.name, link)
    if command == "sweep":
        r = cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:4", "--out", link, "--force", code=2)
    else:
        r = cli("export", LLAMA, "-o", link, "--force", code=2)
    assert "not a regular file" in r.stderr
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == "original"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, link.name])


def test_out_an_existing_file_without_force(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("keep me")
    # ten million points: refused before the grid is computed
    r, seconds = timed("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:1e7", "--out", out, code=2)
    assert seconds < 5 * check_seconds(LLAMA) + 1
    assert "--force" in r.stderr
    assert out.read_text() == "keep me"
    xlsx = tmp_path / "out.xlsx"
    xlsx.write_text("keep me too")
    cli("export", LLAMA, "-o", xlsx, code=2)
    assert xlsx.read_text() == "keep me too"


def test_sweep_out_missing_directory_refused_before_computing(tmp_path):
    _, seconds = timed("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:1e7", "--out", tmp_path / "no" / "x.csv", code=2)
    assert seconds < 5 * check_seconds(LLAMA) + 1


def test_out_with_force_overwrites_a_regular_file(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old")
    cli("sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:4", "--out", out, "--force", code=0)
    assert out.read_text().startswith("batch,")
    assert len(out.read_text().strip().splitlines()) == 5


# ---------------------------------------------------------------- 4. huge numbers

@pytest.mark.parametrize("expr", ["(2^999)^999", "(1e29)^200", " * ".join(["1e29"] * 15)],
                         ids=["power-of-power", "1e29^200", "product-of-15"])
def test_huge_numbers_are_out_of_range(tmp_path, expr):
    spec = write(tmp_path, ONE_MODEL + f"    let x = {expr}\n}}\n")
    r = cli("eval", spec, code=1)
    assert "out of range" in r.stderr
    assert LOCATION.search(r.stderr).group(2) == "3"


def test_tower_of_powers_returns_quickly(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let x = (((2^999)^999)^999)^999\n}\n")
    r, seconds = timed("eval", spec, code=1)
    assert seconds < 5 * check_seconds(write(tmp_path, ONE_MODEL + "}\n", name="plain.kvspec")) + 1
    assert "out of range" in r.stderr


# ---------------------------------------------------------------- 5. deep expressions

@pytest.mark.parametrize("expr, value", [
    (" + ".join(["1"] * 3000), 3000),
    ("-" * 3000 + "1", 1),
    ("-" * 2999 + "1", -1),
    ("(" * 3000 + "1" + ")" * 3000, 1),
], ids=["sum-3000", "minus-3000", "minus-2999", "parens-3000"])
def test_deep_expressions_evaluate(tmp_path, expr, value):
    spec = write(tmp_path, ONE_MODEL + f"    let x = {expr}\n}}\n")
    assert cells(cli("eval", "--json", spec, code=0), "a")["x"] == value


def test_too_deep_expression_is_a_spec_error(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let x = " + "abs(" * 30000 + "1" + ")" * 30000 + "\n}\n")
    r = cli("eval", spec, code=1)
    assert "nests too deeply" in r.stderr


@pytest.mark.parametrize("expr", ["(" * 6000 + "1" + ")" * 6000, "-" * 6000 + "1", "-(" * 6000 + "1" + ")" * 6000],
                         ids=["parens-6000", "minus-6000", "minus-parens-6000"])
def test_six_thousand_levels_evaluate_or_fail_cleanly(tmp_path, expr):
    spec = write(tmp_path, ONE_MODEL + f"    let x = {expr}\n}}\n")
    r = cli("eval", "--json", spec)
    if r.exit_code == 0:
        assert cells(r, "a")["x"] == 1
    else:
        assert r.exit_code == 1 and "nests too deeply" in r.stderr


# ---------------------------------------------------------------- 6. imports

def test_symlink_loop_given_directly_and_imported(tmp_path):
    os.symlink("loop1", tmp_path / "loop2")
    os.symlink("loop2", tmp_path / "loop1")
    r = cli("eval", tmp_path / "loop1", code=1)
    assert "cannot read" in r.stderr and errors(r) == 1
    r = cli("check", tmp_path / "loop1", code=1)
    assert "cannot read" in r.stderr
    spec = write(tmp_path, 'import "loop1"\n')
    r = cli("eval", spec, code=1)
    assert "cannot read" in r.stderr and errors(r) == 1
    assert LOCATION.search(r.stderr).group(1).endswith("spec.kvspec")


def test_import_of_a_very_long_path(tmp_path):
    spec = write(tmp_path, 'import "' + "x" * 5000 + '"\n')
    r = cli("eval", spec, code=1)
    assert "cannot read" in r.stderr and errors(r) == 1


def test_import_of_a_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    spec = write(tmp_path, 'import "sub"\n')
    r = cli("eval", spec, code=1)
    assert "a directory" in r.stderr and errors(r) == 1


# ---------------------------------------------------------------- 7. solver

def _f(x):
    return 2**x + x**3 + 3**x


def test_exponential_fits_on_an_integer_cell_solves_to_5(tmp_path):
    assert _f(5) == 400 <= 1000 < _f(6) == 1009
    spec = write(tmp_path, SMALL_MODEL + HARDWARE + 'deployment d "D" {\n    model = m; hardware = h\n'
                 "    batch = ?\n    fits = 2^batch + batch^3 + 3^batch <= 1000\n}\n")
    r = cli("solve", spec, "--for", "batch", code=0)
    assert "largest batch: 5" in r.stdout and "checked: it fits, one more does not" in r.stdout
    assert cells(cli("eval", "--json", spec, code=0), "d")["batch"] == 5


def test_exponential_fits_on_a_new_unknown_answers_or_explains(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let x = ?\n    let fits = 2^x + x^3 + 3^x <= 1000\n}\n")
    r = cli("solve", spec, "--for", "x", "--json")
    assert r.exit_code in (0, 1)
    answer = json.loads(r.stdout) if r.exit_code == 0 else None
    if answer and answer["value"] is not None:
        v = answer["value"]
        assert 5 <= v < 6 and _f(v) <= 1000
    else:
        assert (answer and answer["message"]) or "error:" in r.stderr
    r = cli("eval", spec)
    assert r.exit_code in (0, 1)
    if r.exit_code == 1:
        assert errors(r) == 1


def test_exponential_fits_message_is_not_false(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let x = ?\n    let fits = 2^x + x^3 + 3^x <= 1000\n}\n")
    r = cli("solve", spec, "--for", "x", "--json", code=0)
    answer = json.loads(r.stdout)
    assert answer["value"] is not None or "no positive" not in (answer["message"] or "")


def test_power_tower_returns_quickly(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let x = ?\n    let fits = x^x^x <= 1000\n}\n")
    yardstick = 10 * check_seconds(write(tmp_path, ONE_MODEL + "}\n", name="plain.kvspec")) + 5
    r, seconds = timed("solve", spec, "--for", "x", "--json")
    assert r.exit_code in (0, 1)
    r, more = timed("eval", spec)
    assert r.exit_code in (0, 1)
    assert seconds + more < yardstick
    spec = write(tmp_path, SMALL_MODEL + HARDWARE + 'deployment d "D" {\n    model = m; hardware = h\n'
                 "    batch = ?\n    fits = batch^batch^batch <= 1000\n}\n", name="tower.kvspec")
    r, seconds = timed("solve", spec, "--for", "batch", code=0)
    assert seconds < 10 * check_seconds(spec) + 5
    assert "largest batch: 2" in r.stdout  # 2^4 = 16 fits, 3^27 does not


@pytest.mark.parametrize("command", ["eval", "solve"])
def test_fits_that_is_a_number_is_an_error(tmp_path, command):
    spec = write(tmp_path, ONE_MODEL + "    let x = ?\n    let fits = x\n}\n")
    args = ["solve", spec, "--for", "x"] if command == "solve" else ["eval", spec]
    r = cli(*args, code=1)
    assert "must be a condition" in r.stderr and errors(r) == 1


def test_non_monotone_fits_is_not_silently_answered(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let x = ?\n    let fits = x != 3\n}\n")
    r = cli("eval", "--json", spec)
    if r.exit_code == 1:
        assert ("does not check out" in r.stderr or "kvdsl solves conditions made of" in r.stderr) and errors(r) == 1
    else:
        assert r.exit_code == 0 and cells(r, "a")["x"] != 3
    r = cli("solve", spec, "--for", "x")
    assert r.exit_code in (0, 1)
    if re.search(r"(smallest|largest) x: 3\b", r.stdout):
        assert "NOT verified" in r.stdout


def test_non_monotone_fits_answer_is_really_the_smallest(tmp_path):
    spec = write(tmp_path, SMALL_MODEL + HARDWARE + 'deployment d "D" {\n    model = m; hardware = h\n'
                 "    batch = ?\n    fits = batch != 3\n}\n")
    r = cli("solve", spec, "--for", "batch")
    match = re.search(r"(smallest|largest) batch: (\d+)\s+\(checked", r.stdout)
    if match and match.group(1) == "smallest":
        assert not any(n != 3 for n in range(1, int(match.group(2))))


# ---------------------------------------------------------------- 8. requirements

BROKEN = [
    ("gpus", "-1", "`gpus` = -1"),
    ("gpus", "2.5", "`gpus` = 2.5"),
    ("gpus", "0", "`gpus` = 0"),
    ("batch", "0", "`batch` = 0"),
    ("batch", "-3", "`batch` = -3"),
    ("utilization", "2", "`utilization` = 2"),
    ("utilization", "-1", "`utilization` = -1"),
    ("context", "-5K", "`context` = -5,120 tokens"),
]
BROKEN_IDS = [f"{c}={v}" for c, v, _ in BROKEN]


@pytest.mark.parametrize("cell, value, shown", BROKEN, ids=BROKEN_IDS)
def test_set_breaking_a_requirement_is_a_usage_error(cell, value, shown):
    r = cli("eval", LLAMA, "--set", f"{cell}={value}", code=2)
    assert "breaks `require" in r.stderr and f"require {cell} " in r.stderr
    assert shown in r.stderr
    assert errors(r) == 1


@pytest.mark.parametrize("cell, value, shown", BROKEN, ids=BROKEN_IDS)
def test_spec_breaking_a_requirement_points_at_the_users_line(tmp_path, cell, value, shown):
    spec = write(tmp_path, SMALL_MODEL + HARDWARE + 'deployment d "D" {\n    model = m\n    hardware = h\n'
                 f"    {cell} = {value}\n}}\n")
    r = cli("eval", spec, code=1)
    assert "breaks `require" in r.stderr and shown in r.stderr
    assert errors(r) == 1
    path, line, col = LOCATION.search(r.stderr).groups()
    assert Path(path).name == spec.name and "prelude" not in path
    assert (line, col) == ("6", "5")


def test_sliding_layers_without_a_window(tmp_path):
    spec = write(tmp_path, 'model m "M" {\n    heads = 4; head_dim = 8; params = 1e9\n    layer_kinds = [sliding] * 4\n}\n')
    r = cli("eval", spec, code=1)
    assert "breaks `require sliding_layers == 0 or window >= 1 tokens`" in r.stderr
    path, line, _ = LOCATION.search(r.stderr).groups()
    assert Path(path).name == spec.name and line == "3"


def test_full_layers_take_no_argument(tmp_path):
    spec = write(tmp_path, 'model m "M" {\n    heads = 4; head_dim = 8; params = 1e9\n    layer_kinds = [full(5)] * 4\n}\n')
    r = cli("eval", spec, code=1)
    assert "only `sliding` layers take an argument" in r.stderr and errors(r) == 1


def test_solve_answer_breaking_a_requirement_is_no_answer():
    r = cli("solve", CATALOG, "--for", "utilization", "--block", "llama_3_1_405b_a100x4", "--json", code=1)
    answer = json.loads(r.stdout)
    assert answer["value"] is None
    assert "require utilization > 0 and utilization <= 1" in answer["message"]


def test_solve_past_the_context_limit_says_why():
    r = cli("solve", CATALOG, "--for", "gpus", "--set", "context=1M", "--block", LLAMA_BLOCK, "--json", code=1)
    answer = json.loads(r.stdout)
    assert answer["value"] is None
    assert "`context <= model.context_limit` is false" in answer["message"]


def test_solve_for_something_nothing_bounds():
    r = cli("solve", CATALOG, "--block", "mamba_2_8b_l4", "--for", "kv_bytes_per_element", "--json", code=1)
    answer = json.loads(r.stdout)
    assert answer["value"] is None
    assert "nothing bounds it" in answer["message"]


# ---------------------------------------------------------------- 9. slots

def test_unknown_in_a_reference_slot_is_one_error(tmp_path):
    spec = write(tmp_path, SMALL_MODEL + HARDWARE + 'deployment d "D" {\n    model = m\n    hardware = h\n'
                 "    kv_dtype = ?\n}\n")
    r = cli("eval", spec, code=1)
    assert errors(r) == 1 and "must name a format" in r.stderr


@pytest.mark.parametrize("setting, fragment", [
    ('kv_dtype="fp8"', "must name a format"),
    ("kv_dtype=?", "must name a format"),
    ("model=?", "must name a model"),
])
def test_bad_set_of_a_reference_slot_is_one_error(setting, fragment):
    r = cli("eval", LLAMA, "--set", setting, code=2)
    assert errors(r) == 1 and fragment in r.stderr


def test_set_context_unknown_solves_only_deployments(tmp_path):
    spec = write(tmp_path, "".join(f'import "{SPECS / "deployments" / name}"\n' for name in
                                   ("llama_3_1_70b_h100x4_fp8.kvspec", "mistral_7b_l4.kvspec", "gpt_oss_120b_h100.kvspec")))
    before = json.loads(cli("eval", "--json", spec, code=0).stdout)["blocks"]
    r = cli("eval", "--json", spec, "--set", "context=?", code=0)
    assert r.stderr == ""
    after = json.loads(r.stdout)["blocks"]
    models = [b for b, info in before.items() if info["kind"] == "model"]
    assert len(models) == 3
    for b in models:
        assert after[b] == before[b]
    for b in ("llama_3_1_70b_h100x4_fp8", "mistral_7b_l4", "gpt_oss_120b_h100"):
        assert after[b]["cells"]["fits"]["value"] is True
        assert isinstance(after[b]["cells"]["context"]["value"], int)
    assert after["llama_3_1_70b_h100x4_fp8"]["cells"]["context"]["value"] == 42400


def test_set_context_unknown_on_the_catalog_is_no_cascade():
    r = cli("eval", CATALOG, "--set", "context=?", code=2)
    assert errors(r) == 1  # the setting is at fault: one error, at it
    assert "needs a `fits`" not in r.stderr and "fits` constraint" not in r.stderr
    # a block that already has `batch = ?`
    assert QWEN_BLOCK in r.stderr or "glm_4_5_air_h100x4" in r.stderr


def test_table_with_a_nonsense_format_is_one_error():
    r = cli("table", SPECS / "models" / "qwen3_8b.kvspec", "--kv-dtype", "nonsense", code=2)
    assert errors(r) == 1 and "nonsense" in r.stderr


def test_set_error_excerpt_shows_the_setting_at_fault():
    r = cli("eval", LLAMA, "--set", "gpus=0", "--set", "batch=4", code=2)
    assert "\n    gpus=0\n" in r.stderr and "batch=4" not in r.stderr  # the setting as typed


# ---------------------------------------------------------------- 10. parse messages

def test_two_cells_on_one_line(tmp_path):
    spec = write(tmp_path, 'model m "M" {\n    layers = 1 layers = 2\n    heads = 1; head_dim = 1; params = 1\n}\n')
    r = cli("eval", spec, code=1)
    assert "a new cell starts on a new line or after `;`" in r.stderr and errors(r) == 1


def test_unclosed_parenthesis_is_not_an_unknown_unit(tmp_path):
    spec = write(tmp_path, 'model m "M" {\n    layers = (1 + 2\n    heads = 3\n    head_dim = 1; params = 1\n}\n')
    r = cli("eval", spec, code=1)
    assert "unknown unit" not in r.stderr and errors(r) == 1


@pytest.mark.parametrize("line", [
    "    let x = 1 1  # " + "a" * 200_000,
    "    let x = 1" + " " * 200_000 + "$",
    "    let x = " + "1 + " * 50_000 + "1 1",
], ids=["error-then-long-comment", "error-after-long-spaces", "error-after-long-sum"])
def test_error_on_a_very_long_line_is_short(tmp_path, line):
    spec = write(tmp_path, ONE_MODEL + line + "\n}\n")
    r = cli("eval", spec, code=1)
    assert len(r.output) < 1000, len(r.output)
    assert errors(r) == 1


@pytest.mark.parametrize("line", [
    "    let x = " + "a" * 200_000,
    "    let x = 1 " + "b" * 200_000,
    "    layers = " + "9" * 200_000,
], ids=["unknown-name", "unknown-unit", "long-number"])
def test_error_quoting_a_very_long_token_is_short(tmp_path, line):
    spec = write(tmp_path, ONE_MODEL + line + "\n}\n")
    r = cli("eval", spec, code=1)
    assert len(r.output) < 1000, len(r.output)


# ---------------------------------------------------------------- 11. export

def test_export_title_with_a_control_character(tmp_path):
    import openpyxl

    spec = write(tmp_path, 'model m "M\x01x" { layers = 1; heads = 1; head_dim = 1; params = 1 }\n')
    out = tmp_path / "out.xlsx"
    cli("export", spec, "-o", out, code=0)
    texts = [v for ws in openpyxl.load_workbook(out) for row in ws.iter_rows(values_only=True)
             for v in row if isinstance(v, str)]
    assert not any("\x01" in t for t in texts)
    assert any(re.fullmatch(r"M.x", t) for t in texts)


def test_export_excel_name_too_long(tmp_path):
    spec = write(tmp_path, ONE_MODEL + "    let " + "c" * 260 + " = 1\n}\n")
    out = tmp_path / "out.xlsx"
    r = cli("export", spec, "-o", out, code=1)
    assert "longer than" in r.stderr and errors(r) == 1
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == [spec.name]  # no temporary file left


def test_export_out_not_xlsx(tmp_path):
    r = cli("export", LLAMA, "-o", tmp_path / "out.csv", code=2)
    assert ".xlsx" in r.stderr
    assert not (tmp_path / "out.csv").exists()


# ---------------------------------------------------------------- 12. broken pipe

@pytest.mark.parametrize("args", [
    ["eval", CATALOG],
    ["sweep", LLAMA, "--block", LLAMA_BLOCK, "--vary", "batch=1:200000"],
], ids=["eval", "sweep"])
def test_broken_pipe_is_quiet(args):
    process = subprocess.Popen([sys.executable, "-m", "kvdsl", *args], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read().decode("utf-8", "replace")
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert first
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert process.returncode in (0, 1)
