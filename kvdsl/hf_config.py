"""A published config.json as `kvdsl import` reads it: the file, its numbers and what was read of it."""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Optional

from .errors import ConfigAssumption, ConfigError, KvdslError, Span, UsageError, remember_source
from .parser import MAX_FILE_BYTES
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .hf_families import Family

MAX_SIZE = 1 << 40          # any dimension beyond this is junk, not a model
MAX_LAYERS = 100_000
MAX_NAME = 100              # characters of a block name: it also names the file NAME.kvspec
MAX_TITLE = 200
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


class Findings:
    """Errors and assumptions of one import, in the order they were found."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.errors: list[KvdslError] = []
        self.assumptions: list[ConfigAssumption] = []

    def error(self, message: str, span: Span, hint: Optional[str] = None) -> None:
        self.errors.append(ConfigError(visible(message), span, hint and visible(hint)))

    def assume(self, message: str, span: Span) -> None:
        message = visible(message)   # it quotes the config's text, and the spec's header quotes it
        if any(found.message == message for found in self.errors + self.assumptions):
            return
        if self.strict:
            self.errors.append(ConfigError(message, span, hint="without --strict this is a warning and the spec says what was assumed"))
        else:
            self.assumptions.append(ConfigAssumption(message, span))


class _Invalid(Exception):
    """A value already reported; the import stops once every error is collected."""


class Config:
    """One JSON object of a config.json, able to point at its keys in the text."""

    def __init__(self, path: str, text: str, data: dict, findings: Findings, prefix: str = "", start: int = 0,
                 family: Optional[Family] = None):
        self.path, self.text, self.data, self.findings = path, text, data, findings
        self.prefix, self.start, self.family = prefix, start, family
        self.read: set[str] = set()   # keys looked up, for naming the ones nothing read
        self.defaulted: set[str] = set()   # keys absent from the file, taken from the library's defaults

    def child(self, key: str) -> "Config":
        span_at = self._offset(key)
        return Config(self.path, self.text, self.data[key], self.findings, f"{self.prefix}{key}.", span_at or self.start)

    # -- positions --
    def _offset(self, key: str) -> Optional[int]:
        match = re.compile(r'"%s"\s*:' % re.escape(key)).search(self.text, self.start)
        return match.start() if match else None

    def span(self, key: Optional[str] = None) -> Span:
        """The key in the file, or the object's opening brace when the key is absent."""
        offset = self._offset(key) if key is not None else None
        length = len(key) + 2 if offset is not None else 1
        if offset is None:
            offset = self.text.find("{", self.start)
            offset = max(offset, 0)
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return Span(self.path, line, column, line, column + length)

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def cite(self, key: str) -> str:
        """The key as a spec's comment names it, saying so when the value is the library's default."""
        return self.name(key) + (" (library default)" if key in self.defaulted else "")

    # -- values --
    def has(self, key: str) -> bool:
        self.read.add(key)
        return self.data.get(key) is not None

    def first(self, *keys: str) -> Optional[str]:
        """The first of `keys` the config sets (not null)."""
        return next((k for k in keys if self.has(k)), None)

    def default(self, key: str):
        for name, value in (self.family.defaults if self.family else ()):
            if name == key:
                return value
        return None

    def integer(self, key: str, *aliases: str, minimum: int = 1, required: bool = True, fallback=None, why: str = "") -> Optional[int]:
        """A whole number from `key` (or an alias); library defaults and fallbacks are reported as assumptions."""
        found = self.first(key, *aliases)
        if found is None:
            value = self.default(key)
            if value is not None:
                self.defaulted.add(key)
                self.findings.assume(f"`{self.name(key)}` is not set: using the {self.family.label} library default {value}", self.span())
                return value
            if fallback is not None:
                self.findings.assume(f"`{self.name(key)}` is not set: {why or f'assuming {fallback}'}", self.span())
                return fallback
            if required:
                self.findings.error(f"`{self.name(key)}` is missing", self.span(), hint=why or None)
                raise _Invalid
            return None
        return self.whole(found, minimum)

    def whole(self, key: str, minimum: int) -> int:
        """The value of `key` as a whole number of at least `minimum`; anything else is reported."""
        value = self.data[key]
        if isinstance(value, LongNumber):
            self.findings.error(f"`{self.name(key)}` is a number of {value.digits:,} digits: it must be at most {MAX_SIZE:,}", self.span(key))
            raise _Invalid
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
            self.findings.error(f"`{self.name(key)}` must be a whole number, not {_shown(value)}", self.span(key))
            raise _Invalid
        value = int(value)
        limit = MAX_LAYERS if "layer" in key else MAX_SIZE
        if value < minimum or value > limit:
            bound = f"at least {minimum}" if value < minimum else f"at most {limit:,}"
            self.findings.error(f"`{self.name(key)}` is {_shown(value)}: it must be {bound}", self.span(key))
            raise _Invalid
        return value

    def flag(self, key: str, default: bool) -> bool:
        if not self.has(key):
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            self.findings.error(f"`{self.name(key)}` must be true or false, not {_shown(value)}", self.span(key))
            raise _Invalid
        return value

    def string(self, key: str) -> Optional[str]:
        if not self.has(key):
            return None
        value = self.data[key]
        if not isinstance(value, str):
            self.findings.error(f"`{self.name(key)}` must be a string, not {_shown(value)}", self.span(key))
            raise _Invalid
        return value

    def items(self, key: str, kind: type) -> Optional[list]:
        if not self.has(key):
            return None
        value = self.data[key]
        if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
            what = "strings" if kind is str else "whole numbers"
            self.findings.error(f"`{self.name(key)}` must be a list of {what}", self.span(key))
            raise _Invalid
        return value


