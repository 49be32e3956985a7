"""Parse tree -> spec model for expressions, literals and layer patterns.

`ExpressionRules` holds the transformer's rules for this part of the
grammar (numbers with units, strings, names, calls, `for`, `if`, operators;
`[sliding, full] * 18` patterns and their layer kinds); `SpecTransformer` in
transformer.py mixes it in.  `parse_number` reads a number and its unit
exactly, in base units.
"""

from __future__ import annotations

import re
from fractions import Fraction

from lark import Token, v_args

from . import model as m
from .errors import InvalidValueError, KvdslError, Span
from .units import NUMBER, SUFFIXES, TOKENS, parse_unit


MAX_EXPONENT = 30  # |value| below 10^30: more than any byte count of any cluster
MAX_DIGITS = 40
MAX_PATTERN_LAYERS = 100_000


def parse_number(text: str, unit: str | None, span: Span) -> m.Num:
    """A NUMBER token (and optional UNIT) -> a Num in base units, exactly."""
    clean = text.replace("_", "")
    suffix = clean[-1] if clean[-1] in SUFFIXES else ""
    value = _decimal(clean[:-1] if suffix else clean)
    if value is None:
        raise InvalidValueError(f"number `{text}` is out of range", span, hint=f"kvspec numbers lie between 10^-{MAX_EXPONENT} and 10^{MAX_EXPONENT}")
    dim = NUMBER
    if suffix:
        factor, dim = SUFFIXES[suffix]
        value *= factor
    if unit is not None:
        factor, unit_dim = parse_unit(unit)
        if suffix == "%":
            raise InvalidValueError(f"`{text}` is a plain fraction and cannot carry the unit `{unit}`", span)
        if suffix and not (unit_dim == TOKENS and factor == 1):
            raise InvalidValueError(f"`{text}` is a token count and cannot carry the unit `{unit}`", span)
        value *= factor
        dim = unit_dim
    if abs(value) >= 10**MAX_EXPONENT:
        raise InvalidValueError(f"number `{text}` is out of range", span, hint=f"kvspec numbers stay below 10^{MAX_EXPONENT}")
    return m.Num(value, dim, span, bare=(unit is None and not suffix))


def _decimal(digits: str):
    """`12.5e3` -> Fraction(12500), or None when it has too many digits or too large an exponent.

    hazard: Python refuses to turn more than 4,300 digits into an int, and
    `Fraction("1e" + "0" * 5000 + "5")` is such a conversion, so no digit
    string reaches `int` before its length is checked.
    """
    mantissa, _, exponent = digits.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    power = exponent.lstrip("+-").lstrip("0")
    if len(significant) > MAX_DIGITS or len(power) > len(str(MAX_EXPONENT)) or (power and int(power) > MAX_EXPONENT):
        return None
    scale = (-int(power) if exponent.startswith("-") else int(power or 0)) - len(fraction)
    return Fraction(int(significant or "0")) * Fraction(10) ** scale


def unquote(token: str) -> str:
    """A string token's text without its quotes, each escaped character as itself."""
    return re.sub(r"\\(.)", r"\1", token[1:-1])


class ExpressionRules:
    """The rules of expressions and layer patterns, mixed into `SpecTransformer` (whose `_span`, `_tspan`
    and `errors` they use)."""

    # -- layer patterns --

    def pattern(self, terms):
        return [layer for term in terms for layer in term]

    @v_args(meta=True)
    def pattern_term(self, meta, children):
        count = 1
        if children and isinstance(children[-1], Token):
            tok = children.pop()
            digits = str(tok).lstrip("0")
            if not re.fullmatch(r"\d+", str(tok)) or not digits:
                raise InvalidValueError(f"a pattern repeats a whole number of times (1 or more), not `{tok}`", self._tspan(tok))
            if len(digits) > len(str(MAX_PATTERN_LAYERS)) or int(digits) > MAX_PATTERN_LAYERS:
                raise InvalidValueError(f"the pattern has more than {MAX_PATTERN_LAYERS:,} layers", self._tspan(tok))
            count = int(digits)
        flat = []
        for child in children:
            flat.extend(child if isinstance(child, list) else [child])
        if len(flat) * count > MAX_PATTERN_LAYERS:
            raise InvalidValueError(f"the pattern has more than {MAX_PATTERN_LAYERS:,} layers", self._span(meta))
        return flat * count

    @v_args(meta=True)
    def layer_kind(self, meta, children):
        arguments = [c for c in children[1:] if not isinstance(c, m.KindSetting)]
        shape = tuple(c for c in children[1:] if isinstance(c, m.KindSetting))
        if len(arguments) > 1:
            raise InvalidValueError("a layer kind takes one plain argument (the window); name the others, as in "
                                    "`sliding(1024, kv_heads = 16)`", arguments[1].span)
        return m.LayerKind(str(children[0]), arguments[0] if arguments else None, self._span(meta), shape)

    @v_args(meta=True)
    def kind_setting(self, meta, children):
        return m.KindSetting(str(children[0]), children[1], self._span(meta))

    # -- expressions --

    @v_args(meta=True)
    def quantity(self, meta, children):
        number = children[0]
        unit = str(children[1]) if len(children) > 1 else None
        span = self._span(meta)
        try:
            return parse_number(str(number), unit, span)
        except KvdslError as exc:
            self.errors.append(exc)
            return m.Num(Fraction(0), NUMBER, span)

    @v_args(meta=True)
    def boolean(self, meta, children):
        return m.Bool(str(children[0]) == "true", self._span(meta))

    @v_args(meta=True)
    def none(self, meta, children):
        return m.NoneValue(self._span(meta))

    @v_args(meta=True)
    def string(self, meta, children):
        return m.Str(unquote(children[0]), self._span(meta))

    @v_args(meta=True)
    def concat(self, meta, children):
        return m.Binary("&", children[0], children[1], self._span(meta))

    @v_args(meta=True)
    def name(self, meta, children):
        index = children[-1] if not isinstance(children[-1], Token) else None
        parts = tuple(str(c) for c in children if isinstance(c, Token))
        return m.Name(parts, self._span(meta), index)

    @v_args(meta=True)
    def call(self, meta, children):
        func, *args = children
        return m.Call(str(func), tuple(args), self._span(meta), self._tspan(func))

    @v_args(meta=True)
    def for_argument(self, meta, children):
        var, (low, high), body = children
        return m.For(str(var), low, high, body, self._span(meta), self._tspan(var))

    @v_args(meta=True)
    def ifelse(self, meta, children):
        return m.If(children[0], children[1], children[2], self._span(meta))

    @v_args(meta=True)
    def binary(self, meta, children):
        return m.Binary(str(children[1]), children[0], children[2], self._span(meta))

    compare = binary

    @v_args(meta=True)
    def power(self, meta, children):
        return m.Binary("^", children[0], children[1], self._span(meta))

    @v_args(meta=True)
    def and_op(self, meta, children):
        return m.Binary("and", children[0], children[1], self._span(meta))

    @v_args(meta=True)
    def or_op(self, meta, children):
        return m.Binary("or", children[0], children[1], self._span(meta))

    @v_args(meta=True)
    def neg(self, meta, children):
        operand = children[0]
        if isinstance(operand, m.Num):  # `-5` is a literal, so a bare `-5` takes its cell's unit like `5`
            return m.Num(-operand.value, operand.dim, self._span(meta), operand.bare)
        return m.Unary("-", operand, self._span(meta))

    @v_args(meta=True)
    def not_op(self, meta, children):
        return m.Unary("not", children[0], self._span(meta))
