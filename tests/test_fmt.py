"""`kvdsl fmt` and `format_text`: one layout, whitespace only, every comment kept."""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import answered, cli
from click.testing import CliRunner
from lark import Lark

from kvdsl import fmt, loader
from kvdsl.cli import main
from kvdsl.errors import SpecSyntaxError
from kvdsl.fmt import FormatterBug, format_text
from kvdsl.parser import GRAMMAR

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIRS = ["specs", "kvdsl/prelude", "tests/specs", "tests/engine_tests", "docs/examples"]
ALL_SPECS = sorted(p for d in SPEC_DIRS for p in (ROOT / d).rglob("*.kvspec"))

MESSY = """

# a header
import   "other.kvspec"
model m "M"{
  layers=32# layers
      heads = 32   # aligned by hand
\tkv_heads  =  8


  head_dim = 128 ; hidden_size=4096
   ## a doc comment
   let x = - 2 * (layers+1) ^ 2 +
     max( 1 ,2 ) # after a continuation
   let y = if x>0 then
   # inside the rule
        1 else 2
   let z = "a  b" &"c"
   layer_kinds=[ sliding( 128 ,kv_heads=4 ) , full ]*16
   bandwidth : bytes / s
   let w = 1 + \\
   2

}
deployment d "D" extends x { model = m ;hardware=h200 }
model e "E" {}
# the end


"""

MESSY_FORMATTED = """# a header
import "other.kvspec"

model m "M" {
    layers = 32 # layers
    heads = 32     # aligned by hand
    kv_heads = 8

    head_dim = 128; hidden_size = 4096
    ## a doc comment
    let x = -2 * (layers + 1) ^ 2 +
        max(1, 2) # after a continuation
    let y = if x > 0 then
        # inside the rule
        1 else 2
    let z = "a  b" & "c"
    layer_kinds = [sliding(128, kv_heads = 4), full] * 16
    bandwidth: bytes/s
    let w = 1 + \\
        2
}

deployment d "D" extends x { model = m; hardware = h200 }

model e "E" {}

# the end
"""


_FOUND: list = []


@functools.lru_cache(maxsize=1)
def _comment_reader() -> Lark:
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", start="start",
                lexer_callbacks={"COMMENT": lambda t: _FOUND.append(str(t).rstrip())})


def comments(text: str) -> list:
    """Every comment the kvspec lexer reads, in order (independently of the formatter)."""
    _FOUND.clear()
    _comment_reader().parse(text)
    return list(_FOUND)


def test_the_layout_of_a_messy_file():
    assert format_text(MESSY) == MESSY_FORMATTED


def test_formatting_keeps_hanging_alignment_inside_brackets():
    text = ('defaults deployment {\n'
            '    a = 1\n'
            '    b = max(a + 1,\n'
            '            a + 2,   # second\n'
            '      a + 3)\n'
            '}\n')
    assert format_text(text) == ('defaults deployment {\n'
                                 '    a = 1\n'
                                 '    b = max(a + 1,\n'
                                 '            a + 2,   # second\n'
                                 '        a + 3)\n'
                                 '}\n')


def test_a_comment_continued_under_a_trailing_comment_stays_under_it():
    text = ('model m "M" {\n'
            '  layers = 32       # the layers\n'
            '                    # of the model\n'
            '  heads = 4\n'
            '                    # a comment line of its own\n'
            '}\n')
    assert format_text(text) == ('model m "M" {\n'
                                 '    layers = 32     # the layers\n'
                                 '                    # of the model\n'
                                 '    heads = 4\n'
                                 '    # a comment line of its own\n'
                                 '}\n')


def test_crlf_and_missing_final_newline():
    assert format_text('model m "M" {\r\n  layers = 2\r\n}') == 'model m "M" {\n    layers = 2\n}\n'


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_formatting_twice_changes_nothing_and_keeps_comments(path):
    text = path.read_text(encoding="utf-8")
    once = format_text(text, str(path))
    assert format_text(once, str(path)) == once
    assert comments(once) == comments(text)


def test_the_spec_directories_hold_specs():
    assert len(ALL_SPECS) > 60
    assert any("prelude" in str(p) for p in ALL_SPECS)


def _eval_json(path):
    result = cli("eval", "--json", path)
    assert answered(result), result.output
    return json.loads(result.stdout)


def test_a_formatted_catalog_and_prelude_evaluate_the_same(tmp_path, monkeypatch):
    before = _eval_json(ROOT / "specs" / "catalog.kvspec")
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    shutil.copytree(ROOT / "kvdsl" / "prelude", tmp_path / "prelude")
    cli("fmt", tmp_path / "specs", tmp_path / "prelude", code=0)
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))
    monkeypatch.setattr(loader, "PRELUDE", tmp_path / "prelude")
    assert _eval_json(tmp_path / "specs" / "catalog.kvspec") == before


