"""Excel formula text without SymPy: text and number literals, Excel's limits, and a resolved rule printed as
written (`RulePrinter`).

A number prints as a literal Excel reads as the same double: at most 15
significant digits (Excel keeps no more), longer ones as exact arithmetic
(`(hi*1000+lo)*2^k`), a fraction as `p/q`.  An unbounded value prints as
UNBOUNDED, 1E+300: a number every spreadsheet holds, larger than any byte or
token count, that MIN and comparisons treat as it should be treated.
SymPy's closed forms print through `printer.py`, which uses the same numbers
and limits; the workbook imports SymPy only for those.
"""

from __future__ import annotations

import re
from fractions import Fraction

from kvdsl.errors import ExportError
from kvdsl.functions import CALL, COMPARISON, FUNCTIONS, NEGATIVE
from kvdsl.visitor import ExprVisitor

# Excel precedence, loosest first.  NEG is any text that starts with a unary
# minus: Excel applies that minus before everything else, so such text is
# parenthesized wherever an operand could be mistaken for it.
CMP, NEG, ADD, MUL, POW, ATOM = range(6)

UNBOUNDED = "1E+300"  # what an unbounded answer is in a workbook
MAX_DIGITS = 15  # Excel keeps this many significant digits of a literal
MAX_FORMULA_CHARS = 8192
MAX_FUNCTION_NESTING = 64
MAX_TEXT_LITERAL = 255
SPLIT_HINT = "write parts of the expression as cells of their own (`let part = ...`) and use them"

RELATIONAL_OPS = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
SIMPLE_NAME = re.compile(r"[A-Za-z0-9_.$!\\]+")


XML_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # control characters that XML cannot hold


def excel_text_literal(s: str) -> str:
    """An Excel string literal for `s`: in double quotes, inner quotes doubled, control characters as U+FFFD
    (as `cells.text_cell` stores them)."""
    if len(s) > MAX_TEXT_LITERAL:
        raise ExportError(f"a text of {len(s)} characters is longer than Excel allows in a formula "
                          f"({MAX_TEXT_LITERAL})")
    return '"' + XML_UNSAFE.sub("\ufffd", s).replace('"', '""') + '"'


def number_text(value: Fraction) -> tuple[str, int]:
    """Text and precedence of an exact number that Excel reads as the same double."""
    if value < 0:
        text, prec = number_text(-value)
        return "-" + (text if prec in (ATOM, MUL) else f"({text})"), NEG
    if value.denominator == 1:
        n = value.numerator
        d = to_float(n)  # rejects what overflows a double
        if len(str(n).rstrip("0")) <= MAX_DIGITS:
            return str(n), ATOM
        return exact_double(d)
    num = number_text(Fraction(value.numerator))[0]
    den, den_prec = number_text(Fraction(value.denominator))
    return f"{num}/{den if den_prec > MUL else f'({den})'}", MUL


def to_float(value) -> float:
    """`value` as a double; an error when Excel cannot hold it (too large, not a number)."""
    try:
        d = float(value)
    except (OverflowError, TypeError) as exc:
        raise ExportError(f"`{value}` is not a number Excel can hold") from exc
    if d != d or d in (float("inf"), float("-inf")):
        raise ExportError(f"`{value}` is not a number Excel can hold")
    return d


def exact_double(d: float) -> tuple[str, int]:
    """Text Excel evaluates to exactly the positive double `d`, no literal over 15 digits.

    `d` is m * 2**e with m < 2**53: m is written whole or as `(hi*1000+lo)`,
    and scaling by a power of two is exact.
    """
    num, den = d.as_integer_ratio()
    shift = den.bit_length() - 1 if den > 1 else (num & -num).bit_length() - 1
    if shift > 1023:
        raise ExportError(f"`{d!r}` is too small for Excel")
    if den == 1:
        num >>= shift
    mantissa = str(num) if len(str(num)) <= MAX_DIGITS else f"({num // 1000}*1000+{num % 1000})"
    if shift == 0:
        return mantissa, ATOM
    if den > 1:
        return f"{mantissa}/2^{shift}", MUL
    return (f"2^{shift}", POW) if num == 1 else (f"{mantissa}*2^{shift}", MUL)


def check_limits(text: str) -> None:
    """Reject formulas Excel refuses: too long, or functions nested too deep."""
    if len(text) > MAX_FORMULA_CHARS:
        raise ExportError(f"the formula has {len(text):,} characters; Excel allows {MAX_FORMULA_CHARS:,}",
                          hint=SPLIT_HINT)
    if text.count("(") <= MAX_FUNCTION_NESTING:
        return
    stack, calls, quote = [], 0, None
    for match in _NESTING_CHARS.finditer(text):
        ch, i = match.group(), match.start()
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            call = i > 0 and (text[i - 1].isalnum() or text[i - 1] in "._")
            stack.append(call)
            calls += call
            if calls > MAX_FUNCTION_NESTING:
                raise ExportError(f"the formula nests functions deeper than Excel's "
                                  f"{MAX_FUNCTION_NESTING} levels", hint=SPLIT_HINT)
        elif ch == ")" and stack:
            calls -= stack.pop()


