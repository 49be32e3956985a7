"""Text -> the same spec in kvspec's one layout.  Only whitespace changes.

The layout, token by token (the Lark parser gives the tokens):

- a block's cells are indented 4 spaces per level of `{`; a line that
  continues a cell (after an operator, inside parentheses, an `if` split over
  lines, or after a `\\` line continuation) is indented 4 more;
- one space around `=`, binary operators, `and`/`or`, comparisons, `&` and
  `^`, and after `,`, `:` and `;`; none inside `( )` and `[ ]`, around `.`,
  after a unary `-`, between a function (or layer kind) and its `(`, or
  around the `/` of a declared unit (`bandwidth: bytes/s`);
- `=` is not aligned across lines;
- every comment is kept: a comment line takes the indentation of the code
  around it; a comment after code stays in its column, so hand-aligned
  comments stay aligned, and moves right, to one space after the code, only
  when the code now reaches it; comment lines written under such a comment,
  in its column, stay under it;
- at most one blank line in a row, none at the start of a block or before
  its `}`, none inside a cell; exactly one after a top-level block's `}`,
  and before a block's first line unless comment lines lead into it;
  no blank lines at the start or end of the file, which ends with one newline;
- a rule stays on the lines it was written on: nothing is wrapped or joined.

`format_text` checks its result: the parse tree and the comments must be
those of the input, or it raises `FormatterBug` rather than return it.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from .errors import normalize_newlines
from lark.exceptions import LarkError

from .parser import _allow_deep_expressions, lark_parser, parse_text

INDENT = "    "
CELL_KINDS = {"rule", "unknown", "pattern_cell", "declare", "require", "family", "fn_def"}

_NO_SPACE_BEFORE = {"RPAR", "RSQB", "COMMA", "COLON", "DOT", "SLASH", "_DOTS"}
_NO_SPACE_AFTER = {"LPAR", "LSQB", "DOT", "MINUS", "SLASH", "_DOTS"}
_GAP_COMMENT = re.compile(r"#[^\n]*")
_CONTINUATION = re.compile(r"\\\n")


class FormatterBug(RuntimeError):
    """The formatter would change what a spec means: a bug in kvdsl, never written to disk."""


@dataclass
class _Line:
    """One physical line of the output: its tokens, an optional comment, how it ends."""

    tokens: list = field(default_factory=list)
    comment: Optional[str] = None
    comment_column: int = 0  # 1-based column of the comment in the input
    break_pos: int = -1  # offset of the line break before this line (-1: the first line)
    after_backslash: bool = False  # the line before ended with `\`
    ends_with_backslash: bool = False


def format_text(text: str, path: str = "<input>") -> str:
    """The canonical layout of kvspec source `text`.

    Text that is only blank gives "".  Raises the positioned `SpecSyntaxError`
    that `check` gives for text that does not parse, and `FormatterBug` if the
    result would not parse to the same tree with the same comments.
    """
    text = normalize_newlines(text)
    if not text.strip():
        return ""
    _allow_deep_expressions()
    try:
        tokens, tree = _tokens(text)
    except LarkError:
        parse_text(text, path)  # raises the positioned error `check` gives
        raise
    lines = _lines(text, tokens)
    out = _render(lines, _cell_spans(tree))
    _verify(text, tokens, tree, out)
    return out


def _tokens(text: str):
    """Every token the parser reads (newlines and `;` included, comments not) and the tree."""
    interactive = lark_parser().parse_interactive(text, start="start")
    tokens = list(interactive.iter_parse())
    return tokens, interactive.feed_eof()


def _lines(text: str, tokens) -> List[_Line]:
    """Split the token stream into physical lines, picking comments and `\\` breaks out of the gaps."""
    lines = [_Line()]
    end = 0
    for token in tokens + [None]:
        start = len(text) if token is None else token.start_pos
        _read_gap(text, end, start, lines)
        if token is None:
            break
        if token.type == "_NL" and token.value != ";":
            lines.append(_Line(break_pos=token.start_pos))
        else:
            lines[-1].tokens.append(token)
        end = token.end_pos
    return lines


def _read_gap(text: str, start: int, end: int, lines: List[_Line]) -> None:
    gap = text[start:end]
    for _ in _CONTINUATION.finditer(gap):
        lines[-1].ends_with_backslash = True
        lines.append(_Line(break_pos=start, after_backslash=True))
    comment = _GAP_COMMENT.search(gap)
    if comment:
        offset = start + comment.start()
        lines[-1].comment = comment.group().rstrip()
        lines[-1].comment_column = offset - (text.rfind("\n", 0, offset) + 1) + 1


def _cell_spans(tree):
    """Sorted (start, end) offsets of every cell: a line break inside one continues it."""
    spans = sorted((t.meta.start_pos, t.meta.end_pos) for t in tree.iter_subtrees()
                   if t.data in CELL_KINDS and not t.meta.empty)
    return [s for s, _ in spans], [e for _, e in spans]


def _inside_cell(pos: int, spans) -> bool:
    starts, ends = spans
    i = bisect.bisect_right(starts, pos) - 1
    return i >= 0 and starts[i] < pos < ends[i]


def _space(prev, token) -> str:
    if token.type in _NO_SPACE_BEFORE or prev.type in _NO_SPACE_AFTER:
        return ""
    if token.type == "_NL":  # `;` between cells on one line
        return ""
    if token.type in ("LPAR", "LSQB") and prev.type == "NAME":  # max(...), sliding(128), stage_start[3]
        return ""
    if prev.type == "LBRACE" and token.type == "RBRACE":
        return ""
    return " "


def _code(tokens):
    """The tokens of one line joined by their spaces, and each token's offset in that text."""
    out, offsets, width = [], [], 0
    for i, token in enumerate(tokens):
        if i:
            space = _space(tokens[i - 1], token)
            out.append(space)
            width += len(space)
        offsets.append(width)
        out.append(str(token))
        width += len(token)
    return "".join(out), offsets


