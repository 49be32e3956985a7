"""The algebra of solving, on SymPy expressions alone: a condition's relations as gaps,
their roots and regimes, closed forms in their shortest shape, bounds read off a condition.

Nothing here knows a program or a cell: `solve.py` expands the condition and
calls these; `solve_live.py` builds a workbook's formula from them.
"""

from __future__ import annotations

import math
import sys
import types
from contextlib import contextmanager
from typing import Optional

import sympy as sp

from .symbolic import TooLarge


def relations(expr) -> list:
    """The relations of a condition joined by `and`, each on its own."""
    if isinstance(expr, sp.And):
        return [r for arg in expr.args for r in relations(arg)]
    return [expr]


def gaps(constraint, x) -> list:
    """Each relation of the constraint that involves x, as `gap <= 0`."""
    out = []
    for relation in relations(constraint):
        if isinstance(relation, sp.core.relational.Relational) and relation.has(x):
            less = isinstance(relation, (sp.Le, sp.Lt))
            out.append(relation.lhs - relation.rhs if less else relation.rhs - relation.lhs)
    return out


def at_values(expr, env: dict):
    """`expr` with the values of `env` put in its symbols.

    `xreplace` first: one pass (`subs` puts them in one at a time, comparing
    every min and max argument symbolically); `subs` where that meets a 0/0
    or an error in a regime the values do not take, which `subs` drops before
    reaching it.
    """
    try:
        out = expr.xreplace(env)
    except (TypeError, ValueError, ArithmeticError):  # SymPy refuses to compare with zoo: a division by 0
        return expr.subs(env)
    return expr.subs(env) if out.has(sp.zoo, sp.nan) else out


class NoNumber(ArithmeticError):
    """A formula that shows an error at the given values (a division by 0 in a regime they take)."""


def sheet_value(expr, env: dict):
    """The number (or truth) `expr` gives at the values `env`, computed as a spreadsheet computes its formula.

    An `if` (Piecewise, ITE) evaluates only the branch its conditions take; every other node evaluates all its
    arguments, as MIN, MAX, AND and OR do, so a division by 0 anywhere else raises NoNumber as the sheet shows
    #DIV/0!.  Each shared subexpression is computed once, unlike `subs`, which compares min and max arguments
    symbolically.
    """
    done: dict = {}

    def value(node):
        if node in env:
            return env[node]
        if not node.args:
            if node.free_symbols:
                raise NoNumber(f"`{node}` has no value")
            return node
        if node in done:
            return done[node]
        if isinstance(node, sp.Piecewise):
            out = next((value(arm) for arm, condition in node.args if value(condition) is sp.true), None)
            if out is None:
                raise NoNumber("no branch holds")
        elif isinstance(node, sp.ITE):
            condition, then, otherwise = node.args
            out = value(then) if value(condition) is sp.true else value(otherwise)
        else:
            try:
                out = node.func(*[value(arg) for arg in node.args])
            except (TypeError, ValueError, ArithmeticError):  # SymPy refuses to compare with zoo: a division by 0
                raise NoNumber("a division by 0") from None
            if out.has(sp.zoo, sp.nan) or out.free_symbols:
                raise NoNumber("a division by 0")
        done[node] = out
        return out

    return value(expr)


def substitute_conditions(expr, env: dict, nested: bool = False):
    """Decide the conditions of every `if`, `min` and `max` that the given values decide.

    A `min` or `max` the values leave open becomes its regimes, as `if`s; one
    left open inside another raises TooLarge, unless `nested` (a workbook's
    formula, over every regime, whose size is bounded before).
    """
    if expr.has(sp.Min, sp.Max):
        expr = expr.replace(lambda e: isinstance(e, (sp.Min, sp.Max)), lambda e: _decided_extremum(e, env, nested))

    def fix(pw):
        return sp.Piecewise(*[(a, at_values(c, env) if hasattr(c, "subs") else c) for a, c in pw.args])

    return expr.replace(lambda e: isinstance(e, sp.Piecewise), fix)


