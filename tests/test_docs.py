"""The documentation stays true: every command README.md and docs/*.md show is run and its output compared.

The conventions (docs/contributing.md, "Examples in the docs"):

- in a code block (fenced, or indented by four spaces), a line starting with
  `$ ` is a command; the lines after it, up to the next `$ ` line or the end
  of the block, are its output (stdout and stderr as a terminal shows them);
- a line that is only `...` stands for any number of lines (none included),
  and `[...]` inside a line for any text within that line: the only elisions
  allowed (timings are always elided);
- `<!-- docs-test: not run (REASON) -->` on the line before a block exempts
  its commands (say why: LibreOffice, a download, a long run);
- `kvdsl ...` commands run in-process through click's CliRunner, any other
  command (`mkdir`, `head`) in bash, all from the root of a fresh copy of the
  repository's files (one copy per document, commands in document order), so
  what they write stays there and every path they name must exist in a clone.

Every relative path a document names in backticks or links to must exist in a
clone too, and none may point outside it (`../shared/...`).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvdsl.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
SKIP = re.compile(r"<!--\s*docs-test:\s*not run\b")
FENCE = re.compile(r"^(\s*)(```|~~~)")
README_LIMIT = 12 * 1024


@dataclass
class Example:
    """One `$ command` of a document and the output shown for it."""

    doc: Path
    line: int
    command: str
    expected: list
    run: bool

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def code_blocks(text: str):
    """(first line number, lines with the block's indentation removed, exempt?) for every code block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        exempt = i > 0 and bool(SKIP.search(lines[i - 1]))
        if fence:
            indent, marker = len(fence.group(1)), fence.group(2)
            start, i = i + 1, i + 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                i += 1
            yield start + 1, [line[indent:] for line in lines[start:i]], exempt
            i += 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            start = i
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                i += 1
            yield start + 1, [line[4:] for line in lines[start:i]], exempt
        else:
            i += 1


def examples(doc: Path) -> list:
    """Every `$ ` command of a document, with its shown output."""
    found = []
    for first, block, exempt in code_blocks(doc.read_text(encoding="utf-8")):
        current = None
        for offset, line in enumerate(block):
            if line.startswith("$ "):
                current = Example(doc, first + offset, line[2:].strip(), [], not exempt)
                found.append(current)
            elif current is not None:
                current.expected.append(line.rstrip())
        for example in found:
            while example.expected and not example.expected[-1]:
                example.expected.pop()
    return found


ALL = [e for doc in DOCS for e in examples(doc)]


def matches(expected: list, actual: list) -> bool:
    """Whether `actual` lines are `expected` with its elisions (`...` lines, `[...]` in a line) filled in."""
    patterns = [None if line.strip() == "..." else
                re.compile(".*?".join(re.escape(part) for part in line.split("[...]")) + r"\Z", re.S)
                for line in expected]
    memo = {}

    def match(i: int, j: int) -> bool:
        if (i, j) not in memo:
            if i == len(patterns):
                memo[i, j] = j == len(actual)
            elif patterns[i] is None:
                memo[i, j] = match(i + 1, j) or (j < len(actual) and match(i, j + 1))
            else:
                memo[i, j] = j < len(actual) and bool(patterns[i].match(actual[j])) and match(i + 1, j + 1)
        return memo[i, j]

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * (len(actual) + len(patterns)) + 1000))
    try:
        return match(0, 0)
    finally:
        sys.setrecursionlimit(limit)


_copies: dict = {}


def clone(tmp_path_factory, doc: Path) -> Path:
    """A copy of the repository's tracked files, one per document."""
    if doc not in _copies:
        target = tmp_path_factory.mktemp("clone")
        for name in tracked():
            source = ROOT / name
            if source.is_file():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)
        _copies[doc] = target
    return _copies[doc]


