"""Long inputs give the same answers as short ones: flat chains of any length, sweeps in chunks.

How fast they are is measured by `benchmarks/scaling.py`, not here.
"""

from __future__ import annotations

import io
import random
from fractions import Fraction
from pathlib import Path

import pytest

from kvdsl.api import build_program, evaluate_paths
from kvdsl.parser import parse_text
from kvdsl.transformer_chains import BALANCE_AT

ROOT = Path(__file__).resolve().parents[1]
HEAD = 'model a "A" {\n    layers = 1; heads = 1; head_dim = 1; params = 1\n'


def value_of(tmp_path, rule: str):
    spec = tmp_path / "long.kvspec"
    spec.write_text(HEAD + f"    let x = {rule}\n}}\n")
    _, values = evaluate_paths([str(spec)])
    return values[("a", "x")]


def depth(expr) -> int:
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack += [(child, level + 1) for child in node.children()]
    return deepest


def test_flat_sum_of_ten_thousand_terms(tmp_path):
    terms = [i % 97 for i in range(10_000)]
    assert value_of(tmp_path, " + ".join(map(str, terms))) == sum(terms)


def test_flat_sum_and_difference_of_ten_thousand_terms(tmp_path):
    rng = random.Random(7)
    terms = [rng.randint(0, 1000) for _ in range(10_000)]
    signs = [rng.choice("+-") for _ in terms[1:]]
    rule = str(terms[0]) + "".join(f" {s} {t}" for s, t in zip(signs, terms[1:]))
    expected = terms[0] + sum(t if s == "+" else -t for s, t in zip(signs, terms[1:]))
    assert value_of(tmp_path, rule) == expected


def test_long_product_with_divisions(tmp_path):
    rng = random.Random(3)
    factors = [rng.choice(["2", "0.5", "3", "1.5"]) for _ in range(400)]
    ops = [rng.choice("*/") for _ in factors[1:]]
    rule = factors[0] + "".join(f" {o} {f}" for o, f in zip(ops, factors[1:]))
    expected = Fraction(factors[0])
    for o, f in zip(ops, factors[1:]):
        expected = expected * Fraction(f) if o == "*" else expected / Fraction(f)
    assert value_of(tmp_path, rule) == expected


def test_flat_max_and_concat_of_ten_thousand_terms(tmp_path):
    terms = [(i * 7919) % 10_007 for i in range(10_000)]
    assert value_of(tmp_path, f"max({', '.join(map(str, terms))})") == max(terms)
    words = [f'"{i % 10}"' for i in range(3_000)]
    assert value_of(tmp_path, " & ".join(words)) == "".join(str(i % 10) for i in range(3_000))


def test_long_chain_is_shallow_and_short_chain_keeps_its_shape():
    long = parse_text(HEAD + "    let x = " + " - ".join(["1"] * 10_000) + "\n}\n", "long.kvspec")
    expr = long.items[0].cells[-1].expr
    assert depth(expr) < 40
    short = parse_text(HEAD + "    let x = " + " + ".join(["1"] * BALANCE_AT) + "\n}\n", "short.kvspec")
    expr = short.items[0].cells[-1].expr
    assert depth(expr) == BALANCE_AT  # left-leaning, as written: ((1 + 1) + 1) + ...


def test_regrouped_chain_keeps_the_whole_rule_span(tmp_path):
    long = parse_text(HEAD + "    let x = " + " + ".join(["1"] * 100) + "\n}\n", "long.kvspec")
    expr = long.items[0].cells[-1].expr
    assert (expr.span.line, expr.span.column) == (3, 13)
    assert expr.span.end_column == 13 + len(" + ".join(["1"] * 100))


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_sweep_csv_in_chunks_equals_one_pass(chunk):
    from kvdsl.sweep import prepare, write_csv, write_csv_chunks

    spec = str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")
    compiled = prepare(build_program([spec]), "mistral_7b_l4",
                       ["batch=1:12", "context=1K:40K:3K", "utilization=0.5:0.95:0.15"])
    whole = io.StringIO()
    inputs, results = compiled.run()
    write_csv(whole, compiled, inputs, results)
    chunked = io.StringIO()
    write_csv_chunks(chunked, compiled, compiled.chunks(chunk=chunk))
    assert chunked.getvalue() == whole.getvalue()
    assert whole.getvalue().count("\n") == 1 + 12 * 14 * 4


def test_sweep_grid_in_pieces_is_the_grid():
    from kvdsl.sweep import prepare

    spec = str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")
    compiled = prepare(build_program([spec]), "mistral_7b_l4", ["batch=1:3", "context=1K:4K:1K"])
    rows = list(zip(*[list(axis) for axis in compiled.grid()]))
    assert rows == [(b, c) for b in (1.0, 2.0, 3.0) for c in (1024.0, 2048.0, 3072.0, 4096.0)]
    pieces = [compiled.grid(start, min(12, start + 5)) for start in range(0, 12, 5)]
    assert [tuple(p) for piece in pieces for p in zip(*piece)] == rows


def test_cached_dependents_match_a_fresh_walk():
    from kvdsl.graph import walk_refs

    program = build_program([str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")])
    readers: dict = {}
    for key, rc in program.cells.items():
        if rc.expr is not None and rc.form in ("rule", "require"):
            for ref in walk_refs(rc.expr):
                readers.setdefault(ref.key, set()).add(key)
    for target in [("mistral_7b_l4", "batch"), ("mistral_7b_l4", "context"), ("mistral_7b_v0_1", "layers")]:
        fresh, todo = {target}, [target]
        while todo:
            for user in readers.get(todo.pop(), ()):
                if user not in fresh:
                    fresh.add(user)
                    todo.append(user)
        assert program.dependents(target) == fresh
        assert program.dependents(target) == fresh  # the second answer, from the cache, too


def test_reused_evaluation_is_a_fresh_copy():
    from kvdsl.evaluate import evaluate

    program = build_program([str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")])
    first = evaluate(program)
    first[("mistral_7b_l4", "batch")] = Fraction(999)
    second = evaluate(program)
    assert second[("mistral_7b_l4", "batch")] == 8
    assert second is not first