class LongNumber:
    """A JSON integer longer than Python converts (4,300 digits by default): an error at its key if anything reads it."""

    def __init__(self, digits: int):
        self.digits = digits

    def __str__(self) -> str:
        return f"a number of {self.digits:,} digits"


def _json_integer(text: str):
    try:
        return int(text)
    except ValueError:   # past sys.get_int_max_str_digits()
        return LongNumber(len(text.lstrip("-")))


def _shown(value) -> str:
    """A config value as a message quotes it: JSON, at most 40 characters."""
    return json.dumps(value, default=str)[:40]


# Characters `str.splitlines` breaks lines at, besides \n: an error quoting a line of the
# config must find the line that `Span` (which counts \n) names.
OTHER_LINE_BREAKS = {ord(ch): "\ufffd" for ch in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def read_text(path: str) -> str:
    """The text of a regular file of at most MAX_FILE_BYTES, each line ending in a plain newline.

    The file is opened without waiting (a named pipe would block) and checked before it is
    read, so a device such as /dev/zero or /dev/urandom is refused instead of read forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read `{visible(path)}`: {getattr(exc, 'strerror', None) or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a folder, not a config.json" if stat.S_ISDIR(mode) else "not a regular file; pass a config.json or a folder of them"
        raise UsageError(f"cannot read `{visible(path)}`: {what}")
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        first = data[:200].split(b"\n")[0].decode("utf-8", "replace")
        remember_source(path, first.translate(OTHER_LINE_BREAKS))  # the start of the first line, read already
        raise ConfigError(f"the file is larger than {MAX_FILE_BYTES // 2**20} MiB: not a config.json", Span(path, 1, 1, 1, 2))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start].decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        line, column = head.count("\n") + 1, len(head) - head.rfind("\n")
        shown = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        remember_source(path, re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "\ufffd", shown).translate(OTHER_LINE_BREAKS))
        raise ConfigError(f"this is not UTF-8 text: a config.json is JSON (byte {exc.start})",
                          Span(path, line, column, line, column + 1)) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_config(path: str, findings: Findings) -> Config:
    """Parse a config.json; bad JSON or a non-object is a positioned error."""
    text = read_text(path)
    remember_source(path, text.translate(OTHER_LINE_BREAKS))
    try:
        data = json.loads(text, parse_int=_json_integer)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", _text_span(path, text, exc.pos)) from None
    except RecursionError:
        raise ConfigError("this nests too deeply to be a config.json", _text_span(path, text, _deepest(text))) from None
    if not isinstance(data, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        raise ConfigError(f"a config.json holds one JSON object, not {kind}", Span(path, 1, 1, 1, 2))
    return Config(path, text, data, findings)


def _text_span(path: str, text: str, offset: int) -> Span:
    """The character at `offset` of a config's text; at its end, the end of its last line."""
    offset = min(offset, len(text.rstrip("\n")))
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Span(path, line, column, line, column + 1)


def _deepest(text: str) -> int:
    """Where a JSON text first nests a thousand brackets deep (outside strings), or 0."""
    depth, quoted = 0, False
    for match in re.finditer(r'\\.|"|[\[{]|[\]}]', text):
        token = match.group()
        if token == '"':
            quoted = not quoted
        elif not quoted and token in "[{":
            depth += 1
            if depth > 1000:
                return match.start()
        elif not quoted and token in "]}":
            depth -= 1
    return 0


def visible(text: str) -> str:
    """`text` as one line of printable characters: a line break, control or format character becomes
    its escape (`\\n`, `\\x00`, `\\u2028`), which no reader of a line takes for the end of it."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in named:
        return named[ch]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
