"""The repository's shape: one grammar, shipped as a real file; no wheels committed."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_ships_the_grammar_as_a_file():
    shipped = ROOT / "kvdsl" / "kvspec.lark"
    assert shipped.is_file() and not shipped.is_symlink()


def test_grammar_directory_holds_the_same_grammar():
    assert (ROOT / "grammar" / "kvspec.lark").read_bytes() == (ROOT / "kvdsl" / "kvspec.lark").read_bytes()


def test_no_wheel_in_the_repository():
    assert not list(ROOT.glob("*.whl"))
    assert "*.whl" in (ROOT / ".gitignore").read_text().split()
