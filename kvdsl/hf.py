"""`kvdsl import`: a published Hugging Face config.json becomes a model spec.

The importer reads the config's facts (layers, heads, KV heads, head sizes,
MLA ranks, windows and layer patterns, state-space sizes, experts), counts the
parameters (`kvdsl.params`) and writes one `model` block whose every cell
names the config key it came from.  What it has to assume (a key left at the
library default, an unrecognised architecture) is reported as a warning and
written into the spec's header; `strict=True` turns each into an error.

What differs between architectures lives in one table, FAMILIES: a `Family`
row per `model_type` names its library defaults, how it lays out its layers,
which attention and MLP variants it uses, how its state-space layers are read
and where its experts sit.  The import code itself asks the row, never the
`model_type`, so a new family is one row (and perhaps one small rule function).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Union

from .errors import ConfigAssumption, ConfigError, KvdslError, Span, UsageError, raise_all, remember_source
from .params import Attention, Layer, Mlp, ParamCount, Shape, StateSpace, count_params
from .parser import MAX_FILE_BYTES

MAX_SIZE = 1 << 40          # any dimension beyond this is junk, not a model
MAX_LAYERS = 100_000
KEYWORDS = {"import", "require", "extends", "defaults", "if", "then", "else", "and", "or", "not", "true", "false"}
MAX_NAME = 100              # characters of a block name: it also names the file NAME.kvspec
MAX_TITLE = 200
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


# ---------------------------------------------------------------- reading

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
            self.findings.error(f"`{self.name(key)}` is {value}: it must be {bound}", self.span(key))
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
        remember_source(path, "")    # nothing to quote: never read the file again to show its first line
        raise ConfigError(f"the file is larger than {MAX_FILE_BYTES // 2**20} MiB: not a config.json", Span(path, 1, 1, 1, 2))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"`{visible(path)}` is not UTF-8 text: a config.json is JSON") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_config(path: str, findings: Findings) -> Config:
    """Parse a config.json; bad JSON or a non-object is a positioned error."""
    text = read_text(path)
    remember_source(path, text.translate(OTHER_LINE_BREAKS))
    try:
        data = json.loads(text, parse_int=_json_integer)
    except json.JSONDecodeError as exc:
        span = Span(path, exc.lineno, exc.colno, exc.lineno, exc.colno + 1)
        raise ConfigError(f"invalid JSON: {exc.msg}", span) from None
    except RecursionError:
        raise ConfigError(f"`{visible(path)}` nests too deeply to be a config.json") from None
    if not isinstance(data, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        raise ConfigError(f"a config.json holds one JSON object, not {kind}", Span(path, 1, 1, 1, 2))
    return Config(path, text, data, findings)


# ---------------------------------------------------------------- the spec

@dataclass
class SpecCell:
    name: str
    value: str
    comment: str = ""


@dataclass
class ImportedModel:
    """One model block as `kvdsl import` writes it."""

    name: str
    title: str
    source: str
    family: str
    cells: list[SpecCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    assumptions: list[ConfigAssumption] = field(default_factory=list)
    params: Optional[ParamCount] = None
    window: Optional[int] = None
    weight_dtype: str = "bf16"
    weight_comment: str = ""
    expert_dtype: Optional[str] = None
    hf_id: str = ""  # the Hugging Face repository, when the config names one

    def add(self, name: str, value, comment: str = "") -> None:
        self.cells.append(SpecCell(name, str(value), comment))

    def value(self, name: str) -> Optional[str]:
        return next((c.value for c in self.cells if c.name == name), None)

    def render(self) -> str:
        """The kvspec text: a header of notes and assumptions, then the block."""
        # Everything here may quote the config (its names, its values, its file name): each
        # comment goes through `visible` and each string through `quoted`, so no text of the
        # config can end a comment or a string and write kvspec of its own.
        lines = [f"# {self.title} ({self.family} architecture), imported from {self.source} by `kvdsl import`."]
        lines += [f"# {note}" for note in self.notes]
        lines += [f"# assumed: {a.message}" for a in self.assumptions]
        lines = [visible(line) for line in lines]
        lines.append(f'model {self.name} "{quoted(self.title)}" {{')
        lines.append(f'    source = "{quoted(self.source)}"')
        if self.hf_id:
            lines.append(f'    hf_id = "{quoted(self.hf_id)}"')
        for cell in self.cells:
            text = f"    {cell.name} = {cell.value}"
            lines.append(f"{text:<30} # {visible(cell.comment)}" if cell.comment else text)
        lines.append("}")
        return "\n".join(lines) + "\n"


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


def quoted(text: str) -> str:
    """`text` inside a kvspec string: visible, with `\\` and `"` escaped."""
    return visible(text).replace("\\", "\\\\").replace('"', '\\"')


def block_name(title: str) -> str:
    """A kvspec block name from a model's name: `Llama-3.1-8B` -> `llama_3_1_8b`.

    A name that is a keyword or a block of the prelude (`fp8`) gets `_model` after it.
    """
    name = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "model"
    if name[0].isdigit():
        name = "m_" + name
    name = name[:MAX_NAME - len("_model")].rstrip("_")
    return name + "_model" if name in KEYWORDS or name in prelude_blocks() else name


@lru_cache(maxsize=1)
def prelude_blocks() -> dict[str, str]:
    """The prelude's block names, each with its kind: names an imported model cannot take."""
    from .loader import load

    return {block.name: block.kind for block, prelude in load([]).blocks if prelude}