_NESTING_CHARS = re.compile(r"[()'\"]")

# ---- resolved kvspec rules, printed directly ------------------------------------
#
# A cell's own rule prints as written, without passing through SymPy: it may
# hold text (`"GQA"`, `&`) and compares text (`engine == "vllm"`), which
# SymPy cannot express, and printing as written keeps the formula readable
# next to the spec.  Excel binds a leading minus tighter than `^`, so a
# negative operand is always parenthesized.

_R_CMP, _R_CONCAT, _R_ADD, _R_MUL, _R_POW, _R_ATOM = range(6)
_R_NEG = -1  # text that starts with a unary minus
_RULE_BINDS = {CALL: _R_ATOM, NEGATIVE: _R_NEG, COMPARISON: _R_CMP}  # how a function's Excel form binds


class RulePrinter(ExprVisitor):
    """Prints a resolved kvspec expression as Excel formula text; `name` gives each CellRef's text.

    Each method gives the text and how it binds (`_R_ATOM`, `_R_NEG`, ...).
    """

    _number_texts: dict = {}  # Fraction -> (text, precedence), shared by every RulePrinter

    def __init__(self, name):
        self.name = name

    def doprint(self, expr) -> str:
        text = self.visit(expr)[0]
        check_limits(text)
        return text

    def _number(self, value) -> tuple[str, int]:
        printed = self._number_texts.get(value)
        if printed is None:
            text, prec = number_text(Fraction(value))
            printed = text, (_R_NEG if text.startswith("-") else _R_MUL if prec == MUL else _R_POW if prec == POW else _R_ATOM)
            self._number_texts[value] = printed
        return printed

    def visit_CellRef(self, expr):
        text = str(self.name(expr))
        return (text if SIMPLE_NAME.fullmatch(text) or text.endswith(")") else f"({text})"), _R_ATOM

    def visit_Num(self, expr):
        return self._number(expr.value)

    def visit_Bool(self, expr):
        return ("TRUE" if expr.value else "FALSE"), _R_ATOM

    def visit_NoneValue(self, expr):
        return "NA()", _R_ATOM

    def visit_Str(self, expr):
        return excel_text_literal(expr.value), _R_ATOM

    def visit_Name(self, expr):
        raise ExportError(f"cannot write `{expr.dotted}` as an Excel formula: it was never resolved")

    def visit_Unary(self, expr):
        if expr.op == "not":
            return f"NOT({self.visit(expr.operand)[0]})", _R_ATOM
        return "-" + self._operand(expr.operand, lambda p: p < _R_ATOM), _R_NEG

    def visit_If(self, expr):
        parts = [self.visit(x)[0] for x in (expr.cond, expr.then, expr.otherwise)]
        return f"IF({', '.join(parts)})", _R_ATOM

    def visit_Call(self, expr):
        function = FUNCTIONS[expr.func]
        text = function.excel([self.visit(a)[0] for a in expr.args])
        return text, _RULE_BINDS[function.excel_binds]

    def visit_unknown(self, expr, *args):
        raise ExportError(f"cannot write `{expr}` as an Excel formula")

    def _operand(self, expr, needs) -> str:
        text, prec = self.visit(expr)
        return f"({text})" if prec == _R_NEG or needs(prec) else text

    def visit_Binary(self, expr) -> tuple[str, int]:
        op = expr.op
        if op in ("and", "or"):
            return f"{op.upper()}({self.visit(expr.left)[0]}, {self.visit(expr.right)[0]})", _R_ATOM
        if op in RELATIONAL_OPS:
            left = self._operand(expr.left, lambda p: p <= _R_CMP)
            right = self._operand(expr.right, lambda p: p <= _R_CMP)
            return f"{left}{RELATIONAL_OPS[op]}{right}", _R_CMP
        prec = {"&": _R_CONCAT, "+": _R_ADD, "-": _R_ADD, "*": _R_MUL, "/": _R_MUL, "^": _R_POW}[op]
        if op == "^":  # Excel's ^ is left-associative: parenthesize every operand that is not an atom
            left = self._operand(expr.left, lambda p: p < _R_ATOM)
            right = self._operand(expr.right, lambda p: p < _R_ATOM)
        else:
            left = self._operand(expr.left, lambda p: p < prec)
            right = self._operand(expr.right, lambda p: p <= prec)
        return f"{left}{op}{right}", prec