def _messy_tree(tmp_path):
    (tmp_path / "nested" / ".hidden").mkdir(parents=True)
    messy = tmp_path / "nested" / "messy.kvspec"
    messy.write_text(MESSY, encoding="utf-8")
    tidy = tmp_path / "tidy.kvspec"
    tidy.write_text(MESSY_FORMATTED, encoding="utf-8")
    (tmp_path / "nested" / "notes.txt").write_text("x=1\n")
    (tmp_path / "nested" / ".hidden" / "skip.kvspec").write_text("x=1\n")
    return messy, tidy


def test_check_lists_what_would_change_and_writes_nothing(tmp_path):
    messy, tidy = _messy_tree(tmp_path)
    result = cli("fmt", "--check", tmp_path, code=1)
    assert result.output.splitlines() == [f"would format {messy}",
                                          "1 file would be formatted, 1 file already formatted"]
    assert messy.read_text(encoding="utf-8") == MESSY
    result = cli("fmt", "--check", tidy, code=0)
    assert result.output == "1 file already formatted\n"


def test_fmt_writes_only_changed_files(tmp_path):
    messy, tidy = _messy_tree(tmp_path)
    os.chmod(messy, 0o640)
    os.utime(tidy, ns=(1_000_000_000, 1_000_000_000))
    result = cli("fmt", tmp_path, code=0)
    assert result.output.splitlines() == [f"formatted {messy}", "1 file formatted, 1 file unchanged"]
    assert messy.read_text(encoding="utf-8") == MESSY_FORMATTED
    assert messy.stat().st_mode & 0o777 == 0o640
    assert tidy.stat().st_mtime_ns == 1_000_000_000
    assert (tmp_path / "nested" / ".hidden" / "skip.kvspec").read_text() == "x=1\n"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["messy.kvspec", "notes.txt", "skip.kvspec", "tidy.kvspec"]
    cli("fmt", "--check", tmp_path, code=0)


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path):
    path = tmp_path / "x.kvspec"
    path.write_text('model m "M" {\n  layers=2   # two\n    heads = 1\n}', encoding="utf-8")
    result = cli("fmt", "--diff", path, code=0)
    assert result.output == (f"--- {path}\n+++ {path}\n@@ -1,4 +1,4 @@\n"
                             ' model m "M" {\n'
                             "-  layers=2   # two\n"
                             "+    layers = 2 # two\n"
                             "     heads = 1\n"
                             "-}\n"
                             "\\ No newline at end of file\n"
                             "+}\n")
    assert path.read_text(encoding="utf-8").endswith("}")
    cli("fmt", "--diff", "--check", path, code=1)


def test_a_parse_error_is_positioned_and_leaves_the_file_alone(tmp_path):
    bad = tmp_path / "bad.kvspec"
    bad.write_bytes(b'model a "A" {\n  x = = 1\n}\n')
    other = tmp_path / "other.kvspec"
    other.write_text('model b "B" {\nlayers=1\n}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["fmt", str(bad), str(other)])
    assert result.exit_code == 1
    assert f"{bad}:2:7: error: unexpected `=`" in result.output
    assert "      x = = 1\n          ^" in result.output
    assert bad.read_bytes() == b'model a "A" {\n  x = = 1\n}\n'
    assert other.read_text(encoding="utf-8") == 'model b "B" {\n    layers = 1\n}\n'
    assert "1 file formatted, 1 file not formatted (errors above)" in result.output


def test_format_text_raises_the_positioned_error_check_gives():
    with pytest.raises(SpecSyntaxError) as caught:
        format_text('model a "A" {\n  x = = 1\n}\n', "in.kvspec")
    assert caught.value.span.line == 2 and caught.value.span.column == 7


def test_a_missing_path_is_a_usage_error(tmp_path):
    result = cli("fmt", tmp_path / "missing.kvspec", code=2)
    assert "no file or directory" in result.output


def test_a_formatter_bug_is_reported_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(fmt, "_space", lambda prev, token: "")
    with pytest.raises(FormatterBug):
        format_text('model a "A" {\n    let x = 1\n}\n')
    path = tmp_path / "a.kvspec"
    path.write_text('model a "A" {\n    let x = 1\n}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["fmt", str(path)])
    assert result.exit_code == 3
    assert "internal error: FormatterBug" in result.output
    assert path.read_text(encoding="utf-8") == 'model a "A" {\n    let x = 1\n}\n'


def test_every_spec_and_the_prelude_is_formatted():
    result = CliRunner().invoke(main, ["fmt", "--check", str(ROOT / "specs"), str(ROOT / "kvdsl" / "prelude")])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("files already formatted\n")


def test_an_expression_thousands_of_levels_deep_is_formatted_like_any_other():
    deep = 'model m "M" {\n    x = ' + "not " * 20_000 + "true\n}\n"
    assert format_text(deep) == deep  # comparing the trees recursed past Python's limit
