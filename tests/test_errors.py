"""How kvdsl reports mistakes: golden files of rendered errors, exit statuses.

Every `tests/golden/errors/NAME.kvspec` (names starting with `_` are helpers
that other cases import) is checked with `kvdsl check NAME.kvspec` from inside
that directory, and its stderr must equal `NAME.txt`.  Paths into the prelude
are absolute and its line numbers move as the prelude is edited, so they are
normalised to `<prelude>/FILE.kvspec:N:N` before comparing.

To regenerate the goldens after an intended change of wording:

    let KVDSL_REGEN_GOLDEN=1 python -m pytest tests/test_errors.py

then review the diff of `tests/golden/errors/*.txt`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import kvdsl
from kvdsl.cli import main

GOLDEN = Path(__file__).parent / "golden" / "errors"
PRELUDE = Path(kvdsl.__file__).resolve().parent / "prelude"
REGEN = os.environ.get("KVDSL_REGEN_GOLDEN") == "1"

#: Cases run with another command than `check`.
COMMANDS = {"division_by_zero": ["eval"]}

#: The number of errors each case must report (1 unless listed).
ERROR_COUNTS = {"several_errors": 3, "typo_gpus": 3, "unknown_engine_setting": 2}

CASES = sorted(p.stem for p in GOLDEN.glob("*.kvspec") if not p.name.startswith("_"))

ERROR_LINE = re.compile(r"^(\S+:\d+:\d+: )?error: ", re.M)

M = 'model m "M" {\n    layers = 2\n    heads = 4\n    head_dim = 8\n    params = 1e9\n'
H = 'hardware h "H" {\n    memory = 80 GiB\n    bandwidth = 3.35 TB/s\n}\n'


def normalise(text: str) -> str:
    text = text.replace(str(PRELUDE), "<prelude>")
    text = re.sub(r"\S*kvdsl/prelude(?=/)", "<prelude>", text)
    return re.sub(r"(<prelude>/[\w.]+):\d+:\d+", r"\1:N:N", text)


def invoke(args):
    result = CliRunner().invoke(main, args)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def count_errors(stderr: str) -> int:
    return len(ERROR_LINE.findall(stderr))


def test_there_are_golden_cases():
    assert len(CASES) >= 30
    for name in CASES:
        assert REGEN or (GOLDEN / f"{name}.txt").exists(), f"no golden output for {name}"


@pytest.mark.parametrize("name", CASES)
def test_golden_error(name, monkeypatch):
    monkeypatch.chdir(GOLDEN)
    result = invoke(COMMANDS.get(name, ["check"]) + [f"{name}.kvspec"])
    stderr = normalise(result.stderr)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert count_errors(stderr) == ERROR_COUNTS.get(name, 1), stderr
    golden = GOLDEN / f"{name}.txt"
    if REGEN:
        golden.write_text(stderr, encoding="utf-8")
        return
    assert stderr == golden.read_text(encoding="utf-8")


# ---- properties every rendered error has ------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_rendered_error_shape(name):
    """`path:line:col: error: message`, then the line and carets under the span."""
    text = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8") if not REGEN else ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^(\S+):(\d+):(\d+): error: \S", line)
        if not match or i + 2 >= len(lines) or not lines[i + 2].lstrip().startswith("^"):
            continue
        column = int(match.group(3))
        caret = lines[i + 2]
        assert caret.startswith("    ")
        assert caret.index("^") == 4 + column - 1, (line, caret)
        assert set(caret.strip()) == {"^"}


def test_several_errors_are_all_reported(monkeypatch):
    monkeypatch.chdir(GOLDEN)
    result = invoke(["check", "several_errors.kvspec"])
    assert result.exit_code == 1
    assert count_errors(result.stderr) == 3
    assert [int(n) for n in re.findall(r"^several_errors\.kvspec:(\d+):", result.stderr, re.M)] == [6, 7, 8]


def test_errors_in_several_files_are_all_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a.kvspec").write_text(M + "    let x = nope\n}\n")
    Path("b.kvspec").write_text('model n "N" {\n    layers = 1 GiB + 1 tokens\n    heads = 1\n    head_dim = 1\n    params = 1\n}\n')
    Path("c.kvspec").write_text("model {\n")
    result = invoke(["check", "a.kvspec", "b.kvspec", "c.kvspec"])
    assert result.exit_code == 1
    assert count_errors(result.stderr) == 3, result.stderr
    for name in ("a.kvspec:6:13", "b.kvspec:2:14", "c.kvspec:1:7"):
        assert name in result.stderr


# ---- exit statuses --------------------------------------------------------------------


def test_exit_0_when_ok(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("ok.kvspec").write_text(M + "}\n")
    result = invoke(["check", "ok.kvspec"])
    assert result.exit_code == 0
    assert result.stdout.startswith("ok: 1 model;")
    assert result.stderr == ""


@pytest.mark.parametrize("args, fragment", [
    (["eval", "ok.kvspec", "--set", "let contxt=1"], "did you mean `context`?"),
    (["eval", "ok.kvspec", "--set", "nope.context=1"], "no block named `nope`"),
    (["eval", "ok.kvspec", "--set", "context"], "--set needs NAME=VALUE"),
    (["eval", "ok.kvspec", "--set", "context=)"], "unexpected"),
    (["eval", "ok.kvspec", "--bogus"], "No such option"),
    (["check"], "Missing argument"),
    (["frobnicate", "ok.kvspec"], "No such command"),
])
def test_usage_errors_exit_2(tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    Path("ok.kvspec").write_text(M + "}\n")
    result = invoke(args)
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr
    assert result.stdout == ""


def test_missing_file_is_a_spec_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(["check", "absent.kvspec"])
    assert result.exit_code == 1
    assert result.stderr == "error: cannot read `absent.kvspec`: not found\n"


def _python_m(args, cwd):
    return subprocess.run([sys.executable, "-m", "kvdsl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_python_m_spec_error(monkeypatch):
    proc = _python_m(["check", "typo_name.kvspec", "pattern_mismatch.kvspec"], GOLDEN)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert count_errors(proc.stderr) == 2
    assert "typo_name.kvspec:6:16: error: unknown name `head_dm`" in proc.stderr


def test_python_m_usage_error_and_eval_error(tmp_path):
    (tmp_path / "ok.kvspec").write_text(M + "}\n")
    proc = _python_m(["eval", "ok.kvspec", "--set", "lyers=4"], tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "did you mean `layers`?" in proc.stderr
    proc = _python_m(["eval", "division_by_zero.kvspec"], GOLDEN)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "division by zero" in proc.stderr


def test_python_m_ok(tmp_path):
    (tmp_path / "ok.kvspec").write_text(M + "}\n")
    proc = _python_m(["eval", "--json", "ok.kvspec"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.lstrip().startswith("{")


# ---- bugs: each test states the behaviour wanted ------------------------------------------


def _check(tmp_path, monkeypatch, text: str, args=("check",), name="spec.kvspec"):
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(textwrap.dedent(text))
    return invoke([*args, name])


def test_number_where_a_block_is_required(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + "}\n" + H + 'deployment d "D" {\n    model = m\n    hardware = 4\n}\n')
    assert result.exit_code == 1
    assert count_errors(result.stderr) == 1, result.stderr
    assert result.stderr.startswith("spec.kvspec:13:16: error:"), result.stderr


def test_unknown_format_is_one_error(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + "    kv_dtype = fp9\n}\n")
    assert count_errors(result.stderr) == 1, result.stderr
    assert "did you mean `fp8`?" in result.stderr


def test_deployment_without_model_reports_only_the_missing_cell(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + "}\n" + H + 'deployment d "D" {\n    hardware = h\n}\n')
    assert result.exit_code == 1
    assert count_errors(result.stderr) == 1, result.stderr
    assert "does not set `model`" in result.stderr


def test_extends_unknown_is_one_error(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + '}\nmodel m2 "M2" extends mm {\n    kv_heads = 1\n}\n')
    assert count_errors(result.stderr) == 1, result.stderr
    assert "spec.kvspec:7:23: error: `m2` extends `mm`, which is not defined" in result.stderr


def test_division_by_literal_zero_message(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + "    let x = 5 / 0\n}\n", args=("eval",))
    assert result.exit_code == 1
    assert "division by zero" in result.stderr
    assert "`the divisor`" not in result.stderr


@pytest.mark.parametrize("text", [M, M + "    let x =\n}\n"], ids=["eof", "newline"])
def test_syntax_error_wording(tmp_path, monkeypatch, text):
    result = _check(tmp_path, monkeypatch, text)
    assert result.exit_code == 1
    assert "unexpected the " not in result.stderr and "unexpected a " not in result.stderr, result.stderr


def test_end_of_file_position_after_blank_lines(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + "\n\n")
    first = result.stderr.splitlines()[0]
    match = re.match(r"spec\.kvspec:(\d+):(\d+):", first)
    line, column = int(match.group(1)), int(match.group(2))
    source = (M + "\n\n").split("\n")
    assert column <= len(source[line - 1]) + 1, first


def test_percent_with_unit_message(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + "    let x = 5% tokens\n}\n")
    assert result.exit_code == 1
    assert "token count" not in result.stderr, result.stderr


def test_binary_points_at_the_first_bad_byte(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("junk.kvspec").write_bytes(b'model m "M" {\n    layers = 2\x00\x01\x02\xff\n}\n')
    result = invoke(["check", "junk.kvspec"])
    assert result.exit_code == 1
    assert "junk.kvspec:2:15: error: this is not a text file: binary data at byte 28" in result.stderr, result.stderr


def test_unterminated_string_message(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, M + '    source = "abc\n}\n')
    assert result.exit_code == 1
    assert "a quoted string" not in result.stderr, result.stderr


# ---- the commonest typos --------------------------------------------------------------

D = ('deployment d "D" {\n    model = m\n    hardware = h\n    gpus = 1\n    kv_dtype = fp16\n'
     '    context = 4K\n    batch = 1\n}\n')


def _typo(tmp_path, monkeypatch, old, new, *args):
    monkeypatch.chdir(tmp_path)
    text = M + "}\n" + H + D
    assert old in text
    Path("typo.kvspec").write_text(text.replace(old, new, 1))
    return invoke(list(args or ["check"]) + ["typo.kvspec"])


@pytest.mark.parametrize("written, meant", [("32k", "32K"), ("4m", "4M"), ("80gib", "80GiB"), ("2kb", "2 KB"), ("3mib", "3 MiB")])
def test_lower_case_suffix_suggests_the_right_case(tmp_path, monkeypatch, written, meant):
    result = _typo(tmp_path, monkeypatch, "context = 4K", f"context = {written}")
    assert result.exit_code == 1
    unit = written.lstrip("0123456789")
    column = len("    context = ") + len(written) - len(unit) + 1
    assert result.stderr.startswith(f"typo.kvspec:16:{column}: error: unknown unit `{unit}`")
    assert f"did you mean `{meant}`?" in result.stderr


def test_format_name_in_the_wrong_case_names_the_right_one(tmp_path, monkeypatch):
    result = _typo(tmp_path, monkeypatch, "kv_dtype = fp16", "kv_dtype = FP8")
    assert result.exit_code == 1
    assert "unknown format `FP8`" in result.stderr
    assert "did you mean `fp8`?" in result.stderr


def test_unknown_format_hint_lists_every_format(tmp_path, monkeypatch):
    result = _typo(tmp_path, monkeypatch, "kv_dtype = fp16", "kv_dtype = zz9")
    hint = next(line for line in result.stderr.splitlines() if line.startswith("hint:"))
    assert not hint.rstrip().endswith("...")
    for name in ("bf16", "fp8", "nvfp4", "q4_0", "q8_0"):
        assert f" {name}," in hint + "," or hint.endswith(name)


@pytest.mark.parametrize("written, meant", [("7B", "7e9"), ("1.5B", "1.5e9"), ("70M", "70e6")])
def test_params_in_billions_hints_the_exponent(tmp_path, monkeypatch, written, meant):
    result = _typo(tmp_path, monkeypatch, "params = 1e9", f"params = {written}")
    assert result.exit_code == 1
    assert "`params` is a plain number" in result.stderr
    assert f"is written `{meant}`" in result.stderr


def test_hub_id_is_not_fetched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(["import", "meta-llama/Llama-3.2-3B"])
    assert result.exit_code in (1, 2)
    assert "does not fetch" in result.stderr and "config.json" in result.stderr


@pytest.mark.parametrize("option, value, fragment", [
    ("--context", "32k", "did you mean `32K`?"),
    ("--context", "80 GiB", "is tokens, but this is bytes"),
    ("--context", "0", "breaks `require"),
    ("--kv-dtype", "FP8", "did you mean `fp8`?"),
])
def test_table_option_errors_name_the_option(tmp_path, monkeypatch, option, value, fragment):
    monkeypatch.chdir(tmp_path)
    Path("ok.kvspec").write_text(M + "}\n")
    result = invoke(["table", "ok.kvspec", option, value])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"{option} {value}: error:")
    assert "--set" not in result.stderr
    assert fragment in result.stderr


def test_several_blocks_hint_lists_them_all(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    many = "".join(D.replace('deployment d "D"', f'deployment d{i} "D{i}"') for i in range(14))
    Path("many.kvspec").write_text(M + "}\n" + H + many)
    result = invoke(["solve", "many.kvspec", "--for", "batch"])
    assert result.exit_code == 2
    hint = next(line for line in result.stderr.splitlines() if line.startswith("hint:"))
    assert all(f"d{i}" in hint.split() or f"d{i}," in hint.split() for i in range(14))


def test_unit_glued_to_a_token_suffix_asks_for_a_space(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("ok.kvspec").write_text(M + "}\n" + H)
    result = invoke(["eval", "ok.kvspec", "--set", "h.memory=80GiB", "--set", "h.memory=108715MiB"])
    assert result.exit_code == 2
    assert "`108715M` reads as a count of tokens" in result.stderr and "write `108715 MiB`" in result.stderr


def test_formula_excel_refuses_is_an_error_at_its_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = [f"input_number_{i}" for i in range(700)]
    cells = "".join(f"    let {name} = {i}\n" for i, name in enumerate(names))
    Path("long.kvspec").write_text(f'workload w "W" {{\n{cells}    let total = {" + ".join(names)}\n}}\n')
    result = invoke(["export", "long.kvspec", "-o", "long.xlsx"])
    assert result.exit_code == 1
    assert result.stderr.startswith("long.kvspec:702:5: error: the formula has 14,075 characters; "
                                    "Excel allows 8,192\n"), result.stderr
    assert "hint: write parts of the expression as cells of their own" in result.stderr
    assert not Path("long.xlsx").exists()