def _decided_extremum(extremum, env: dict, nested: bool = False):
    """A `min` or `max` as the argument the values choose; among arguments still open, as `if`s.

    The arguments the values decide are settled before any rewriting: rewritten
    first, every `min` of n arguments becomes n branches, and nested ones multiply.
    """
    values = [at_values(arg, env) for arg in extremum.args]
    decided = [i for i, value in enumerate(values) if value.is_number and value.is_extended_real]
    args = list(extremum.args)
    if decided:
        best = (min if isinstance(extremum, sp.Min) else max)(decided, key=values.__getitem__)  # the first on a tie
        if len(decided) == len(args):
            return args[best]
        args = [arg for i, arg in enumerate(args) if i == best or i not in decided]
    if not nested and any(arg.has(sp.Piecewise) for arg in args):
        raise TooLarge("the condition nests a `min` or `max` the values leave open inside another: "
                       "its closed form has more branches than a reader could follow")
    op = sp.Le if isinstance(extremum, sp.Min) else sp.Ge
    return sp.Piecewise(*[(arg, sp.And(*[at_values(op(arg, other), env) for other in args[i + 1:]]))
                          for i, arg in enumerate(args)])


def real_roots(piece, x) -> list:
    """Real roots of piece = 0 in closed form, for rational functions of x; [] otherwise."""
    return [root for root, _ in roots_and_slopes(piece, x)]


def roots_and_slopes(piece, x) -> list:
    """(root, slope) of each real root of piece = 0 in closed form, for rational functions of x ([] otherwise):
    the slope is piece's derivative, an expression in x to take at that root."""
    if not piece.is_rational_function(x):
        return []
    linear = _linear_root(piece, x)
    if linear is not None:
        return linear
    try:
        roots = [r for r in sp.solve(sp.Eq(piece, 0), x) if not r.has(sp.I)]
    except (NotImplementedError, ValueError, TypeError):
        return []
    derivative = sp.diff(piece, x) if roots else None
    return [(root, derivative) for root in roots]


def _linear_root(piece, x):
    """[(root, slope)] of piece = 0 when its numerator is linear in x ([] when the root zeroes the denominator);
    else None.  At the root, piece's derivative is the numerator's over the denominator.

    The common case, without `sp.solve`: it simplifies its answers, and
    `simplify` alone costs more than the rest of a solve.
    """
    numerator, denominator = sp.fraction(sp.together(piece))
    try:
        poly = sp.Poly(numerator, x)
    except sp.PolynomialError:
        return None
    if poly.degree() != 1:
        return None
    slope, offset = poly.coeff_monomial(x), poly.coeff_monomial(1)
    if slope.has(x) or offset.has(x) or slope == 0:
        return None
    root = sp.cancel(-offset / slope)
    if denominator.has(x) and sp.cancel(denominator.subs(x, root)) == 0:
        return []
    return [] if root.has(sp.I) else [(root, slope / denominator)]


def _group_terms(add):
    """`a*b*k + a*b*v - u` -> `a*b*(k + v) - u`: pull out what most terms share."""
    terms = [t for t in add.args if isinstance(t, sp.Mul)]
    if len(terms) < 2:
        return add
    common = sp.factor_terms(sp.Add(*terms))
    if not isinstance(common, sp.Mul):
        return add
    return common + sp.Add(*[t for t in add.args if not isinstance(t, sp.Mul)])


def tidy(expr):
    """The shortest of a few equivalent forms of a closed form, with positive denominators."""
    numerator, denominator = sp.fraction(sp.cancel(expr))
    flipped = (-numerator) / (-denominator)
    forms = list(dict.fromkeys([expr, sp.factor_terms(expr), sp.factor(expr), flipped]))
    forms = list(dict.fromkeys(forms + [f.replace(lambda e: e.is_Add, _group_terms) for f in forms]))
    return min(forms, key=_length)


def _length(expr) -> tuple:
    """How long a form reads: its operations and minus signs, then its characters."""
    text = str(expr)
    return sp.count_ops(expr, visual=False) + text.count("-"), len(text)


def relax(expr):
    """The expression with its rounding (`ceil`, `floor`) taken away."""
    return expr.replace(sp.ceiling, lambda a: a).replace(sp.floor, lambda a: a)


def pieces(expr) -> list:
    """(piece, condition) of each branch of an expression; one branch, always, when it has none."""
    folded = sp.piecewise_fold(expr)
    if isinstance(folded, sp.Piecewise):
        return [(a, c) for a, c in folded.args if c is not sp.false]
    return [(folded, sp.true)]


def real_number(value) -> Optional[float]:
    """The expression's value as a real float; None when it has none (complex, nan, a symbol left)."""
    try:
        number = complex(value)
    except (TypeError, ValueError):
        return None
    if abs(number.imag) > 1e-12 or math.isnan(number.real):
        return None
    return number.real


