"""Every mistake a user can make, one class per kind, rendered with a caret.

A spec error carries the `Span` it points at.  `render()` gives the familiar

    specs/models/x.kvspec:4:16: error: unknown name `kv_head`
        kv_heads = kv_head * 2
                   ^^^^^^^
    hint: did you mean `kv_heads`?
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .compact import pickled_by_fields


@pickled_by_fields
@dataclass(frozen=True)
class Span:
    """A region of a source file: 1-based line and column, end exclusive."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


SETTING_PREFIX = "--set "  # the "path" of a `--set NAME=VALUE` is that text itself
OPTION_PREFIX = "--"  # ... and of any option that sets a cell (`--context 32K`) the option as typed
_QUOTED = re.compile(r"`([^`]{121,})`")


def _clip(text):
    """Quoted names and tokens in a message stay short, however long the source is."""
    if text is None:
        return None
    return _QUOTED.sub(lambda m: f"`{m.group(1)[:100]}...`", text)


_source_cache: dict[str, list[str]] = {}
MAX_SHOWN = 160  # characters of a source line an error shows


def normalize_newlines(text: str) -> str:
    """CRLF and a lone CR become LF: the one line ending kvdsl (and Lark) counts."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_lines(text: str) -> list[str]:
    """A text's lines, broken at LF only.

    hazard: `str.splitlines()` also breaks at form feed, vertical tab,
    U+001C-U+001E, U+0085, U+2028 and U+2029, which the parser counts as
    ordinary characters; line numbers would then disagree with Lark's.
    """
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def remember_source(path: str, text: str) -> None:
    """Keep a file's text so errors can quote its lines."""
    _source_cache[path] = split_lines(normalize_newlines(text))


def source_line(span: Span) -> Optional[str]:
    lines = _source_cache.get(span.path)
    if lines is None:
        try:
            lines = split_lines(normalize_newlines(Path(span.path).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            return None
        _source_cache[span.path] = lines
    if 1 <= span.line <= len(lines):
        return lines[span.line - 1]
    if span.line == len(lines) + 1:  # the end of a text that ends with a line break (or is empty)
        return ""
    return None


class KvdslError(Exception):
    """The root of every error kvdsl reports to a user."""

    kind = "error"
    severity = "error"  # "warning" for a notice that does not stop the run

    def __init__(self, message: str, span: Optional[Span] = None, hint: Optional[str] = None):
        message, hint = _clip(message), _clip(hint)
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint

    def render(self) -> str:
        """The message as `path:line:col: error: ...`, the line, a caret and a hint."""
        if self.span is None:
            out = [f"{self.severity}: {self.message}"]
        else:
            where = self.span.path if self.span.path.startswith(OPTION_PREFIX) else str(self.span)
            out = [f"{where}: {self.severity}: {self.message}"]
            line = source_line(self.span)
            if line is not None:
                text = line.expandtabs(1) if "\t" in line else line
                start = max(self.span.column - 1, 0)
                if self.span.end_line == self.span.line:
                    width = max(self.span.end_column - self.span.column, 1)
                else:
                    width = max(len(text.rstrip()) - start, 1)
                if len(text) > MAX_SHOWN:  # show a window of a very long line around the caret
                    left = max(start - MAX_SHOWN // 2, 0)
                    text = ("..." if left else "") + text[left : left + MAX_SHOWN] + "..."
                    start = start - left + (3 if left else 0)
                    width = max(min(width, len(text) - 3 - start), 1)  # the caret ends where the window does
                out.append("    " + text.rstrip("\n"))
                out.append("    " + " " * start + "^" * width)
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)

    def sort_key(self):
        if self.span is None:
            return ("", 0, 0)
        return (self.span.path, self.span.line, self.span.column)


class SpecSyntaxError(KvdslError):
    """Text that is not kvspec."""


class InvalidValueError(KvdslError):
    """A literal that cannot be a value: a huge number, an unknown unit, a bad pattern."""


class ImportFailure(KvdslError):
    """An import that names a missing file, or one that imports itself in a cycle."""


class DuplicateError(KvdslError):
    """A block or cell defined twice."""


class UnknownNameError(KvdslError):
    """A name that refers to nothing: a cell, a block, a function, a kind."""


class MissingCellError(KvdslError):
    """A block that lacks a cell its kind requires."""


class CycleError(KvdslError):
    """Cells that depend on each other in a circle."""


class DimensionError(KvdslError):
    """Arithmetic that mixes units wrongly: bytes plus tokens, a boolean times a number."""


class ReferenceKindError(KvdslError):
    """A reference to a block of the wrong kind, e.g. a model where a format belongs."""


class EvaluationError(KvdslError):
    """A value that cannot be computed: division by zero and the like."""


class UsageError(KvdslError):
    """A mistake on the command line rather than in a spec (exit status 2)."""


class SolveError(KvdslError):
    """A question the solver cannot answer in closed form."""


class NoLiveForm(SolveError):
    """An answer a search found that no spreadsheet formula can follow (the workload's targets, say)."""


class ExportError(KvdslError):
    """A workbook that cannot be written as asked."""


class ConfigError(KvdslError):
    """A config.json that cannot become a model spec: bad JSON, wrong types, absurd values."""


class ConfigAssumption(KvdslError):
    """Something `kvdsl import` had to assume; an error under --strict, a warning otherwise."""

    severity = "warning"


SHOWN_ERRORS = 50  # a file wrong everywhere shows its first mistakes, not a screenful of each


class ErrorList(KvdslError):
    """Several errors found in one run, reported together."""

    def __init__(self, errors: Iterable[KvdslError]):
        self.errors = sorted(errors, key=lambda e: e.sort_key())
        super().__init__(f"{len(self.errors)} error(s)")

    def render(self, limit: int = SHOWN_ERRORS) -> str:
        """The first `limit` errors, then how many more there are (`check --json` lists them all)."""
        shown = [e.render() for e in self.errors[:limit]]
        if len(self.errors) > limit:
            shown.append(f"... and {len(self.errors) - limit:,} more errors, not shown; "
                         "`kvdsl check --json` lists them all")
        return "\n".join(shown)


def did_you_mean(name: str, candidates: Iterable[str]) -> Optional[str]:
    """A hint naming the closest candidate (first one that differs only in case), or None."""
    candidates = sorted(set(candidates))
    same = [c for c in candidates if c.lower() == name.lower() and c != name]
    if same:
        return f"did you mean `{same[0]}`? (names are case-sensitive)"
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def raise_all(errors: list[KvdslError]) -> None:
    """Raise the errors collected in a pass, if there are any."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ErrorList(errors)


def error_kind(error: KvdslError) -> str:
    """`UnknownNameError` -> `unknown_name`: the kind of mistake, as `check --json` names it."""
    name = type(error).__name__
    name = name[: -len("Error")] if name.endswith("Error") and name != "KvdslError" else name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() if name != "KvdslError" else "error"


def error_json(error: KvdslError) -> dict:
    """One error as data: path, line, column (null without a position), kind, message, hint."""
    span = error.span
    return {"path": span.path if span else None, "line": span.line if span else None,
            "column": span.column if span else None, "end_line": span.end_line if span else None,
            "end_column": span.end_column if span else None, "kind": error_kind(error),
            "severity": error.severity, "message": error.message, "hint": error.hint}


def flatten(error: KvdslError) -> list[KvdslError]:
    return list(error.errors) if isinstance(error, ErrorList) else [error]
