"""Seeded generators of bad input: mutated specs, mutated configs, junk arguments.

Every function takes a `random.Random` so that a run is reproduced by its seed.
"""

from __future__ import annotations

import json
import random
import re

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\"[^\"\n]*\"|\S")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[KMGT]?")
NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")

# characters that some line splitters treat as line breaks, and other oddities
SEPARATORS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r", "\r\n", "\x00", "\t", "\ufeff"]
NUMBERS = ["0", "-0", "1", "-1", "0.0", "1e-300", "1e-999", "1e308", "1e309", "1e99999999999999999999",
           "9" * 400, "1" + "0" * 5000, "0.000000000000000000001", "1e-99999999999999999999", "2**1024",
           "4294967296", "18446744073709551616", "nan", "inf", "-inf", "1_000", "0x10", "1.5.5", "32k", "7B",
           "1e3 GiB", "0 GiB", "1 KiB", "1e40 tokens", "? ", "-1e99999"]
TOKENS = ["{", "}", "(", ")", "=", "==", "?", ",", ";", ".", "+", "-", "*", "/", "**", "%", "if", "else",
          "let", "import", "model", "deployment", "hardware", "engine", "defaults", "fits", "max", "min",
          "ceil", "floor", "and", "or", "not", "true", "false", "\"", "#", "GiB", "tokens", "fp8", "\\",
          "fn", "for", "in", "..", "[", "]", ":", "whole", "[s in 1..3]", "[2]", "[s - 1]", "for s in 1..4:",
          "fn f(x) = x\n", "counted_stages()"]
JUNK_SETS = ["heads=512 MiB", "context=1e99999999999999999999", "batch=?", "x=", "=3", "a.b.c=1",
             "context=32k", "batch=-1", "batch=0", "gpus=0", "utilization=2", "utilization=0",
             "kv_dtype=FP8", "kv_dtype=nope", "model=l4", "hardware=fp8", "context=" + "9" * 5000,
             "batch=1/0", "batch=(" * 300 + "1" + ")" * 300, "batch=\u2028", "batch=1\n2", "engine=\"x\"",
             "engine=\"sglang\"", "nope.batch=1", "context=?", "gpus=?", "params=7B", "context=1e-300",
             "batch=max(1,2", "heads=heads", "batch=batch+1", "context=" + "1+" * 2000 + "1"]
VARY = ["batch=1:8", "context=1K:64K:x2", "gpus=1:16", "utilization=0.5:0.95:0.05", "batch=8:1",
        "batch=1:1e12", "batch=0:0", "context=1:2:0", "batch=a:b", "nope=1:2", "batch=1:8:x1",
        "batch=1:4:-1", "=1:2", "batch", "batch=1e99999:2", "heads=1:4", "kv_dtype=1:2"]
CELLS = ["batch", "context", "gpus", "utilization", "kv_bytes_per_element", "heads", "nope", "fits",
         "kv_cache_per_sequence", "model", "engine", "", "a.b", "Batch"]