def check_options(name: Optional[str], title: Optional[str]) -> None:
    """Refuse a --name or --title the spec could not carry, before any file is read."""
    if name is not None:
        shown = visible(name)
        if len(name) > MAX_NAME:
            raise UsageError(f"--name is {len(name):,} characters long: a model's name has at most {MAX_NAME}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name) or name in KEYWORDS:
            raise UsageError(f"--name `{shown}` is not a kvspec name: letters, digits and `_`, not starting with a digit, not a keyword")
        if name in prelude_blocks():
            raise UsageError(f"--name `{name}` is already a {prelude_blocks()[name]} of kvdsl's prelude: choose another name")
    if title is not None:
        if len(title) > MAX_TITLE:
            raise UsageError(f"--title is {len(title):,} characters long: a title has at most {MAX_TITLE}")
        if not title.isprintable():
            raise UsageError(f"--title `{visible(title)}` must be one line of printable text (no line breaks or control characters)")


def published_name(config: Config) -> tuple[str, str]:
    """(repository id, display title) from `_name_or_path` or an `org__Model.json` file name."""
    named = config.data.get("_name_or_path")
    if isinstance(named, str) and named.strip() and not named.startswith(("/", ".")):
        repo = named.strip().rstrip("/")
    else:
        stem = Path(config.path).stem
        repo = stem.replace("__", "/", 1) if "__" in stem else stem
        if stem == "config":
            repo = Path(config.path).resolve().parent.name or "model"
    return repo, repo.split("/")[-1]


# ---------------------------------------------------------------- family rules
#
# What a family's library code does that its config.json does not say, as small
# functions a row of FAMILIES names.  Each reads the config through `Config`, so
# a missing or junk key is reported at its place like any other.

def window_on_every_layer(config: Config, layers: int) -> tuple[list[str], str]:
    """Mistral-style: a `sliding_window` applies to every layer."""
    if not config.has("sliding_window"):
        return ["full"] * layers, ""
    return ["sliding"] * layers, "`sliding_window` on every layer"


def qwen_windows(config: Config, layers: int) -> tuple[list[str], str]:
    """Qwen: a window only when `use_sliding_window`, on the layers from `max_window_layers` up."""
    if not config.has("sliding_window"):
        return ["full"] * layers, ""
    if not config.flag("use_sliding_window", False):
        return ["full"] * layers, "`sliding_window` is set but `use_sliding_window` is false: no window applies"
    first = config.integer("max_window_layers", minimum=0, required=False)
    first = layers if first is None else min(first, layers)
    return ["full"] * first + ["sliding"] * (layers - first), f"full attention below max_window_layers ({first}), sliding above"


def gemma2_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Gemma 2: local (sliding) and global layers alternate, a local one first."""
    kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    return kinds, "Gemma 2 alternates local (sliding) and global layers, starting with a local one (set by the model code)"


def gemma3_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Gemma 3: every `sliding_window_pattern`th layer global, the others local."""
    pattern = config.integer("sliding_window_pattern")
    kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    return kinds, f"Gemma 3: every {pattern}th layer global, the others local (sliding_window_pattern {pattern})"


def all_state_space(config: Config, layers: int) -> tuple[list[str], str]:
    """Mamba, Mamba-2: no attention at all."""
    return ["ssm"] * layers, "every layer a state-space (Mamba) layer"


def jamba_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Jamba: attention where layer % `attn_layer_period` == `attn_layer_offset`, Mamba elsewhere."""
    period, offset = config.integer("attn_layer_period"), config.integer("attn_layer_offset", minimum=0)
    kinds = ["full" if i % period == offset else "ssm" for i in range(layers)]
    return kinds, f"attention where layer % attn_layer_period ({period}) == attn_layer_offset ({offset}), Mamba elsewhere"


NEMOTRON_LAYERS = {"M": "ssm", "*": "full", "-": "mlp", "E": "mlp"}


def nemotron_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Nemotron-H spells its layers out: `hybrid_override_pattern`, one character per layer."""
    pattern = config.string("hybrid_override_pattern")
    if pattern is None:
        config.findings.error(f"`{config.name('hybrid_override_pattern')}` is missing: it says which layers are Mamba and which attention",
                              config.span())
        raise _Invalid
    bad = sorted(set(pattern) - set(NEMOTRON_LAYERS))
    if bad or len(pattern) != layers:
        problem = f"has characters kvdsl does not know: {' '.join(bad)}" if bad else f"has {len(pattern)} layers but `num_hidden_layers` is {layers}"
        config.findings.error(f"`{config.name('hybrid_override_pattern')}` {problem}", config.span("hybrid_override_pattern"))
        raise _Invalid
    return [NEMOTRON_LAYERS[ch] for ch in pattern], "hybrid_override_pattern (M = Mamba-2, * = attention, - = MLP, E = MoE)"


def qwen3_next_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Qwen3-Next: every `full_attention_interval`th layer full attention, gated delta-net between."""
    interval = config.integer("full_attention_interval")
    kinds = ["full" if (i + 1) % interval == 0 else "ssm" for i in range(layers)]
    return kinds, f"every {interval}th layer full attention, the others gated delta-net (linear attention)"


def kv_heads_from_keys(config: Config, heads: int) -> tuple[int, str]:
    """`num_key_value_heads` or an alias; without one, multi-head attention (said as an assumption)."""
    key = config.first("num_key_value_heads", "num_kv_heads", "n_head_kv")
    if key is None and config.default("num_key_value_heads") is not None:
        return config.integer("num_key_value_heads"), config.cite("num_key_value_heads")
    if key is None:
        config.findings.assume(f"`{config.name('num_key_value_heads')}` is not set: multi-head attention, one KV head per query head",
                               config.span())
        return heads, "assumed MHA: num_key_value_heads not set"
    return config.integer(key), config.name(key)


def falcon_kv_heads(config: Config, heads: int) -> tuple[int, str]:
    """Falcon: `multi_query` (one KV head) unless `new_decoder_architecture` names its KV heads."""
    if config.flag("new_decoder_architecture", False):
        return config.integer("num_kv_heads", "n_head_kv"), f"{config.name('num_kv_heads')} (new_decoder_architecture)"
    if config.flag("multi_query", True):
        return 1, "multi_query: one KV head"
    return heads, "multi_query false: one KV head per query head"


def falcon_norms(config: Config) -> int:
    """Falcon's old layers share one norm between parallel attention and MLP."""
    if config.flag("new_decoder_architecture", False):
        return 2
    return 1 if config.flag("parallel_attn", True) else 2


def mamba_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Mamba-1: an inner size (`intermediate_size`, or `expand` x hidden), a state size and a conv kernel."""
    state = config.integer("state_size", "ssm_state_size", "d_state")
    kernel = config.integer("conv_kernel", "d_conv")
    if config.has("intermediate_size"):
        inner = config.integer("intermediate_size")
        comment = config.name("intermediate_size") + (f" (expand {config.data['expand']} x hidden_size {hidden})" if config.has("expand") else "")
    else:
        expand = config.integer("expand")
        inner, comment = expand * hidden, f"expand {expand} x hidden_size {hidden}"
    out.add("ssm_inner", inner, comment)
    out.add("ssm_state_size", state, config.cite("state_size"))
    out.add("ssm_conv_kernel", kernel, config.cite("conv_kernel"))
    dt_rank = config.integer("time_step_rank", required=False) or -(-hidden // 16)
    return StateSpace("mamba", inner, state, kernel, dt_rank=dt_rank, conv_bias=config.flag("use_conv_bias", True),
                      proj_bias=config.flag("use_bias", False))


def mamba2_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Mamba-2 (and Nemotron-H's Mamba layers): heads x head size, with B and C convolved per group."""
    state = config.integer("state_size", "ssm_state_size", "d_state")
    kernel = config.integer("conv_kernel", "d_conv")
    heads = config.integer("mamba_num_heads", "num_heads")
    head_dim = config.integer("mamba_head_dim", "head_dim")
    groups = config.integer("n_groups")
    inner = heads * head_dim
    out.add("ssm_inner", inner, f"Mamba-2 heads {heads} x head dim {head_dim}")
    out.add("ssm_state_size", state, config.cite(config.first("ssm_state_size", "state_size") or "state_size"))
    out.add("ssm_conv_kernel", kernel, config.cite("conv_kernel"))
    out.add("ssm_conv_channels", inner + 2 * groups * state, f"ssm_inner + 2 x n_groups {groups} x state size (B and C)")
    chunk_key = config.first("mamba_chunk_size", "chunk_size")
    if chunk_key is not None:
        out.add("ssm_chunk_size", config.integer(chunk_key), config.cite(chunk_key))
    return StateSpace("mamba2", inner, state, kernel, heads=heads, groups=groups, conv_bias=config.flag("use_conv_bias", True),
                      proj_bias=config.flag("use_bias", False))


def jamba_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Jamba's Mamba-1 layers, under `mamba_`-prefixed keys."""
    expand, state, kernel = config.integer("mamba_expand"), config.integer("mamba_d_state"), config.integer("mamba_d_conv")
    inner = expand * hidden
    out.add("ssm_inner", inner, f"mamba_expand {expand} x hidden_size {hidden}")
    out.add("ssm_state_size", state, config.cite("mamba_d_state"))
    out.add("ssm_conv_kernel", kernel, config.cite("mamba_d_conv"))
    dt_rank = config.integer("mamba_dt_rank", required=False) or -(-hidden // 16)
    return StateSpace("mamba", inner, state, kernel, dt_rank=dt_rank, conv_bias=config.flag("mamba_conv_bias", True),
                      proj_bias=config.flag("mamba_proj_bias", False), inner_norms=True)


def gated_deltanet_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Qwen3-Next's linear attention: a value x key state per value head, and a conv over q, k and v."""
    v_heads, k_heads = config.integer("linear_num_value_heads"), config.integer("linear_num_key_heads")
    k_dim, v_dim = config.integer("linear_key_head_dim"), config.integer("linear_value_head_dim")
    kernel = config.integer("linear_conv_kernel_dim")
    inner = v_heads * v_dim
    out.add("ssm_inner", inner, f"linear_num_value_heads {v_heads} x linear_value_head_dim {v_dim}")
    out.add("ssm_state_size", k_dim, "linear_key_head_dim: the delta-net state is value x key per head")
    out.add("ssm_conv_kernel", kernel, config.cite("linear_conv_kernel_dim"))
    out.add("ssm_conv_channels", 2 * k_heads * k_dim + inner, "queries and keys (2 x linear_num_key_heads x linear_key_head_dim) plus values")
    return StateSpace("gated_deltanet", inner, k_dim, kernel, heads=v_heads, key_heads=k_heads)


def dense_mlp_from_keys(config: Config, hidden: int, gated: bool, out: ImportedModel) -> Mlp:
    """A dense MLP of `intermediate_size` (or `ffn_hidden_size`)."""
    key = config.first("intermediate_size", "ffn_hidden_size")
    inner = config.integer(key or "intermediate_size")
    out.add("intermediate_size", inner, config.cite(key or "intermediate_size"))
    return Mlp(inner, gated=gated, bias=config.flag("mlp_bias", False))


def falcon_mlp(config: Config, hidden: int, gated: bool, out: ImportedModel) -> Mlp:
    """Falcon's MLP: one up projection of `ffn_hidden_size` (4 x hidden by default), no gate."""
    inner = config.integer("ffn_hidden_size", required=False) or 4 * hidden
    out.add("intermediate_size", inner, "ffn_hidden_size (4 x hidden_size when absent)")
    return Mlp(inner, gated=False, bias=config.flag("bias", False))


def every_layer(config: Config, i: int) -> bool:
    """Mixtral, gpt-oss and most MoE families: every layer's MLP is the experts."""
    return True


def after_first_dense(config: Config, i: int) -> bool:
    """DeepSeek, GLM: the first `first_k_dense_replace` layers dense, then every `moe_layer_freq`th MoE."""
    first_dense = config.integer("first_k_dense_replace", minimum=0, required=False) or 0
    freq = config.integer("moe_layer_freq", required=False) or 1
    return i >= first_dense and i % freq == 0


def every_sparse_step(config: Config, i: int) -> bool:
    """Qwen MoE: every `decoder_sparse_step`th layer, except the `mlp_only_layers`."""
    step = config.integer("decoder_sparse_step", required=False) or 1
    return i not in (config.items("mlp_only_layers", int) or []) and (i + 1) % step == 0


def jamba_experts(config: Config, i: int) -> bool:
    """Jamba: experts where layer % `expert_layer_period` == `expert_layer_offset`."""
    return i % config.integer("expert_layer_period") == config.integer("expert_layer_offset", minimum=0)


def nemotron_experts(config: Config, i: int) -> bool:
    """Nemotron-H: the layers `hybrid_override_pattern` marks `E` (every MLP layer when `layer_types` lists them instead)."""
    pattern = config.data.get("hybrid_override_pattern")
    return not isinstance(pattern, str) or i >= len(pattern) or pattern[i] == "E"


# ---------------------------------------------------------------- families

@dataclass(frozen=True)
class Family:
    """What kvdsl knows of one `model_type`: its library's defaults and the rules its model code follows.

    A field left out is the generic decoder's rule, so a row of FAMILIES states only what
    sets the family apart.  The hooks are the functions above.
    """

    label: str
    defaults: tuple = ()          # (key, value) the library uses when the key is absent
    tied: bool = False            # tie_word_embeddings when the config leaves it out
    # layers
    layer_kinds: Callable[[Config, int], tuple[list[str], str]] = window_on_every_layer   # unless `layer_types` lists them
    norms: Union[int, Callable[[Config], int]] = 2                                      # hidden-size norms per layer
    norm_bias: bool = False
    # attention
    mla: bool = False             # multi-head latent attention, whether or not `kv_lora_rank` is set
    kv_heads: Callable[[Config, int], tuple[int, str]] = kv_heads_from_keys
    attention_bias: bool = False  # `attention_bias` when the config leaves it out
    qkv_bias: bool = False        # q, k and v carry a bias whatever the config says
    o_bias: bool = True           # the output projection has a bias when the attention has
    qk_norm: bool = False
    sinks: bool = False
    gated_query: bool = False
    # state-space (and linear-attention) layers
    state_space: Callable[[Config, int, "ImportedModel"], StateSpace] = mamba_state
    ssm_dtype_keys: tuple = ()    # config keys naming the recurrent state's dtype (mamba_ssm_dtype)
    ssm_dtype_default: Optional[tuple[str, str]] = None   # (dtype, why) when none of them is set
    # MLPs
    mlp_layers: str = "all"       # which layers have an MLP: "all", "none", or "own" (the layers of kind `mlp`)
    dense_mlp: Callable[[Config, int, bool, "ImportedModel"], Mlp] = dense_mlp_from_keys
    gated_mlp: bool = True
    moe_layer: Callable[[Config, int], bool] = every_layer   # with experts: is layer i an MoE layer
    expert_size_key: str = "moe_intermediate_size"           # the experts' size when no expert key is set
    shared_gate: bool = False
    router_bias: bool = False
    expert_bias: bool = False


GENERIC = Family("generic decoder")

GEMMA3_TEXT_DEFAULTS = (
    ("vocab_size", 262208), ("hidden_size", 2304), ("intermediate_size", 9216), ("num_hidden_layers", 26),
    ("num_attention_heads", 8), ("num_key_value_heads", 4), ("head_dim", 256), ("max_position_embeddings", 131072),
    ("sliding_window", 4096), ("sliding_window_pattern", 6),
)
JAMBA_DEFAULTS = (("attn_layer_period", 8), ("attn_layer_offset", 4), ("expert_layer_period", 2), ("expert_layer_offset", 1),
                  ("mamba_d_state", 16), ("mamba_d_conv", 4), ("mamba_expand", 2))
QWEN3_NEXT_DEFAULTS = (("full_attention_interval", 4), ("linear_conv_kernel_dim", 4))
DEEPSEEK = dict(mla=True, moe_layer=after_first_dense)
QWEN_MOE = dict(moe_layer=every_sparse_step)

FAMILIES = {
    "llama": Family("Llama"),
    "mistral": Family("Mistral"),
    "mixtral": Family("Mixtral", expert_size_key="intermediate_size"),
    "qwen2": Family("Qwen2", layer_kinds=qwen_windows, qkv_bias=True),
    "qwen2_moe": Family("Qwen2-MoE", layer_kinds=qwen_windows, qkv_bias=True, shared_gate=True, **QWEN_MOE),
    "qwen3": Family("Qwen3", layer_kinds=qwen_windows, qk_norm=True),
    "qwen3_moe": Family("Qwen3-MoE", layer_kinds=qwen_windows, qk_norm=True, **QWEN_MOE),
    "qwen3_next": Family("Qwen3-Next", defaults=QWEN3_NEXT_DEFAULTS, layer_kinds=qwen3_next_layers, qk_norm=True,
                         gated_query=True, state_space=gated_deltanet_state, ssm_dtype_keys=("mamba_ssm_dtype",),
                         shared_gate=True, **QWEN_MOE),
    "qwen3_5_text": Family("Qwen3.5", defaults=QWEN3_NEXT_DEFAULTS, layer_kinds=qwen3_next_layers, qk_norm=True,
                           gated_query=True, state_space=gated_deltanet_state, ssm_dtype_keys=("mamba_ssm_dtype",)),
    "qwen3_5_moe_text": Family("Qwen3.5-MoE", defaults=QWEN3_NEXT_DEFAULTS, layer_kinds=qwen3_next_layers, qk_norm=True,
                               gated_query=True, state_space=gated_deltanet_state, ssm_dtype_keys=("mamba_ssm_dtype",),
                               shared_gate=True, **QWEN_MOE),
    "glm4_moe": Family("GLM-4.5", o_bias=False, moe_layer=after_first_dense, router_bias=True),
    "deepseek_v2": Family("DeepSeek-V2", **DEEPSEEK),
    "deepseek_v3": Family("DeepSeek-V3", **DEEPSEEK),
    "deepseek_v32": Family("DeepSeek-V3.2", **DEEPSEEK),
    "kimi_k2": Family("Kimi K2", **DEEPSEEK),
    "gpt_oss": Family("gpt-oss", attention_bias=True, sinks=True, expert_size_key="intermediate_size", router_bias=True,
                      expert_bias=True),
    "gemma": Family("Gemma", tied=True),
    "gemma2": Family("Gemma 2", tied=True, layer_kinds=gemma2_layers, norms=4),
    "gemma3_text": Family("Gemma 3", tied=True, defaults=GEMMA3_TEXT_DEFAULTS, layer_kinds=gemma3_layers, norms=4, qk_norm=True),
    "mamba": Family("Mamba", tied=True, layer_kinds=all_state_space, norms=1, mlp_layers="none"),
    "mamba2": Family("Mamba-2", defaults=(("n_groups", 1), ("conv_kernel", 4), ("expand", 2)), layer_kinds=all_state_space,
                     norms=1, state_space=mamba2_state, mlp_layers="none"),
    "jamba": Family("Jamba", defaults=JAMBA_DEFAULTS, layer_kinds=jamba_layers, state_space=jamba_state,
                    moe_layer=jamba_experts, expert_size_key="intermediate_size"),
    "nemotron_h": Family("Nemotron-H", defaults=(("n_groups", 8), ("conv_kernel", 4)), layer_kinds=nemotron_layers, norms=1,
                         state_space=mamba2_state, mlp_layers="own", gated_mlp=False, moe_layer=nemotron_experts,
                         ssm_dtype_keys=("mamba_ssm_cache_dtype", "mamba_ssm_dtype"),
                         ssm_dtype_default=("fp32", "vLLM keeps Nemotron-H's SSM state in float32 when the config does not say "
                                                    "(NemotronHForCausalLMConfig)")),
    "phi3": Family("Phi-3"),
    "falcon": Family("Falcon", tied=True, kv_heads=falcon_kv_heads, norms=falcon_norms, norm_bias=True, dense_mlp=falcon_mlp),
}

ARCHITECTURES = {  # configs without model_type still name their class
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "Qwen3NextForCausalLM": "qwen3_next", "Glm4MoeForCausalLM": "glm4_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV32ForCausalLM": "deepseek_v32",
    "GptOssForCausalLM": "gpt_oss", "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3_text", "MambaForCausalLM": "mamba", "Mamba2ForCausalLM": "mamba2",
    "JambaForCausalLM": "jamba", "NemotronHForCausalLM": "nemotron_h", "Phi3ForCausalLM": "phi3",
    "FalconForCausalLM": "falcon", "RWForCausalLM": "falcon",
    "Qwen3_5ForConditionalGeneration": "qwen3_5_text", "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
}
# a model_type whose language model is another family's (a multimodal one's, under text_config)
TEXT_MODEL_TYPES = {"gemma3": "gemma3_text", "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}


# ---------------------------------------------------------------- import

def import_config(path: str, name: Optional[str] = None, title: Optional[str] = None, strict: bool = False) -> ImportedModel:
    """Read one config.json and return its model spec; raise every error found together."""
    check_options(name, title)
    findings = Findings(strict)
    root = read_config(path, findings)
    try:
        imported = _import(root, findings, name, title)
    except _Invalid:
        imported = None
    raise_all(findings.errors)
    assert imported is not None
    imported.assumptions = findings.assumptions
    return imported


WHOLE_NUMBER_KEYS = {  # key -> smallest sensible value; checked up front so every bad one is reported
    "num_hidden_layers": 1, "n_layer": 1, "hidden_size": 1, "num_attention_heads": 1, "n_head": 1,
    "num_key_value_heads": 1, "head_dim": 1, "intermediate_size": 1, "vocab_size": 1, "max_position_embeddings": 1,
    "sliding_window": 1, "kv_lora_rank": 1, "qk_rope_head_dim": 0, "qk_nope_head_dim": 1, "v_head_dim": 1,
    "q_lora_rank": 1, "moe_intermediate_size": 1, "num_experts": 0, "n_routed_experts": 0, "num_local_experts": 0,
    "num_experts_per_tok": 1, "state_size": 1, "conv_kernel": 1, "ssm_state_size": 1,
    "index_head_dim": 1, "index_n_heads": 1, "index_topk": 1,
}


def _check_whole_numbers(config: Config) -> None:
    for key, minimum in WHOLE_NUMBER_KEYS.items():
        if config.has(key):
            try:
                config.whole(key, minimum)
            except _Invalid:
                pass
    if config.findings.errors:
        raise _Invalid


def _import(root: Config, findings: Findings, name: Optional[str], title: Optional[str]) -> ImportedModel:
    config, nested = _language_model(root)
    _check_whole_numbers(config)
    model_type = _model_type(root, config)
    repo, published = published_name(root)
    title = title or published
    known = FAMILIES.get(model_type)
    family = known or GENERIC
    config.family = family
    label = known.label if known else f"`{model_type}`" if model_type else "an unnamed architecture"
    out = ImportedModel(name or block_name(title), title, f"{repo} config.json ({Path(root.path).name})", label)
    out.hf_id = repo if HUB_ID.fullmatch(repo) else ""
    if nested:
        out.notes.append("The language model is read from `text_config`; the vision encoder is not counted in `params`.")
    mtp_key, mtp = next(((k, c.data[k]) for k in ("num_nextn_predict_layers", "mtp_num_hidden_layers") for c in (root, config)
                         if k in c.data), (None, None))
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0:
        out.notes.append(f"The {mtp} multi-token-prediction layer(s) ({mtp_key}) are not counted: "
                         "serving loads them only for speculative decoding.")
    if known is None:
        what = f"model_type `{model_type}` is not one kvdsl knows" if model_type else "no `model_type` or known `architectures`"
        findings.assume(f"{what}: read as a generic decoder (num_hidden_layers, num_attention_heads, "
                        "num_key_value_heads, head_dim, hidden_size, intermediate_size)", root.span("model_type"))
    layers = config.integer("num_hidden_layers", "n_layer", "num_layers")
    hidden = config.integer("hidden_size", "d_model", "n_embd")
    kinds = _layer_kinds(config, family, layers, out)
    layer_shapes = _facts(config, family, layers, hidden, kinds, out)
    _weights_dtype(root, config, out)
    if known is None:
        _unread_keys(config)
    shape = Shape(config.integer("vocab_size"), hidden, _tied(root, config, family), layer_shapes, norm_bias=family.norm_bias)
    if shape.tied_embeddings:
        out.add("tie_word_embeddings", "true", "tie_word_embeddings: the LM head is the embedding matrix")
    out.params = count_params(shape)
    _params_cell(out, shape)
    return out


ARCHITECTURE_WORDS = re.compile(r"layer|head|expert|window|kv|lora|state|ssm|mamba|conv|attention|attn|pattern|group|chunk|block")
NOT_ARCHITECTURE = re.compile(r"dropout|norm|eps|init|act|scal|rope|softcap|aux|coef|loss|range|std|implementation|_id$|cache|bias|"
                              r"time_step|residual|limit|logit|topk|top_k|n_group|plan|multiplier")


def _unread_keys(config: Config) -> None:
    """A generic read can miss what a new architecture does: name the keys that look like it matters."""
    unread = [k for k in config.data if k not in config.read and ARCHITECTURE_WORDS.search(k) and not NOT_ARCHITECTURE.search(k)]
    if unread:
        names = ", ".join(f"`{config.name(k)}`" for k in unread)
        config.findings.assume(f"kvdsl did not read {names}: if these change what the layers cache, the spec does not show it",
                               config.span(unread[0]))


def _language_model(root: Config) -> tuple[Config, bool]:
    if isinstance(root.data.get("text_config"), dict):
        return root.child("text_config"), True
    return root, False


def _model_type(root: Config, config: Config) -> Optional[str]:
    model_type = config.string("model_type") or root.string("model_type")
    if config is not root:
        model_type = TEXT_MODEL_TYPES.get(model_type, model_type)
    if model_type in FAMILIES:
        return model_type
    architectures = root.items("architectures", str) or []
    for arch in architectures:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    return model_type


def _tied(root: Config, config: Config, family: Family) -> bool:
    for c in (config, root):
        if c.has("tie_word_embeddings"):
            return c.flag("tie_word_embeddings", False)
    return family.tied


# -- layer kinds ------------------------------------------------------------

LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "ssm", "mamba": "ssm",
               "attention": "full", "chunked_attention": "full"}


def _layer_kinds(config: Config, family: Family, layers: int, out: ImportedModel) -> list[str]:
    """One kind per layer: `full`, `sliding`, `ssm` or `mlp`; sets `window` on `out` when there is one."""
    if config.has("layer_types"):
        kinds, source = _listed_layer_types(config, layers), "layer_types"
    else:
        kinds, source = family.layer_kinds(config, layers)
    window = None
    if "sliding" in kinds:
        window = config.integer("sliding_window", "sliding_window_size", "attention_window_size")
        out.notes.append(f"Layers: {source}; window {window:,} tokens.")
    elif source:
        out.notes.append(f"Layers: {source}.")
    out.window = window
    return kinds


def _listed_layer_types(config: Config, layers: int) -> list[str]:
    """`layer_types`, one name per layer, as the config lists them."""
    names = config.items("layer_types", str)
    unknown = sorted({n for n in names if n not in LAYER_TYPES})
    if unknown:
        config.findings.error(f"`{config.name('layer_types')}` has layer types kvdsl does not know: {', '.join(unknown)}",
                              config.span("layer_types"), hint="known: " + ", ".join(sorted(LAYER_TYPES)))
        raise _Invalid
    if len(names) != layers:
        config.findings.error(f"`{config.name('layer_types')}` lists {len(names)} layers but `num_hidden_layers` is {layers}",
                              config.span("layer_types"))
        raise _Invalid
    return [LAYER_TYPES[n] for n in names]


def layer_pattern(kinds: list[str], window: Optional[int]) -> str:
    """A compact kvspec pattern: `[sliding(128), full] * 12`, `[[sliding(1024)] * 5, full] * 10 + [sliding(1024)] * 2`."""
    words = [f"sliding({window})" if k == "sliding" else k for k in kinds]
    n = len(words)
    for period in range(1, n + 1):
        unit = words[:period]
        repeats = n // period
        rest = words[repeats * period:]
        if (repeats >= 2 or period == n) and words[: repeats * period] == unit * repeats and rest == unit[: len(rest)]:
            break
    terms = [_runs(unit, repeats)]
    if rest:
        terms.append(_runs(rest, 1))
    return " + ".join(terms)


def _runs(words: list[str], repeats: int) -> str:
    groups: list[tuple[str, int]] = []
    for w in words:
        if groups and groups[-1][0] == w:
            groups[-1] = (w, groups[-1][1] + 1)
        else:
            groups.append((w, 1))
    if len(groups) == 1:
        word, count = groups[0]
        return f"[{word}] * {count * repeats}" if count * repeats > 1 else f"[{word}]"
    if repeats > 1:
        inner = ", ".join(w if c == 1 else f"[{w}] * {c}" for w, c in groups)
        return f"[{inner}] * {repeats}"
    terms, singles = [], []
    for w, c in groups:  # no repetition: a sum of runs, singles listed together
        if c == 1:
            singles.append(w)
            continue
        if singles:
            terms.append(f"[{', '.join(singles)}]")
            singles = []
        terms.append(f"[{w}] * {c}")
    if singles:
        terms.append(f"[{', '.join(singles)}]")
    return " + ".join(terms)


# -- the facts ----------------------------------------------------------------

def _facts(config: Config, family: Family, layers: int, hidden: int, kinds: list[str], out: ImportedModel) -> list[Layer]:
    """Write the shape cells onto `out` and return the layers for the parameter count."""
    counts = {k: kinds.count(k) for k in ("full", "sliding", "ssm", "mlp")}
    if counts["full"] == layers:
        out.add("layers", layers, config.cite("num_hidden_layers"))
    else:
        out.add("layer_kinds", layer_pattern(kinds, out.window), _kinds_comment(counts, out.window))
        out.add("layers", layers, f"{config.cite('num_hidden_layers')} (checked against the pattern)")
    attention = None
    if counts["full"] + counts["sliding"]:
        attention = _attention(config, family, hidden, out)
    else:
        out.add("heads", 0, "no attention layers")
        out.add("kv_heads", 0)
        out.add("head_dim", 0)
    ssm = family.state_space(config, hidden, out) if counts["ssm"] else None
    if ssm is not None:
        _ssm_state_dtype(config, family, out)
    context = config.integer("max_position_embeddings", "n_positions", "max_sequence_length", required=False)
    if context is not None:
        out.add("context_limit", context, config.cite("max_position_embeddings"))
    elif counts["ssm"] == layers:
        config.findings.assume("`max_position_embeddings` is not set: a state-space model has no position limit; "
                               "context_limit = 1M", config.span())
        out.add("context_limit", "1M", "assumed: no position limit")
    else:
        config.findings.assume("`max_position_embeddings` is not set: context_limit stays at kvdsl's default (128K)", config.span())
    out.add("hidden_size", hidden, config.cite("hidden_size"))
    out.add("vocab_size", config.integer("vocab_size"), config.cite("vocab_size"))
    mlps = _mlps(config, family, layers, hidden, kinds, out)
    norms = family.norms(config) if callable(family.norms) else family.norms
    mixers = {"full": attention, "sliding": attention, "ssm": ssm, "mlp": None}
    return [Layer(mixers[kind], mlp, norms) for kind, mlp in zip(kinds, mlps)]


def _ssm_state_dtype(config: Config, family: Family, out: ImportedModel) -> None:
    """`ssm_state_dtype`: the recurrent state's dtype when the config (or the family's serving default) names one."""
    key = config.first(*family.ssm_dtype_keys) if family.ssm_dtype_keys else None
    if key is not None:
        name = config.string(key)
        dtype = DTYPES.get(name)
        if dtype is None:
            config.findings.assume(f"`{config.name(key)}` `{name}` is not a dtype kvdsl knows: the state stays in the model's dtype",
                                   config.span(key))
            return
        out.add("ssm_state_dtype", dtype, config.cite(key))
    elif family.ssm_dtype_default is not None:
        dtype, why = family.ssm_dtype_default
        out.add("ssm_state_dtype", dtype, why)


def _kinds_comment(counts: dict, window: Optional[int]) -> str:
    parts = [f"{counts['full']} full"] if counts["full"] else []
    if counts["sliding"]:
        parts.append(f"{counts['sliding']} sliding ({window:,})")
    if counts["ssm"]:
        parts.append(f"{counts['ssm']} state-space")
    if counts["mlp"]:
        parts.append(f"{counts['mlp']} MLP-only")
    return ", ".join(parts)


def _attention(config: Config, family: Family, hidden: int, out: ImportedModel) -> Attention:
    heads = config.integer("num_attention_heads", "n_head", "num_heads")
    out.add("heads", heads, config.cite("num_attention_heads"))
    if family.mla or config.has("kv_lora_rank"):
        return _mla(config, heads, hidden, out)
    kv_heads, kv_comment = family.kv_heads(config, heads)
    out.add("kv_heads", kv_heads, kv_comment)
    head_dim, comment = _head_dim(config, heads, hidden)
    out.add("head_dim", head_dim, comment)
    if kv_heads > heads or heads % kv_heads:
        config.findings.error(f"`{config.name('num_attention_heads')}` {heads} is not a multiple of the {kv_heads} KV heads",
                              config.span("num_key_value_heads"))
        raise _Invalid
    bias = config.flag("attention_bias", family.attention_bias) or config.flag("bias", False)
    qkv_bias = bias or family.qkv_bias or config.flag("qkv_bias", False)
    qk_norm = family.qk_norm or config.flag("use_qk_norm", False)
    return Attention(heads, kv_heads, head_dim, qkv_bias=qkv_bias, o_bias=bias and family.o_bias, qk_norm=qk_norm,
                     sinks=family.sinks, gated_query=family.gated_query)


def _head_dim(config: Config, heads: int, hidden: int) -> tuple[int, str]:
    """`head_dim` when the config (or its library) sets it, else `attention_head_dim`, else hidden / heads."""
    if config.has("head_dim") or config.default("head_dim") is not None:
        head_dim = config.integer("head_dim")
        return head_dim, config.cite("head_dim") + (" (explicit)" if config.has("head_dim") and head_dim * heads != hidden else "")
    if config.has("attention_head_dim"):
        return config.integer("attention_head_dim"), config.name("attention_head_dim")
    if hidden % heads:
        config.findings.error(f"`{config.name('hidden_size')}` {hidden} is not a multiple of `{config.name('num_attention_heads')}` {heads}, "
                              "and `head_dim` is not given", config.span("hidden_size"))
        raise _Invalid
    return hidden // heads, f"hidden_size / num_attention_heads = {hidden} / {heads}"


def _mla(config: Config, heads: int, hidden: int, out: ImportedModel) -> Attention:
    kv_heads = config.integer("num_key_value_heads", required=False) or heads
    out.add("kv_heads", kv_heads, f"{config.cite('num_key_value_heads')}: not what MLA caches, unused")
    nope = config.integer("qk_nope_head_dim")
    rope = config.integer("qk_rope_head_dim")
    rank = config.integer("kv_lora_rank")
    out.add("head_dim", nope, f"{config.cite('qk_nope_head_dim')}, for the MHA comparison")
    out.add("kv_lora_rank", rank, config.cite("kv_lora_rank"))
    out.add("rope_head_dim", rope, config.cite("qk_rope_head_dim"))
    out.notes.append(f"MLA: each layer caches one {rank}-element latent plus a {rope}-element RoPE key per token "
                     f"({rank + rope} elements, no factor 2); num_key_value_heads ({kv_heads}) is not what it caches.")
    q_rank = config.integer("q_lora_rank", required=False) or 0
    if q_rank:
        out.add("q_lora_rank", q_rank, config.cite("q_lora_rank"))
    v_head = config.integer("v_head_dim", required=False) or nope
    index_dim, index_heads = _indexer(config, out)
    return Attention(heads, kv_heads, nope, v_head_dim=v_head, kv_lora_rank=rank, q_lora_rank=q_rank,
                     qk_nope_head_dim=nope, qk_rope_head_dim=rope, index_n_heads=index_heads, index_head_dim=index_dim)


def _indexer(config: Config, out: ImportedModel) -> tuple[int, int]:
    """DeepSeek sparse attention: the indexer's key size and heads, 0 without one."""
    if not config.has("index_head_dim"):
        return 0, 0
    dim = config.integer("index_head_dim")
    heads = config.integer("index_n_heads")
    topk = config.integer("index_topk")
    out.add("index_head_dim", dim, config.cite("index_head_dim"))
    out.add("index_topk", topk, config.cite("index_topk"))
    out.notes.append(f"Sparse attention: each layer also caches the indexer's {dim}-element FP8 key and its FP32 scales "
                     f"per token; each query attends to {topk} tokens.")
    return dim, heads


def _mlps(config: Config, family: Family, layers: int, hidden: int, kinds: list[str], out: ImportedModel) -> list[Optional[Mlp]]:
    """Each layer's MLP, dense or MoE, and the cells that describe them."""
    if family.mlp_layers == "none":
        return [None] * layers
    has_mlp = [kind == "mlp" for kind in kinds] if family.mlp_layers == "own" else [True] * layers
    experts_key = config.first("n_routed_experts", "num_local_experts", "num_experts")
    experts = config.integer(experts_key, minimum=0) if experts_key else 0
    is_moe = [family.moe_layer(config, i) for i in range(layers)] if experts else [False] * layers
    needs_dense = not experts or any(mlp and not moe for mlp, moe in zip(has_mlp, is_moe))
    dense = family.dense_mlp(config, hidden, family.gated_mlp, out) if needs_dense else None
    moe = _moe(config, family, experts, experts_key, out) if experts else None
    return [(moe if layer_moe else dense) if mlp else None for mlp, layer_moe in zip(has_mlp, is_moe)]


def _moe(config: Config, family: Family, experts: int, experts_key: str, out: ImportedModel) -> Mlp:
    active = config.integer("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk")
    key = config.first("moe_intermediate_size", "expert_intermediate_size") or family.expert_size_key
    inner = config.integer(key)
    out.add("experts", experts, config.cite(experts_key))
    out.add("experts_per_token", active, config.cite(config.first("num_experts_per_tok", "experts_per_token") or "num_experts_per_tok"))
    out.add("expert_intermediate_size", inner, config.cite(key))
    shared = 0
    if config.has("n_shared_experts"):
        count = config.integer("n_shared_experts", minimum=0)
        shared = count * inner
        if count:
            out.add("shared_experts", count, config.cite("n_shared_experts"))
    elif config.has("shared_expert_intermediate_size"):
        shared = config.integer("shared_expert_intermediate_size", minimum=0)
        out.add("shared_expert_intermediate_size", shared, config.cite("shared_expert_intermediate_size"))
    router_bias = family.router_bias or config.string("topk_method") == "noaux_tc"
    return Mlp(inner, gated=family.gated_mlp, experts=experts, shared_intermediate=shared, active_experts=active,
               shared_gate=family.shared_gate and shared > 0, router_bias=router_bias, expert_bias=family.expert_bias)


# -- weights --------------------------------------------------------------------

def _weights_dtype(root: Config, config: Config, out: ImportedModel) -> None:
    """`weight_dtype` (and MXFP4 experts) from torch_dtype and quantization_config."""
    holder = next((c for c in (root, config) if c.has("torch_dtype") or c.has("dtype")), None)
    dtype = None
    if holder is not None:
        key = "torch_dtype" if holder.has("torch_dtype") else "dtype"
        name = holder.string(key)
        dtype = DTYPES.get(name)
        if dtype is None:
            root.findings.assume(f"`{holder.name(key)}` `{name}` is not a dtype kvdsl knows: weights stay bf16", holder.span(key))
    else:
        root.findings.assume("`torch_dtype` is not set: weights assumed bf16", root.span())
    out.weight_dtype, out.weight_comment = dtype or "bf16", "torch_dtype" if dtype else "assumed"
    quant = root.data.get("quantization_config")
    if quant is None:
        return
    if not isinstance(quant, dict):
        root.findings.error("`quantization_config` must be an object", root.span("quantization_config"))
        raise _Invalid
    method = quant.get("quant_method")
    if method == "mxfp4":
        out.expert_dtype = "mxfp4"
        out.weight_comment = "torch_dtype; quantization_config: MXFP4 experts only"
        return
    read = _compressed_tensors(quant) if method == "compressed-tensors" else _quantized(method, quant)
    if read is None:
        root.findings.assume(f"`quantization_config` ({_shown(method)}) is not one kvdsl reads: weights taken as "
                             f"{out.weight_dtype}", root.span("quantization_config"))
    else:
        out.weight_dtype, out.weight_comment = read


def _quantized(method, quant: dict) -> Optional[tuple[str, str]]:
    """(weight_dtype, comment) of an fp8, GPTQ or AWQ `quantization_config`, or None."""
    block, bits, group = quant.get("weight_block_size"), quant.get("bits"), quant.get("group_size")
    if method == "fp8" and block == [128, 128]:
        return "fp8_block128", "quantization_config: fp8, weight_block_size [128, 128]"
    if method == "fp8" and block is None:
        return "fp8", "quantization_config: fp8, one scale per tensor"
    if method in ("gptq", "awq") and bits == 4 and group == 128:
        return "int4_g128", f"quantization_config: {method}, 4 bits, group 128"
    return None


COMPRESSED_TENSORS = (  # weights' (num_bits, type, strategy, group_size or block_structure) -> format, comment
    ((8, "float", "tensor", None), "fp8", "FP8 weights, one scale per tensor"),
    ((8, "float", "channel", None), "fp8", "FP8 weights, one scale per output channel (not counted)"),
    ((8, "float", "block", [128, 128]), "fp8_block128", "FP8 weights, one scale per 128 x 128 block"),
    ((4, "int", "group", 128), "int4_g128", "INT4 weights, one scale per group of 128"),
    ((4, "float", "tensor_group", 16), "nvfp4", "NVFP4 weights, one FP8 scale per 16"),
)


def _compressed_tensors(quant: dict) -> Optional[tuple[str, str]]:
    """(weight_dtype, comment) of an llm-compressor config whose `config_groups` share one weight scheme, or None."""
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return None
    schemes = []
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            return None
        shape = weights.get("block_structure") if weights.get("strategy") == "block" else weights.get("group_size")
        schemes.append((weights.get("num_bits"), weights.get("type"), weights.get("strategy"), shape))
    if any(scheme != schemes[0] for scheme in schemes):
        return None
    for scheme, dtype, comment in COMPRESSED_TENSORS:
        if scheme == schemes[0]:
            return dtype, f"quantization_config: compressed-tensors, {comment}"
    return None


def _params_cell(out: ImportedModel, shape: Shape) -> None:
    p = out.params
    head = "tied" if shape.tied_embeddings else f"lm_head {p.head:,}"
    out.notes.append(f"Parameters counted from the config: embeddings {p.embeddings:,} + layers {p.layers:,} "
                     f"+ final norm {p.norm:,} + {head} = {p.total:,} ({p.total / 1e9:.2f}B).")
    out.add("params", p.total, "total parameters, counted from the config (see above)")
    if p.active != p.total:
        out.add("active_params", p.active, "parameters one token uses: the routed experts it is sent to, not every expert")
    out.add("weight_dtype", out.weight_dtype, out.weight_comment)
    if out.expert_dtype:
        out.add("expert_params", p.expert_weights, "routed-expert weight matrices")
        out.add("expert_weight_dtype", out.expert_dtype, "quantization_config: MXFP4")


# ---------------------------------------------------------------- many files

def config_files(source: str) -> list[str]:
    """The config.json files a source names: the file itself, or every `*.json` in a folder."""
    path = Path(source)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UsageError(_not_found(source)) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read `{visible(source)}`: {getattr(exc, 'strerror', None) or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        try:
            os.listdir(path)
        except OSError as exc:
            raise UsageError(f"cannot read `{visible(source)}`: {exc.strerror or exc}") from None
        files = sorted(str(p) for p in path.glob("*.json") if p.is_file())
        if not files:
            raise UsageError(f"`{visible(source)}` holds no .json files")
        return files
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"cannot read `{visible(source)}`: not a regular file; pass a config.json or a folder of them")
    return [source]


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _not_found(source: str) -> str:
    if HUB_ID.fullmatch(source) and not source.endswith(".json"):
        return (f"`{source}` is not a file or folder here, and kvdsl does not fetch models from the Hugging Face Hub: "
                f"download its config.json (`huggingface-cli download {source} config.json --local-dir DIR`) "
                "and pass that file or DIR")
    return f"cannot read `{visible(source)}`: not found"


def import_all(files: list[str], name: Optional[str] = None, title: Optional[str] = None,
               strict: bool = False) -> list[ImportedModel]:
    """Import every file; raise all their errors together, and refuse two models with one name."""
    models, errors = [], []
    for path in files:
        try:
            models.append(import_config(path, name, title, strict))
        except UsageError:
            raise
        except KvdslError as exc:
            errors.extend(exc.errors if hasattr(exc, "errors") else [exc])
    seen: dict[str, str] = {}
    for model in models:
        if model.name in seen:
            errors.append(ConfigError(f"`{model.source}` and `{seen[model.name]}` would both be model `{model.name}`"))
        seen.setdefault(model.name, model.source)
    raise_all(errors)
    verify(models)
    return models


def verify(models: list[ImportedModel]) -> None:
    """Every imported spec must pass `kvdsl check` and evaluate: load them as the user will."""
    import tempfile

    from .api import evaluate_paths

    with tempfile.TemporaryDirectory(prefix="kvdsl-import-") as folder:
        paths = []
        for model in models:
            path = Path(folder) / f"{model.name}.kvspec"
            path.write_text(model.render(), encoding="utf-8")
            paths.append(str(path))
        try:
            evaluate_paths(paths)
        except KvdslError as exc:
            raise ConfigError("the imported spec does not evaluate:\n" + exc.render()) from None