@dataclass
class _Rendered:
    text: str
    blank: bool
    continuation: bool = False
    opens: bool = False  # its last token is `{`
    starts_with_close: bool = False
    closes_top_block: bool = False
    starts_top_block: bool = False  # a block's or defaults' first line
    comment_only: bool = False


def _render(lines: List[_Line], spans) -> str:
    rendered = []
    depth = 0
    brackets = []  # open `(` and `[` of the cell: (column after it in the input, in the output)
    trailing = None  # the comment after code on the line above: (its column in the input, in the output)
    for line in lines:
        if not line.tokens and line.comment is None:
            trailing = None
            rendered.append(_Rendered("", blank=True, continuation=line.break_pos >= 0 and _inside_cell(line.break_pos, spans)))
            continue
        continuation = line.after_backslash or (line.break_pos >= 0 and _inside_cell(line.break_pos, spans))
        if not continuation:
            brackets = []
        starts_with_close = bool(line.tokens) and line.tokens[0].type == "RBRACE"
        level = max(depth - (1 if starts_with_close else 0), 0)
        indent = INDENT * level
        if continuation:
            indent = " " * _continuation_indent(line, len(indent), brackets)
        code, offsets = _code(line.tokens)
        for token, offset in zip(line.tokens, offsets):
            if token.type in ("LPAR", "LSQB"):
                brackets.append((token.column, len(indent) + offset + 1))
            elif token.type in ("RPAR", "RSQB") and brackets:
                brackets.pop()
        body, trailing = _with_comment(line, indent + code, trailing)
        if line.ends_with_backslash:
            body += " \\"
        opened = sum(t.type == "LBRACE" for t in line.tokens)
        closed = sum(t.type == "RBRACE" for t in line.tokens)
        depth += opened - closed
        rendered.append(_Rendered(
            body, blank=False, continuation=continuation,
            opens=bool(line.tokens) and line.tokens[-1].type == "LBRACE",
            starts_with_close=starts_with_close,
            closes_top_block=closed > 0 and depth == 0,
            starts_top_block=opened > 0 and depth == opened - closed and line.tokens[0].type != "RBRACE",
            comment_only=not line.tokens,
        ))
    return _join(rendered)


def _with_comment(line: _Line, body: str, above):
    """The line with its comment, and where a comment continued on the next line goes.

    `above` is (input column, output column) of the comment that followed code
    on the line above, or of a comment continued under it.
    """
    if line.comment is None:
        return body, None
    if line.tokens:
        body += " " * max(line.comment_column - 1 - len(body), 1)
    elif above and line.comment_column == above[0] and above[1] - 1 > len(body):
        body = " " * (above[1] - 1)
    else:
        return body + line.comment, None
    return body + line.comment, (line.comment_column, len(body) + 1)