def tracked() -> list:
    """The files a clone has: those git tracks (and new ones not ignored, before their commit)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name]


def arguments(command: str, cwd: Path) -> list:
    """The command's words after `kvdsl`, with globs expanded as a shell would (a quoted word is not)."""
    out = []
    for raw in shlex.split(command, posix=False)[1:]:
        word = shlex.split(raw)[0] if raw.strip("'\"") else ""
        if any(c in word for c in "*?[") and not word.startswith("-") and raw[:1] not in "'\"":
            hits = sorted(str(p.relative_to(cwd)) for p in cwd.glob(word))
            assert hits, f"`{word}` matches no file in a clone"
            out.extend(hits)
        else:
            out.append(word)
    return out


def test_there_are_examples():
    assert len([e for e in ALL if e.run]) >= 20
    assert {e.doc.name for e in ALL} >= {"README.md", "solving.md", "commands.md"}


def test_readme_is_short():
    assert (ROOT / "README.md").stat().st_size <= README_LIMIT


@pytest.mark.parametrize("example", [e for e in ALL if e.run], ids=lambda e: e.id)
def test_example(example, tmp_path_factory, monkeypatch):
    cwd = clone(tmp_path_factory, example.doc)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", "80")
    if shlex.split(example.command)[0] == "kvdsl":
        result = CliRunner().invoke(main, arguments(example.command, cwd))
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code in (0, 1, 2), result.output[-2000:]
        output = result.output
    else:  # a shell command around the examples (`mkdir`, `head`): run by the shell, in the clone
        done = subprocess.run(["bash", "-c", example.command], cwd=cwd, capture_output=True, text=True, timeout=120)
        output = done.stdout + done.stderr
    actual = [line.rstrip() for line in output.rstrip("\n").split("\n")] if output.strip() else []
    shown = "\n".join(example.expected)
    assert matches(example.expected, actual), (
        f"{example.id}: `{example.command}` printed\n" + "\n".join(actual[:80]) + f"\n\nbut the document shows\n{shown}")


PATH_IN_TEXT = re.compile(r"`((?:\.\./|\./)?(?:specs|tests|kvdsl|docs|benchmarks|grammar|exports|\.ci)/[^`\s]*)`"
                          r"|\]\(((?!https?:|#|mailto:)[^)\s#]+)")


def named_paths(doc: Path):
    """(line, path as written, path from the repository root) of every path a document names.

    A path in backticks is from the repository's root (as commands take it);
    a link's target is relative to the document, as Markdown reads it.
    """
    text = doc.read_text(encoding="utf-8")
    for lineno, line in enumerate(text.split("\n"), 1):
        for match in PATH_IN_TEXT.finditer(line):
            if match.group(1):
                yield lineno, match.group(1), ROOT / match.group(1)
            else:
                yield lineno, match.group(2), doc.parent / match.group(2)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_paths_named_exist_in_a_clone(doc):
    files = set(tracked())
    folders = {str(p) for f in files for p in Path(f).parents}
    missing = []
    for lineno, name, path in named_paths(doc):
        assert "../shared" not in name, f"{doc.name}:{lineno}: `{name}` is outside the repository"
        relative = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else None
        if relative is None:
            missing.append((lineno, name))
        elif any(c in relative for c in "*?["):
            if not [f for f in files if Path(f).match(relative)]:
                missing.append((lineno, name))
        elif relative.rstrip("/") not in files and relative.rstrip("/") not in folders:
            missing.append((lineno, name))
    assert not missing, f"{doc.name}: paths that are not in a clone: {missing}"


def test_no_document_points_outside_the_repository():
    for doc in DOCS:
        assert "../shared" not in doc.read_text(encoding="utf-8"), doc


@pytest.mark.parametrize("expected, actual, ok", [
    (["a", "...", "d"], ["a", "b", "c", "d"], True),
    (["a", "...", "d"], ["a", "d"], True),
    (["a", "...", "d"], ["a", "b", "c"], False),
    (["took [...] s"], ["took 0.29 s"], True),
    (["took [...] s"], ["took 0.29 ms"], False),
    (["a"], ["a", "b"], False),
    (["a", "b"], ["a"], False),
    (["x [...]", "..."], ["x y", "z"], True),
    (["13 columns"], ["42 columns"], False),
])
def test_elisions(expected, actual, ok):
    assert matches(expected, actual) is ok
