"""What a case's output must be: positioned errors that quote their own line and put the caret on the offending text.

`judge` names what is wrong with one command's result, or gives None.  The
rules, each a kind of failure:

- a Python traceback, an internal error (exit 3), an exit status other than 0, 1 or 2;
- a Python object's own text in a message (`<kvdsl.dims._Zero object at 0x...>`);
- a positioned error (`path:line:col: error: ...`) without its source line and a caret under it;
- a quoted line that is not that line of the file;
- a caret that is not under the text the message names: the token of "unexpected `X`", the name of
  "block `X` is defined twice" or "`X` is not a cell of ...", the number of "number `X` is out of range";
- "binary data at byte N" at a line and column other than byte N's;
- an error about a spec's text with no position at all (exit 1 without `path:line:col`, or any
  mistake in a `--set` value): errors about the command line (exit 2) and about files that cannot
  be read or written name no position.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POSITION = re.compile(r"^(.+?):(\d+):(\d+): (?:error|warning): (.*)$")
UNPOSITIONED = re.compile(r"^(?:error|warning): (.*)$")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # shown as U+FFFD when a file holds binary data
SHOWN = 160  # characters of a source line an error shows (kvdsl.errors.MAX_SHOWN)
# messages whose caret must stand under the text they quote first
SUBJECTS = [re.compile(p) for p in (
    r"^unexpected `(.+?)`(?:;|:|$)", r"^block `(.+?)` is defined twice", r"^cell `(.+?)` is defined twice",
    r"^function `(.+?)` is defined twice", r"^number `(.+?)` is out of range", r"^`(.+?)` is not a cell of ",
    r"^unknown (?:name|unit|function|format|model|hardware|engine|workload|dimension) `(.+?)`")]
BINARY = re.compile(r"^this is not a text file: binary data at byte (\d+)")
# errors that are about a file as a whole, or about where to write: nothing in a text to point at
ABOUT_FILES = re.compile(r"^(?:cannot read|cannot write|the file is larger than|--out |-o )")


def read_source(shown: str) -> bytes | None:
    path = ROOT / shown if shown.startswith("kvdsl/prelude/") else Path(shown)
    try:
        return path.read_bytes()
    except OSError:
        return None


def source_lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    text = text[1:] if text.startswith("\ufeff") else text
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def positioned(output: str):
    """(path, line, column, message, quoted line or None, caret line or None) of every positioned message."""
    lines = output.split("\n")
    for i, line in enumerate(lines):
        where = POSITION.match(line)
        if not where:
            continue
        quoted = lines[i + 1][4:] if i + 1 < len(lines) and lines[i + 1].startswith("    ") else None
        caret = lines[i + 2][4:] if quoted is not None and i + 2 < len(lines) and lines[i + 2].startswith("    ") else None
        if caret is not None and (not caret.strip() or set(caret.strip()) != {"^"}):
            caret = None
        yield where.group(1), int(where.group(2)), int(where.group(3)), where.group(4), quoted, caret


def quoted_lines_agree(output: str) -> str | None:
    """None if every positioned message quotes its own line; else what is wrong."""
    for shown, number, _, _, quoted, _ in positioned(output):
        if quoted is None:
            continue
        data = read_source(shown)
        if data is None:
            continue
        source = source_lines(data)
        if number > len(source):
            return f"line {number} of {shown} does not exist"
        expected = source[number - 1]
        expected = (expected.expandtabs(1) if "\t" in expected else expected).rstrip("\n")
        quoted = CONTROL.sub("\ufffd", quoted).lstrip("\ufeff")
        expected = CONTROL.sub("\ufffd", expected).lstrip("\ufeff")
        if len(expected) > SHOWN:
            if quoted.strip(".") not in expected:
                return f"{shown}:{number}: quoted {quoted[:80]!r}, not a window of that line"
        elif quoted != expected:
            return f"{shown}:{number}: quoted {quoted[:80]!r}, the line is {expected[:80]!r}"
    return None


def carets_in_place(output: str) -> str | None:
    """None if every positioned message shows its line with a caret, under the text it names; else what is wrong."""
    for shown, number, column, message, quoted, caret in positioned(output):
        if quoted is None or caret is None:
            return f"{shown}:{number}:{column}: {message[:80]!r} without its line and a caret"
        start = len(caret) - len(caret.lstrip(" "))
        under = quoted[start:start + len(caret.strip())]
        for pattern in SUBJECTS:
            subject = pattern.match(message)
            if subject:
                named = subject.group(1)
                named = named[:-3] if named.endswith("...") else named
                named = named.split("[")[0]  # a family's member is named by its number, written with its variable
                shows_as_itself = not CONTROL.search(named) and "\t" not in named
                if shows_as_itself and not (under and under.startswith(named[:len(under)])):
                    return f"{shown}:{number}:{column}: {message[:80]!r} puts its caret under {under[:40]!r}"
                break
        binary = BINARY.match(message)
        if binary and not shown.startswith("--"):
            data = read_source(shown)
            if data is not None:
                head = data[: int(binary.group(1))].decode("utf-8", errors="replace")
                head = (head[1:] if head.startswith("\ufeff") else head).replace("\r\n", "\n").replace("\r", "\n")
                at = (head.count("\n") + 1, len(head) - head.rfind("\n"))
                if at != (number, column):
                    return f"{shown}: byte {binary.group(1)} is at {at[0]}:{at[1]}, the error says {number}:{column}"
    return None


def unpositioned(output: str, exit_code: int) -> str | None:
    """None unless an error about a spec's text or a `--set` value comes without a position."""
    for line in output.split("\n"):
        found = UNPOSITIONED.match(line)
        if not found:
            continue
        message = found.group(1)
        if ABOUT_FILES.match(message):
            continue
        if message.startswith("--set") or exit_code != 2:
            return f"{message[:100]!r} has no position"
    return None


def judge(result, case) -> str | None:
    """What is wrong with one command's result (`case` as `make_case` gives it), or None."""
    category, what, files, args, written = case
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"traceback: {type(result.exception).__name__}: {result.exception}"[:300]
    if "Traceback (most recent call last)" in output:
        return "traceback"
    if result.exit_code == 3 or "internal error" in output:
        return "internal error"
    if result.exit_code not in (0, 1, 2):
        return f"exit status {result.exit_code}"
    if re.search(r"<[\w.]+ object at 0x[0-9a-f]+>", output):
        return "a Python object's text in a message"
    stderr = result.stderr
    wrong = quoted_lines_agree(stderr) or carets_in_place(stderr) or unpositioned(stderr, result.exit_code)
    if wrong:
        return f"wrong position: {wrong}"
    if category == "collide" and args[0] == "export" and result.exit_code == 0:
        return "workbook exported with names that differ only by case"
    if written is not None and result.exit_code == 0:
        text = written.read_text(encoding="utf-8")
        blocks = re.findall(r"^\S.*", text, re.M)
        live = [b for b in blocks if not b.startswith("#")]
        if len(live) != 2 or not live[0].startswith("model ") or live[1] != "}":
            return f"imported spec holds more than one model block: {live[:4]}"
    return None