def relation_text(relation) -> str:
    """A relation as text, `==` and `!=` spelled as kvspec spells them."""
    if isinstance(relation, (sp.Eq, sp.Ne)):
        return f"{sp.sstr(relation.lhs)} {'==' if isinstance(relation, sp.Eq) else '!='} {sp.sstr(relation.rhs)}"
    return sp.sstr(relation)


def relaxed_bounds(constraint, x, env: dict) -> list:
    """For each relation on x, [(condition, root, slope)] of each regime of its relaxed form: the root as
    found (`tidy` gives the form shown, for the roots shown), the slope of the relation there."""
    out = []
    for gap in gaps(constraint, x):
        gap = relax(substitute_conditions(gap, env))
        regimes = []
        earlier = []
        for piece, condition in pieces(gap):
            effective = sp.And(condition, *[sp.Not(c) for c in earlier]) if earlier else condition
            earlier.append(condition)
            condition = effective
            if not piece.has(x):
                continue
            found = roots_and_slopes(piece, x)
            if not found:
                continue
            root, derivative = found[0]
            slope = real_number(at_values(derivative, env).subs(x, at_values(root, env)))
            regimes.append((condition, root, slope))
        if regimes:
            out.append(regimes)
    return out


def condition_text(condition, env) -> str:
    condition = at_values(condition, env)
    if condition is sp.true:
        return "always"
    symbols = condition.free_symbols
    if len(symbols) == 1:
        condition = _one_bound(condition, next(iter(symbols)))
    return sp.sstr(condition)


def _one_bound(condition, x):
    """A condition on x alone, each of its `and`ed parts as a bound on x where one can be read."""
    if isinstance(condition, sp.And):
        return sp.And(*[_one_bound(part, x) for part in condition.args])
    bound = linear_bound(condition, x)
    if bound is not None:
        condition = bound
    elif isinstance(condition, sp.core.relational.Relational):
        try:
            condition = sp.solve_univariate_inequality(condition, x, relational=True)
        except (NotImplementedError, ValueError, TypeError):
            pass
    return condition.subs({sp.Lt(x, sp.oo): sp.true, sp.Lt(-sp.oo, x): sp.true, sp.Lt(0, x): sp.true})


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def linear_bound(condition, x):
    """`a*x + b < 0` (or <=, >, >=) with a number a: the bound on x, as SymPy's
    solve_univariate_inequality writes it (`x < r`, `r <= x`), without its cost;
    None for any other condition."""
    if not isinstance(condition, sp.core.relational.Relational) or condition.rel_op not in _FLIPPED:
        return None
    expr = condition.lhs - condition.rhs
    if not expr.is_polynomial(x) or sp.degree(expr, x) != 1:
        return None
    a = expr.coeff(x, 1)
    if not a.is_number or not a.is_nonzero:
        return None
    root = -expr.coeff(x, 0) / a
    op = condition.rel_op if a.is_positive else _FLIPPED[condition.rel_op]
    if op in ("<", "<="):
        return sp.Rel(x, root, op)
    return sp.Rel(root, x, _FLIPPED[op])


def rounding_step(gap, x):
    """B when the unknown is charged as `ceil(x / B) * B` (paging), else None."""
    for term in gap.atoms(sp.ceiling):
        coefficient = sp.cancel(term.args[0] / x)
        if not coefficient.has(x) and coefficient != 0:
            return 1 / coefficient
    return None


def larger_than(expr, limit: int) -> bool:
    """Whether the expression has more than `limit` nodes (counted without walking them all)."""
    for count, _ in enumerate(sp.preorder_traversal(expr)):
        if count > limit:
            return True
    return False


def unbounded_where_zero(root):
    """A bound that divides by cells which may be 0 is unbounded (oo) where they are.

    hazard: past a sliding window, or in a pure state-space model, nothing
    grows with the context, so the memory bound divides by 0; a spreadsheet
    would show #DIV/0! there and spoil every MIN it feeds.
    """
    denominator = sp.fraction(root)[1]
    if not denominator.free_symbols:
        return root
    return sp.Piecewise((sp.oo, sp.Eq(denominator, 0)), (root, True))


@contextmanager
def stand_in(name: str, *classes: str):
    """While inside, an import of the module `name` (not imported yet) finds a
    stand-in whose `classes` nothing is an instance of; it is removed
    afterwards, so a real import later is untouched."""
    if name in sys.modules:
        yield
        return
    module = types.ModuleType(name)
    for class_name in classes:
        setattr(module, class_name, type(class_name, (), {}))
    sys.modules[name] = module
    try:
        yield
    finally:
        if sys.modules.get(name) is module:
            del sys.modules[name]