def _continuation_indent(line: _Line, base: int, brackets) -> int:
    """4 more than the cell, or, for a line written aligned just inside an open bracket, that alignment."""
    written = (line.tokens[0].column if line.tokens else line.comment_column) - 1
    if brackets and written == brackets[-1][0]:
        return brackets[-1][1]
    return base + len(INDENT)


def _join(rendered: List[_Rendered]) -> str:
    """Lay out the blank lines: at most one, none at a block's edges or inside a cell."""
    out: List[str] = []
    previous: Optional[_Rendered] = None
    blank_seen = False
    for line in rendered:
        if line.blank:
            blank_seen = True
            continue
        if previous is not None:
            if previous.closes_top_block or (line.starts_top_block and not previous.comment_only):
                wanted = True
            elif previous.opens or line.starts_with_close or line.continuation:
                wanted = False
            else:
                wanted = blank_seen
            if wanted:
                out.append("")
        out.append(line.text)
        previous = line
        blank_seen = False
    return "\n".join(out) + "\n"


def _comments(text: str, tokens) -> List[str]:
    found = []
    end = 0
    for token in tokens + [None]:
        start = len(text) if token is None else token.start_pos
        found += [c.rstrip() for c in _GAP_COMMENT.findall(text[end:start])]
        if token is not None:
            end = token.end_pos
    return found


def _verify(text: str, tokens, tree, out: str) -> None:
    """The formatted text must parse to the same tree and keep the same comments."""
    try:
        new_tokens, new_tree = _tokens(out)
    except Exception as exc:  # any parse failure of our own output is our bug
        raise FormatterBug(f"the formatted text does not parse: {exc}") from None
    if not _same_tree(new_tree, tree):
        raise FormatterBug("formatting would change the parse tree")
    if _comments(text, tokens) != _comments(out, new_tokens):
        raise FormatterBug("formatting would lose or change a comment")


def _same_tree(a, b) -> bool:
    """Lark's `==` on trees, without recursion: an expression thousands of levels deep is compared too."""
    from lark import Tree

    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, Tree) and isinstance(y, Tree):
            if x.data != y.data or len(x.children) != len(y.children):
                return False
            stack.extend(zip(x.children, y.children))
        elif isinstance(x, Tree) or isinstance(y, Tree) or x != y:
            return False
    return True


def spec_paths(paths) -> List["Path"]:
    """The files to format: each file named, and every *.kvspec under each directory named."""
    from pathlib import Path

    from .errors import UsageError

    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.kvspec")
                            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"no file or directory `{name}`")
    unique = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


@dataclass
class FileResult:
    """What formatting one file found: its text before and after, or the error that stopped it."""

    path: "Path"
    before: str = ""
    after: str = ""
    error: Optional[Exception] = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.before != self.after


def format_file(path) -> FileResult:
    """Format one file in memory; a spec error is kept in the result, not raised."""
    from .errors import KvdslError
    from .parser import MAX_FILE_BYTES, decode

    result = FileResult(path)
    try:
        data = path.read_bytes()
        if len(data) > MAX_FILE_BYTES:
            raise KvdslError(f"{path}: the file is larger than {MAX_FILE_BYTES // 2**20} MiB: not a spec")
        result.before = data.decode("utf-8", errors="replace")
        result.after = format_text(decode(data, str(path)), str(path))
    except KvdslError as exc:
        result.error = exc
    except OSError as exc:
        from .errors import UsageError

        result.error = UsageError(f"cannot read `{path}`: {exc.strerror or exc}")
    return result


def write_formatted(result: FileResult) -> None:
    """Replace the file with its formatted text, atomically, keeping its permissions."""
    import os

    from .files import atomic_writer

    target = result.path.resolve()
    mode = target.stat().st_mode & 0o7777
    with atomic_writer(target, force=True) as stream:
        stream.write(result.after)
    os.chmod(target, mode)


def unified_diff(result: FileResult) -> str:
    """The change formatting makes to one file, as a unified diff."""
    import difflib

    name = str(result.path)
    lines = difflib.unified_diff(result.before.splitlines(True), result.after.splitlines(True), name, name)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
