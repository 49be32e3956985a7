"""Text -> spec model.  Builds the Lark parser once and speaks kvspec in its errors."""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import re
import threading

from .errors import InvalidValueError, Span, SpecSyntaxError, did_you_mean, normalize_newlines, remember_source
from .model import SpecFile

GRAMMAR = Path(__file__).with_name("kvspec.lark")

_WORDS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a quoted string",
    "UNIT": "a unit",
    "_NL": "a new line",
    "$END": "the end of the file",
    "COMPARE": "a comparison",
    "ADD_OP": "`+` or `-`",
    "MUL_OP": "`*` or `/`",
    "BOOLEAN": "`true` or `false`",
    "NONE": "`none`",
}


@lru_cache(maxsize=1)
def lark_parser():
    """The LALR parser, built once per process (and cached on disk by Lark)."""
    from lark import Lark

    return Lark(
        GRAMMAR.read_text(encoding="utf-8"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=False,
        cache=True,
        start=["start", "cell"],
        lexer_callbacks={**{t: _TERMS.term for t in _TERM_TOKENS}, **{t: _TERMS.restart for t in _CELL_STARTS}},
    )


MAX_TERMS = 20_000  # names, numbers and strings in one cell: twice the longest sum any test writes


class _TermCount(threading.local):
    """The terms of the cell being lexed, counted as the lexer hands each token to the parser.

    A cell of 100,000 terms (`z = 1+1+...`, 200 KB) costs seconds to parse and
    transform; counting its terms as they are read refuses it after
    MAX_TERMS of them, at the term that goes over, before the rest is parsed.
    Every cell starts after `=` or `:` (or `require`, or a brace), so the count
    restarts there; an expression may run over many lines.
    """

    path = ""
    count = 0

    def start(self, path: str) -> None:
        self.path, self.count = path, 0

    def restart(self, token):
        self.count = 0
        return token

    def term(self, token):
        self.count += 1
        if self.count > MAX_TERMS:
            self.count = 0
            raise SpecSyntaxError(f"more than {MAX_TERMS:,} terms in one cell", Span(
                self.path, token.line, token.column, token.end_line or token.line, token.end_column or token.column + 1),
                hint="split it into cells of your own (`let part_1 = ...`) and add those up")
        return token


_TERMS = _TermCount()
_TERM_TOKENS = ("NAME", "NUMBER", "STRING", "BOOLEAN", "NONE")
_CELL_STARTS = ("EQUAL", "COLON", "REQUIRE", "LBRACE", "RBRACE")


def _describe(terminal: str) -> str:
    if terminal in _WORDS:
        return _WORDS[terminal]
    try:
        pattern = lark_parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal.lower()
    if pattern.type == "str":
        return f"`{pattern.value}`"
    return terminal.lower()


def _expected(names) -> str:
    words = sorted({_describe(n) for n in names if not n.startswith("__")})
    if not words:
        return ""
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _point(path: str, line: int, column: int, width: int = 1) -> Span:
    return Span(path, line, column, line, column + width)


def decode(data: bytes, path: str) -> str:
    """Bytes of a spec file -> text with LF line endings, refusing binary data with a position."""
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = min(exc.start, nul) if nul >= 0 else exc.start
    else:
        bad = nul if nul >= 0 else None
        if bad is None:
            return normalize_newlines(text[1:] if text.startswith("\ufeff") else text)
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # not a character of the first line, as for a text file
    head = normalize_newlines(data[bom:bad].decode("utf-8", errors="replace"))
    line = head.count("\n") + 1
    column = len(head) - (head.rfind("\n") + 1) + 1
    shown = normalize_newlines(data[bom:].decode("utf-8", errors="replace"))
    remember_source(path, re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "\ufffd", shown))
    raise InvalidValueError(
        f"this is not a text file: binary data at byte {bad}", _point(path, line, column),
        hint="kvspec files are UTF-8 text",
    )


def parse_text(text: str, path: str) -> SpecFile:
    """Parse kvspec source into a SpecFile, or raise a positioned kvdsl error."""
    from .transformer import transform

    text = normalize_newlines(text)
    remember_source(path, text)
    _allow_deep_expressions()
    if not text.strip():
        raise SpecSyntaxError("the file is empty", _point(path, 1, 1), hint="a spec holds blocks such as `model name \"Title\" { ... }`")
    spec = transform(_tree(text, path, "start"), path, text)
    if not spec.items:
        raise SpecSyntaxError("the file holds no blocks or imports", _point(path, 1, 1))
    return spec


DEEP = 20_000


def _allow_deep_expressions() -> None:
    """Lark and the resolver recurse once per level of an expression: allow long chains."""
    import sys

    if sys.getrecursionlimit() < DEEP:
        sys.setrecursionlimit(DEEP)


def parse_cell(text: str, path: str):
    """Parse one `name = value` line (as `--set` gives it) into a Cell."""
    from .transformer import transform

    text = normalize_newlines(text)
    remember_source(path, text)
    return transform(_tree(text, path, "cell"), path, text)