def mutate_text(rng: random.Random, text: str) -> tuple[str, str]:
    """One random edit of a spec's text, and the edit's name."""
    kind = rng.choice(["byte_flip", "delete", "insert", "token", "number", "name_case", "nesting",
                       "line_endings", "separator", "duplicate_line", "truncate", "collide", "swap_lines"])
    if not text.strip():
        return text + rng.choice(TOKENS) * rng.randint(1, 5), kind
    if kind == "byte_flip":
        data = bytearray(text.encode("utf-8", errors="surrogateescape"))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return data.decode("utf-8", errors="surrogateescape"), kind
    if kind == "delete":
        i = rng.randrange(len(text))
        return text[:i] + text[i + rng.randint(1, 20):], kind
    if kind == "insert":
        i = rng.randrange(len(text) + 1)
        return text[:i] + rng.choice(TOKENS + SEPARATORS) + text[i:], kind
    if kind == "token":
        tokens = list(TOKEN.finditer(text))
        m = rng.choice(tokens)
        other = rng.choice(TOKENS + [t.group() for t in rng.sample(tokens, min(3, len(tokens)))])
        return text[: m.start()] + rng.choice([other, "", m.group() * 2]) + text[m.end():], kind
    if kind == "number":
        numbers = list(NUMBER.finditer(text))
        if not numbers:
            return text + "\n" + rng.choice(NUMBERS), kind
        m = rng.choice(numbers)
        return text[: m.start()] + rng.choice(NUMBERS) + text[m.end():], kind
    if kind == "name_case":
        names = list(NAME.finditer(text))
        if not names:
            return text + "\nlet Llama = 1\nlet llama = 2\n", kind
        m = rng.choice(names)
        new = rng.choice([m.group().upper(), m.group().capitalize(), m.group().swapcase()])
        return text[: m.start()] + new + text[m.end():], kind
    if kind == "nesting":
        numbers = list(NUMBER.finditer(text))
        depth = rng.choice([50, 200, 900, 3000, 20000])
        opener, closer = rng.choice([("(", ")"), ("-", ""), ("max(", ", 1)"), ("1 + (", ")"), ("not ", "")])
        if not numbers:
            return text + "\nlet deep = " + opener * depth + "1" + closer * depth + "\n", kind
        m = rng.choice(numbers)
        return text[: m.start()] + opener * depth + m.group() + closer * depth + text[m.end():], kind
    if kind == "line_endings":
        style = rng.choice(["\r\n", "\r", "mixed"])
        if style != "mixed":
            return text.replace("\n", style), kind
        return "".join(c if c != "\n" else rng.choice(["\n", "\r\n", "\r"]) for c in text), kind
    if kind == "separator":
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        j = rng.randint(0, len(lines[i]))
        lines[i] = lines[i][:j] + rng.choice(SEPARATORS) + lines[i][j:]
        return "\n".join(lines), kind
    if kind == "duplicate_line":
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        return "\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1:]), kind
    if kind == "swap_lines":
        lines = text.split("\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines), kind
    if kind == "truncate":
        return text[: rng.randrange(len(text))], kind
    return collide_names(rng, text), kind


def collide_names(rng: random.Random, text: str) -> str:
    """Add a block or a cell whose name differs from an existing one only by case."""
    block = re.search(r"^(model|deployment|hardware|format)\s+(\w+)", text, re.M)
    cell = re.search(r"^\s+(\w+)\s*=", text, re.M)
    if block and (rng.random() < 0.5 or not cell):
        name = block.group(2)
        twin = name.capitalize() if name != name.capitalize() else name.lower()
        start = block.start()
        end = text.find("\n}", start)
        copy = text[start: end + 2 if end >= 0 else len(text)].replace(name, twin, 1)
        return text + "\n" + copy + "\n"
    if cell:
        name = cell.group(1)
        twin = name.upper() if name != name.upper() else name.lower()
        line_end = text.find("\n", cell.end())
        return text[:line_end] + f"\n    let {twin} = {name} * 2" + text[line_end:]
    return text + "\nlet Llama = 1\nlet llama = 2\n"


# --------------------------------------------------------------------------- functions, families, for

PARAMS = ["a", "b", "c", "x", "s", "layers", "min", "fn"]
BOUNDS = ["1", "2", "3", "8", "0", "-1", "1000", "5000", "layers", "2 * 2", "1.5", "1 GiB", "f()", "k()", "s", "3 / 2"]


def _bound(rng: random.Random) -> str:
    return rng.choice(BOUNDS)


def _expression(rng: random.Random, names: list, depth: int = 0) -> str:
    """A random expression over `names`, with calls, families' members and `for`."""
    choice = rng.random()
    if depth > 3 or choice < 0.25:
        return rng.choice(names + ["1", "2 tokens", "0", "1 GiB", "true", '"t"'])
    if choice < 0.45:
        op = rng.choice(["+", "-", "*", "/", "^", "==", "<", "and", "&"])
        return f"{_expression(rng, names, depth + 1)} {op} {_expression(rng, names, depth + 1)}"
    if choice < 0.55:
        return f"if {_expression(rng, names, depth + 1)} then {_expression(rng, names, depth + 1)} else {_expression(rng, names, depth + 1)}"
    if choice < 0.70:
        func = rng.choice(["max", "min", "floor", "whole", "abs", "f", "g", "h", "nope", "ceil"])
        args = [_expression(rng, names, depth + 1) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
        if rng.random() < 0.4:
            v = rng.choice(["s", "t", "layers", "f"])
            args.append(f"for {v} in {_bound(rng)}..{_bound(rng)}: {_expression(rng, names + [v], depth + 1)}")
        return f"{func}({', '.join(args)})"
    if choice < 0.85:
        family = rng.choice(["sq", "tot", "nope", "layers"])
        return f"{family}[{rng.choice(['s', 's - 1', 's + 1', '1', '0', '9', 'layers', '2 / 3', _expression(rng, names, depth + 1)])}]"
    return f"({_expression(rng, names, depth + 1)})"


def repetition_spec(rng: random.Random) -> str:
    """A model with random functions, families and `for`: valid often, broken often."""
    lines = []
    for name in rng.sample(["f", "g", "h", "k", "max", "f"], rng.randint(0, 4)):
        params = rng.sample(PARAMS, rng.randint(0, 3))
        if rng.random() < 0.1 and params:
            params.append(params[0])
        body = _expression(rng, params or ["1"])
        lines.append(f"fn {name}({', '.join(params)}) = {body}")
    lines.append('model m "M" {\n    layers = 8\n    heads = 4\n    head_dim = 8\n    params = 1e9')
    for family in rng.sample(["sq", "tot", "sq"], rng.randint(0, 3)):
        var = rng.choice(["s", "s", "t", "layers"])
        lines.append(f"    let {family}[{var} in {_bound(rng)}..{_bound(rng)}] = {_expression(rng, [var, 'layers', 'heads'])}")
    for i in range(rng.randint(1, 4)):
        lines.append(f"    let x{i} = {_expression(rng, ['layers', 'heads', 'head_dim'])}")
    if rng.random() < 0.3:
        lines.append(f"    sq[{rng.choice(['1', '2', '9', '1.5'])}] = {rng.choice(['1', 'layers', 'sq[1]'])}")
    if rng.random() < 0.2:
        lines.append(f"    require {_expression(rng, ['layers', 'heads'])}")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- configs

NASTY_STRINGS = ["org/M\ndefaults deployment {\n    utilization = 1\n}\n#", "a\rb", "a\r\nb", "a\u2028b", "a\u2029b",
                 "a\x85b", "a\fb", "a\vb", "a\x00b", "#", "\"", "\\", "`", "x" * 5000, "", " ", "fp16", "Llama",
                 "llama", "ÄÖÜ", "\ud800" if False else "\u00e9", "../../etc/passwd", "a/b/c", "{", "}"]
NASTY_VALUES = [0, -1, 1, 2**63, 10**400, 1e308, -1e308, 1.5, True, False, None, [], {}, [1, 2], "32", "x",
                {"a": {"b": {"c": 1}}}, float("inf"), float("nan"), 10**4299]
STRING_FIELDS = ["_name_or_path", "model_type", "torch_dtype", "architectures", "hidden_act", "transformers_version"]


def mutate_config(rng: random.Random, config: dict, text: str) -> tuple[str, str]:
    """A mutated config.json, as text, and the mutation's name."""
    kind = rng.choice(["value", "string", "remove", "byte_flip", "nesting", "huge_int", "truncate", "type"])
    data = json.loads(text)
    keys = list(data) or ["x"]
    if kind == "value":
        for _ in range(rng.randint(1, 3)):
            data[rng.choice(keys)] = rng.choice(NASTY_VALUES)
    elif kind == "string":
        for _ in range(rng.randint(1, 3)):
            field = rng.choice(STRING_FIELDS)
            value = rng.choice(NASTY_STRINGS) + rng.choice(["", rng.choice(NASTY_STRINGS)])
            data[field] = [value] if field == "architectures" else value
    elif kind == "remove":
        for _ in range(rng.randint(1, 5)):
            data.pop(rng.choice(keys), None)
    elif kind == "nesting":
        depth = rng.choice([10, 100, 900, 5000])
        data[rng.choice(keys)] = json.loads("[" * depth + "1" + "]" * depth) if depth < 900 else None
        if depth >= 900:
            return json.dumps(data)[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}", kind
    elif kind == "huge_int":
        digits = rng.choice([20, 400, 4300, 4301, 10000])
        return re.sub(r"\b\d+\b", "9" * digits, text, count=rng.randint(1, 3)), kind
    elif kind == "type":
        key = rng.choice(keys)
        data[key] = str(data[key]) if not isinstance(data[key], str) else 7
    elif kind == "truncate":
        return text[: rng.randrange(len(text))], kind
    else:
        raw = bytearray(text.encode("utf-8", errors="surrogateescape"))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        return raw.decode("utf-8", errors="surrogateescape"), kind
    return json.dumps(data, allow_nan=True), kind


def odd_name(rng: random.Random) -> str:
    return rng.choice(["x" * 5000, "a\nb", "a\x00b", "fp16", "l4", "Llama", "9lives", "", " ", "a b", "é",
                       "_xlnm_print", "x" * 300, "model", "deployment", "a\u2028b", "ok_name"])


def dumps_text(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


# --------------------------------------------------------------------------- layout only (for `fmt`)

def reflow(rng: random.Random, text: str) -> str:
    """The same spec laid out differently: indentation, spaces around `=`, `,`, `+` and `*`, blank and
    trailing space, tabs, CRLF.  Never a change of meaning (no two tokens are joined)."""
    out = []
    for line in text.split("\n"):
        body = line.strip()
        if body and '"' not in body and "#" not in body and rng.random() < 0.6:
            for sep in (" = ", ", ", " + ", " * "):
                body = body.replace(sep, rng.choice([sep.strip() if sep != ", " else ",", "  " + sep.strip() + "   ", sep]))
        indent = rng.choice(["", " ", "  ", "    ", "\t", "        ", "            "]) if body else ""
        out.append(indent + body + rng.choice(["", "", " ", "\t  "]))
        if rng.random() < 0.08 and body and not body.endswith(("+", "-", "*", "/", "(", ",", "and", "or", "then", "else", "&")):
            out.append(rng.choice(["", "   "]))
    joined = "\n".join(out)
    return joined.replace("\n", "\r\n") if rng.random() < 0.2 else joined
