"""The prelude states each rule once, and the language facts it relies on are defined once."""

from __future__ import annotations

import re
from collections import defaultdict

from kvdsl import model as m
from kvdsl.loader import prelude_files
from kvdsl.parser import lark_parser, parse_file
from kvdsl.units import DECLARED_DIMS, unit_names


def _rules():
    """(file, block, cell, right-hand side text) of every rule the prelude writes."""
    for path in prelude_files():
        spec = parse_file(path, f"kvdsl/prelude/{path.name}")
        for item in spec.items:
            if isinstance(item, (m.Block, m.Defaults)):
                where = item.name if isinstance(item, m.Block) else "defaults " + ", ".join(item.kinds)
                for cell in item.cells:
                    if cell.form == "rule":
                        rhs = " ".join(cell.source.split("=", 1)[1].split())
                        yield path.name, where, cell.name, rhs


def _trivial(rhs: str) -> bool:
    """A literal or a single name: saying it twice restates no rule."""
    return re.fullmatch(r"-?[\d.]+( \w+(/\w+)?)?|true|false|[A-Za-z_][\w.]*", rhs) is not None


def test_no_rule_is_written_twice():
    seen = defaultdict(list)
    for file, block, cell, rhs in _rules():
        if not _trivial(rhs):
            seen[rhs].append(f"{file} {block}.{cell}")
    twice = {rhs: places for rhs, places in seen.items() if len(places) > 1}
    assert not twice, twice


OUTPUT_MODULES = ["report.py", "plan*.py", "solve*.py", "search.py", "excel/*.py"]
# a prelude cell as an output module writes it into a formula: `{n('fits')}`, `self._n(d, "fits")`, `{goal}`
_CELL = r"""(?:\{n\(["'][a-z_]+["']\)\}|\{goal\}|\{\}|\$?[A-Z]{1,3}\$?\{?first\}?)"""
# arithmetic or a comparison between two cells, or a cell against a number: a rule or a threshold
_FORMULA = re.compile(rf"{_CELL}\s*(?:[-+<>]|[<>!]=|==|\*(?!\d)|/(?!\{{(?:GIB|gib)\}}))\s*(?:{_CELL}|\(?\d)"
                      rf"|(?:\d|\))\s*(?:[-+<>]|[<>]=)\s*{_CELL}")


def _formula_strings(source: str) -> list:
    """The formulas over cells an output module writes (lines of its source that build one)."""
    return [line.strip() for line in source.splitlines() if _FORMULA.search(line)]


def test_no_output_module_writes_a_formula_over_prelude_cells():
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "kvdsl"
    found = {}
    for pattern in OUTPUT_MODULES:
        for path in sorted(package.glob(pattern)):
            lines = _formula_strings(path.read_text(encoding="utf-8"))
            if lines:
                found[str(path.relative_to(package))] = lines
    assert found == {}, found


def test_the_formula_scan_sees_rules_and_thresholds():
    caught = ["f\"=({n('kv_budget_bytes_per_gpu')}-{n('kv_bytes_per_gpu')}){gib}\"",
              "rules.append((where, f\"AND({goal}>0,{n(cell)}>{goal})\", red))",
              "(\"shortfall_bytes_per_gpu\", \"{}>0\"), (\"max_batch\", \"{}<1\")",
              "f\"{n('output_tokens_per_second')}*{n('replicas')}\""]
    passed = ["f\"={n('weights_bytes_per_gpu')}/{GIB}\"", "f\"={n('kv_bytes_per_gpu')}{gib}\"",
              "f\"NOT({n(condition)})\"", "shown(\"tpot_seconds\", \"*1000\")"]
    assert [bool(_formula_strings(line)) for line in caught + passed] == [True] * len(caught) + [False] * len(passed)


def test_the_scan_sees_the_prelude():
    rules = list(_rules())
    assert len(rules) > 150
    assert any(block == "defaults model, deployment" for _, block, _, _ in rules)


def _words(node) -> set:
    """Every string a finite regular expression (parsed by sre_parse) matches."""
    try:
        import re._constants as c
    except ImportError:  # Python before 3.11
        import sre_constants as c

    out = {""}
    for op, arg in node:
        if op is c.LITERAL:
            options = {chr(arg)}
        elif op is c.IN:
            options = {chr(a) for kind, a in arg if kind is c.LITERAL}
        elif op is c.SUBPATTERN:
            options = _words(arg[3])
        elif op is c.BRANCH:
            options = set().union(*(_words(b) for b in arg[1]))
        elif op is c.MAX_REPEAT and arg[1] == 1:
            options = {""} | _words(arg[2])
        else:  # a lookahead or the like: it adds no characters
            continue
        out = {a + b for a in out for b in options}
    return out


def test_the_grammar_and_units_py_know_the_same_units():
    try:
        import re._parser as sre_parse
    except ImportError:  # Python before 3.11
        import sre_parse

    pattern = lark_parser().get_terminal("UNIT").pattern.to_regexp()
    words = _words(sre_parse.parse(pattern))
    singles = {w for w in words if "/" not in w}
    assert singles == set(unit_names())
    assert {w.partition("/")[2] for w in words if "/" in w} <= set(unit_names())


def test_declared_dimensions_have_units():
    assert {"number", "bytes", "tokens", "bytes/token"} <= set(DECLARED_DIMS)