def _tree(text: str, path: str, start: str):
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    _TERMS.start(path)
    try:
        return lark_parser().parse(text, start=start)
    except UnexpectedCharacters as exc:
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        if char == '"':
            raise SpecSyntaxError("unterminated string: this `\"` has no closing quote on its line",
                                  _point(path, exc.line, exc.column)) from None
        expected = _expected(_acceptable(text, exc.pos_in_stream, start) or exc.allowed or ())
        raise SpecSyntaxError(
            f"unexpected character `{char}`" + (f"; expected {expected}" if expected else ""),
            _point(path, exc.line, exc.column),
        ) from None
    except UnexpectedToken as exc:
        token = exc.token
        if token.type == "$END":
            lines = text.rstrip().split("\n")
            span = _point(path, len(lines), len(lines[-1]) + 1)
            found = "end of file"
        else:
            span = Span(path, token.line, token.column, token.end_line or token.line, token.end_column or token.column + 1)
            found = "end of line" if token.type == "_NL" else f"`{token}`"
            if token.type == "FN":
                raise SpecSyntaxError("`fn` inside a block: a function is defined at the top level of a file", span,
                                      hint="move it above the block; every file loaded can call it") from None
            if token.type == "NAME" and re.match(r"\s*=", text[token.end_pos :]):
                raise SpecSyntaxError(f"unexpected `{token}`: a new cell starts on a new line or after `;`", span) from None
            glued = re.search(r"(?<![\w.])(\d[\d_]*(?:\.\d*)?)([KM]?)$", text[: token.start_pos])
            if token.type == "NAME" and glued and glued.group(2):
                number, suffix = glued.groups()
                unit = _unit_case_hint("", suffix + str(token)).partition("`")[2].partition("`")[0]
                if unit:
                    raise SpecSyntaxError(
                        f"unexpected `{token}`: `{number}{suffix}` reads as a count of tokens", span,
                        hint=f"write `{number} {unit}`, with a space before the unit") from None
            if token.type == "NAME" and glued and not glued.group(2):
                raise SpecSyntaxError(f"unknown unit `{token}`", span, hint=_unit_case_hint(glued.group(1), str(token))) from None
            if token.type == "NAME" and re.search(r"\d[\w.%]*[ \t]+$", text[: token.start_pos]):
                from .units import unit_names

                raise SpecSyntaxError(f"unknown unit `{token}`", span, hint=did_you_mean(str(token), unit_names())
                                      or "units: B KB MB GB TB KiB MiB GiB TiB, tokens (32K), elements, s, B/s") from None
        raise SpecSyntaxError(f"unexpected {found}; expected {_expected(exc.accepts or exc.expected)}", span) from None
    except UnexpectedEOF as exc:
        line = text.count("\n") + 1
        raise SpecSyntaxError(f"unexpected end of file; expected {_expected(exc.expected)}", _point(path, line, 1)) from None


def _acceptable(text: str, pos: int, start: str) -> set:
    """The terminals the parser would take at `pos`, parsing `text` up to there.

    The lexer's list (`allowed`) comes from a state the grammar's contexts
    share, so it would offer `]` or `:` after a rule's number; the parser's
    own answer is exact.  An empty set when the prefix itself fails.
    """
    from lark.exceptions import LarkError

    _TERMS.start("")
    try:
        interactive = lark_parser().parse_interactive(text[:pos], start=start)
        interactive.exhaust_lexer()
        return set(interactive.accepts())
    except (LarkError, SpecSyntaxError):
        return set()


def _unit_case_hint(number: str, unit: str) -> str:
    """`32k` -> did you mean `32K`?: suffixes and units are case-sensitive."""
    from .units import unit_names

    same = [u for u in ["K", "M"] + unit_names() if u.lower() == unit.lower()]
    if same:
        space = " " if number and len(same[0]) > 1 and same[0][0] in "KM" else ""  # `2KB` would read as 2K tokens
        return f"did you mean `{number}{space}{same[0]}`? units are case-sensitive (`K` is 1,024 tokens, `KB` 1,000 bytes)"
    close = did_you_mean(unit, unit_names())
    return close or "suffixes: K (1,024 tokens), M (1,048,576 tokens), %; units: B KB MB GB TB KiB MiB GiB TiB, s, B/s"


MAX_FILE_BYTES = 16 * 1024 * 1024


def read_spec(path: Path, display: str) -> str:
    """One file's text; `display` is the path shown in messages."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InvalidValueError(f"the file is larger than {MAX_FILE_BYTES // 2**20} MiB: not a spec", _point(display, 1, 1))
    return decode(path.read_bytes(), display)


def parse_file(path: Path, display: str) -> SpecFile:
    """Read and parse one file; `display` is the path shown in messages."""
    return parse_cached(read_spec(path, display), display)


# files parsed in this process, by display path and text (most recent last):
# a SpecFile is immutable, so the prelude is not read back from disk for every build
_PARSED: "OrderedDict[tuple, SpecFile]" = OrderedDict()
PARSED_KEPT = 256


def forget_parsed() -> None:
    """Drop the files kept by `parse_cached` in this process (the on-disk cache stays)."""
    _PARSED.clear()


def parse_cached(text: str, display: str) -> SpecFile:
    """Parse text (a file's, or an editor's unsaved buffer) through this process's
    parsed files and the on-disk parse cache."""
    from . import cache

    text = normalize_newlines(text)
    key = (display, text)
    parsed = _PARSED.get(key)
    if parsed is not None:
        _PARSED.move_to_end(key)
        remember_source(display, text)
        return parsed
    parsed = cache.load(text, display)
    if parsed is not None:
        remember_source(display, text)
    else:
        parsed = parse_text(text, display)
        cache.store(text, display, parsed)
    _PARSED[key] = parsed
    while len(_PARSED) > PARSED_KEPT:
        _PARSED.popitem(last=False)
    return parsed
