"""Regression tests for faults reported against the engine (issues 15.1, 16.2-16.8).

Each test fails on the code before its fix.  Commands run through click's
CliRunner unless a real process is needed (signals).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvdsl.cli import main

REPO = Path(__file__).resolve().parent.parent
DEPLOYMENTS = REPO / "specs" / "deployments"
MAMBA = str(DEPLOYMENTS / "mamba_2_8b_l4.kvspec")
MISTRAL = str(DEPLOYMENTS / "mistral_7b_l4.kvspec")
QWEN_SOLVED = str(DEPLOYMENTS / "qwen3_32b_h200_solved.kvspec")
LLAMA = str(DEPLOYMENTS / "llama_3_1_70b_h100x4_fp8.kvspec")

LOCATION = re.compile(r"^(\S+):(\d+):(\d+): error: ", re.M)


def cli(*args, code=None):
    """Run `kvdsl ARGS`; never a traceback or an internal error; check the exit status."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output[-3000:]
    assert "internal error" not in result.output, result.output[-3000:]
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.output[-3000:])
    return result


def write_bytes(tmp_path, data: bytes, name="spec.kvspec") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def quoted_line(stderr: str) -> str:
    """The source line an error quotes (the line after the location)."""
    lines = stderr.split("\n")
    first = next(i for i, line in enumerate(lines) if LOCATION.match(line))
    return lines[first + 1].strip()


# ---------------------------------------------------------------- line breaks (16.5)

MODEL_LINES = [
    'model m "M" {',
    "    # a comment holding {sep} in its text",
    "    layers = 2; heads = 4; head_dim = 8; params = 1e9",
    "    kv_heads = nope",
    "}",
]
SEPARATORS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
def test_other_line_separators_are_ordinary_characters(tmp_path, sep):
    text = "\n".join(MODEL_LINES).replace("{sep}", sep) + "\n"
    spec = write_bytes(tmp_path, text.encode("utf-8"))
    r = cli("eval", spec, code=1)
    where = LOCATION.search(r.stderr)
    assert where.group(2, 3) == ("4", "16"), r.stderr
    assert quoted_line(r.stderr) == "kv_heads = nope", r.stderr
    caret = r.stderr.split("\n")[2]
    assert caret == " " * 19 + "^^^^", r.stderr


@pytest.mark.parametrize("ending", ["\r", "\r\n"], ids=["CR", "CRLF"])
def test_cr_and_crlf_files_read_as_lines(tmp_path, ending):
    text = ending.join(MODEL_LINES).replace("{sep}", "x") + ending
    spec = write_bytes(tmp_path, text.encode("utf-8"))
    r = cli("eval", spec, code=1)
    assert LOCATION.search(r.stderr).group(2, 3) == ("4", "16"), r.stderr
    assert quoted_line(r.stderr) == "kv_heads = nope"


def test_form_feed_in_a_comment_before_a_layer_pattern(tmp_path):
    lines = ['model m "M" {', "    # a \f comment", "    layer_kinds = [sliding, full]",
             "    layers = 2; heads = 4; head_dim = 8; params = 1e9; window = 128 tokens", "}"]
    spec = write_bytes(tmp_path, ("\n".join(lines) + "\n").encode("utf-8"))
    plain = write_bytes(tmp_path, ("\n".join(lines) + "\n").replace("\f", "x").encode("utf-8"), "plain.kvspec")
    got = json.loads(cli("eval", "--json", spec, code=0).stdout)["blocks"]["m"]["cells"]
    expected = json.loads(cli("eval", "--json", plain, code=0).stdout)["blocks"]["m"]["cells"]
    assert got == expected


def test_explain_shows_the_rule_itself_after_a_separator(tmp_path):
    lines = ['model m "M" {', "    # a \u2028 comment", "    layers = 2; heads = 4; head_dim = 8; params = 1e9",
             "    kv_heads = heads / 2", "}"]
    spec = write_bytes(tmp_path, ("\n".join(lines) + "\n").encode("utf-8"))
    r = cli("explain", spec, "kv_heads", code=0)
    assert "kv_heads = heads / 2" in r.stdout, r.stdout


def test_line_endings_share_a_cache_entry(tmp_path, monkeypatch):
    from kvdsl import cache
    from kvdsl.parser import parse_file

    monkeypatch.setenv("KVDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVDSL_NO_CACHE", raising=False)
    cache.directory.cache_clear()
    try:
        body = "\n".join(MODEL_LINES[:3]).replace("{sep}", "x") + "\n    kv_heads = 2\n}\n"
        lf = write_bytes(tmp_path, body.encode(), "lf.kvspec")
        crlf = write_bytes(tmp_path, body.replace("\n", "\r\n").encode(), "crlf.kvspec")
        first = parse_file(lf, "m.kvspec")
        assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
        again = parse_file(crlf, "m.kvspec")
        assert again == first
        assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
        cell = first.items[0].cells[-1]
        assert (cell.name, cell.span.line, cell.source) == ("kv_heads", 4, "kv_heads = 2")
    finally:
        cache.directory.cache_clear()
