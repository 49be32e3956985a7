"""Print SymPy expressions as Excel formula text.

Shaped like SymPy's own language printers (`sympy/printing/jscode.py`): a
`known_functions` table and one small `_print_X` method per kind of node.
Unlike them it is strict by construction: a node with no rule here raises
`ExportError`, so an expression either prints as a formula that computes the
same value or does not print at all.

An unbounded value (SymPy's `oo`) prints as UNBOUNDED, 1E+300, and a
rational number as `formula.number_text` prints it (the numbers, the limits
and the rules printed as written are in `formula.py`, without SymPy).

Only functions that every Excel since 2010 and LibreOffice know are used:
IF, MIN, MAX, INT, ABS, SQRT, AND, OR, NOT, PI.  Two Excel rules shape the
parentheses: unary minus binds tighter than `^` (`=-2^2` is 4) and `^` is
left-associative (`=2^3^2` is 64).  Excel also reads only 15 significant
digits of a number literal, so longer numbers are written as exact arithmetic.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Optional

from sympy import Basic, Integer, Or, Pow, S, piecewise_fold, sympify
from sympy.printing.codeprinter import CodePrinter

from kvdsl.errors import ExportError
from kvdsl.excel.formula import (ADD, ATOM, CMP, MAX_DIGITS, MUL, NEG, POW, RELATIONAL_OPS, SIMPLE_NAME, UNBOUNDED,
                                 check_limits, exact_double, number_text, to_float)
from kvdsl.functions import CALL, COMPARISON, NEGATIVE, by_sympy_head


def excel_formula(expr, names: Optional[dict] = None) -> str:
    """The Excel formula for `expr`, without the leading `=`.

    `names` maps a Symbol's name to the text to print for it (a defined name,
    a cell reference or a number).  Without `names` a symbol prints as its own
    name; with it, a symbol missing from `names` raises `ExportError`.
    """
    return ExcelPrinter({"names": names}).doprint(expr)


class ExcelPrinter(CodePrinter):
    """A printer from SymPy expressions to Excel formula text (no leading `=`).

    Settings: `names` (dict or None, see `excel_formula`) and `strict`
    (default True: a symbol missing from a given `names` raises).  Nodes
    without a rule always raise `ExportError`, whatever `strict` says.
    """

    printmethod = "_excel"
    language = "Excel"

    _default_settings = dict(CodePrinter._default_settings, names=None, strict=True,
                             inline=True, precision=17)

    def __init__(self, settings=None):
        super().__init__(settings or {})
        self.known_functions = {}  # every function is printed from kvdsl.functions, by `_print_Function`
        self.functions = by_sympy_head()

    # -- entry points -------------------------------------------------------

    def doprint(self, expr, assign_to=None):
        """The formula text for `expr`; raises `ExportError` if it has none."""
        if assign_to is not None:
            raise ExportError("an Excel formula cannot assign to a variable")
        text = self._print(sympify(expr))
        check_limits(text)
        return text

    def _print(self, expr, **kwargs):
        # Printer._print would fall back to the str printer's methods (`I`,
        # `oo`, `Integral(...)`), which are not Excel; dispatch only to the
        # rules defined on this class and its subclasses.
        if isinstance(expr, Basic) and hasattr(expr, self.printmethod) and not isinstance(expr, type):
            return getattr(expr, self.printmethod)(self, **kwargs)
        for cls in type(expr).__mro__:
            method = self._own_method("_print_" + cls.__name__)
            if method is not None:
                return method(expr, **kwargs)
        return self._print_not_supported(expr)

    def _own_method(self, name):
        for klass in type(self).__mro__:
            if klass is CodePrinter:
                return None
            if name in vars(klass):
                return getattr(self, name)
        return None

    def _print_not_supported(self, expr):
        raise ExportError(f"cannot write `{expr}` as an Excel formula "
                          f"({type(expr).__name__} has no Excel equivalent here)")

    # -- parentheses ----------------------------------------------------------

    def _prec(self, expr) -> int:
        """The Excel precedence of the text `_print(expr)` produces."""
        if expr.is_Relational:
            return CMP
        if expr.is_Number:
            return self._number(expr)[1]
        if expr.is_Add:
            return ADD
        if _has_minus(expr):
            return NEG
        function = self.functions.get(type(expr).__name__)
        if function is not None:
            return {CALL: ATOM, NEGATIVE: NEG, COMPARISON: CMP}[function.excel_binds]
        if expr.is_Mul:
            return MUL
        if expr.is_Pow:
            if expr.exp == S.Half:
                return ATOM
            return MUL if expr.exp.is_Rational and expr.exp.is_negative else POW
        return ATOM

    def _paren(self, expr, needs) -> str:
        """Print `expr`, in parentheses when `needs(precedence)` is true."""
        text = self._print(expr)
        return f"({text})" if needs(self._prec(expr)) else text

    def _call(self, name, args) -> str:
        return f"{name}({', '.join(self._print(a) for a in args)})"

    # -- atoms ----------------------------------------------------------------

    def _print_Symbol(self, expr):
        names = self._settings["names"]
        if names is None or (expr.name not in names and not self._settings["strict"]):
            return expr.name
        if expr.name not in names:
            raise ExportError(f"no Excel name for `{expr.name}`")
        text = str(names[expr.name])
        return text if SIMPLE_NAME.fullmatch(text) else f"({text})"

    def _print_Integer(self, expr):
        return self._number(expr)[0]

    _print_Rational = _print_Float = _print_Infinity = _print_Integer

    def _number(self, expr) -> tuple[str, int]:
        """Text and precedence of a number that Excel reads as the same double."""
        if expr is S.Infinity:
            return UNBOUNDED, ATOM
        if expr.is_Rational:
            return number_text(Fraction(int(expr.p), int(expr.q)))
        if expr.is_negative:
            text, prec = self._number(-expr)
            return "-" + (text if prec in (ATOM, MUL) else f"({text})"), NEG
        if expr.is_Float:
            d = to_float(expr)
            text = repr(d).replace("e", "E")
            digits = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0")
            return (text, ATOM) if len(digits) <= MAX_DIGITS else exact_double(d)
        return self._print_not_supported(expr), ATOM

    def _print_Pi(self, expr):
        return "PI()"

    def _print_NumberSymbol(self, expr):
        return self._print(expr.evalf(17))

    def _print_BooleanTrue(self, expr):
        return "TRUE"

    def _print_BooleanFalse(self, expr):
        return "FALSE"

    # -- arithmetic -----------------------------------------------------------

    def _print_Add(self, expr):
        terms = self._as_ordered_terms(expr, order=None)
        out = self._paren(terms[0], lambda p: p < NEG)
        for term in terms[1:]:
            if _has_minus(term):
                out += "-" + self._paren(-term, lambda p: p <= ADD)
            else:
                out += "+" + self._paren(term, lambda p: p <= ADD)
        return out

    def _print_Mul(self, expr):
        coeff, rest = expr.as_coeff_Mul()
        sign = "-" if coeff.is_negative else ""
        coeff = abs(coeff)
        num, den = [], []
        if coeff.is_Rational:
            num += [Integer(coeff.p)] if coeff.p != 1 else []
            den += [Integer(coeff.q)] if coeff.q != 1 else []
        elif coeff != 1:
            num.append(coeff)
        for factor in rest.as_ordered_factors():
            if factor.is_Pow and factor.exp.is_Rational and factor.exp.is_negative:
                den.append(Pow(factor.base, -factor.exp))
            elif factor != 1:
                num.append(factor)
        num = num or [S.One]
        # A signed first factor must be an atom: `-x^2` would mean `(-x)^2`.
        first = (lambda p: p < ATOM) if sign else (lambda p: p < MUL)
        parts = [self._paren(num[0], first)]
        parts += [self._paren(f, lambda p: p <= MUL) for f in num[1:]]
        text = sign + "*".join(parts)
        if len(den) == 1:
            text += "/" + self._paren(den[0], lambda p: p <= MUL)
        elif den:
            text += "/(" + "*".join(self._paren(f, lambda p: p <= MUL) for f in den) + ")"
        return text

    def _print_Pow(self, expr):
        base, exp = expr.base, expr.exp
        if exp == S.Half:
            return self._call("SQRT", [base])
        if exp.is_Rational and exp.is_negative:
            return "1/" + self._paren(Pow(base, -exp), lambda p: p <= MUL)
        # Parenthesize every non-atom: a negative base, a negated or nested power.
        return self._paren(base, lambda p: p < ATOM) + "^" + self._paren(exp, lambda p: p < ATOM)

    # -- functions ------------------------------------------------------------

    def _print_Function(self, expr):
        """A function of kvdsl.functions, in the Excel form it states there.

        Other functions SymPy makes while solving (`Mod`) are rewritten by
        CodePrinter into ones that have a form (`x - y*floor(x/y)`), or refused.
        """
        function = self.functions.get(type(expr).__name__)
        if function is None:
            return super()._print_Function(expr)
        args = _flatten(expr) if function.variadic else expr.args
        return function.excel([self._print(a) for a in args])

    _print_Min = _print_Max = _print_Function

    def _can_print(self, name):
        return name in self.functions or super()._can_print(name)

    def _print_Piecewise(self, expr):
        pairs = _total_pairs(expr)
        text = self._print(pairs[-1][0])
        for value, cond in reversed(pairs[:-1]):
            text = f"IF({self._print(cond)}, {self._print(value)}, {text})"
        return text

    # -- logic ----------------------------------------------------------------

    def _print_Relational(self, expr):
        op = RELATIONAL_OPS.get(expr.rel_op)
        if op is None:
            return self._print_not_supported(expr)
        lhs = self._paren(expr.lhs, lambda p: p <= CMP)
        rhs = self._paren(expr.rhs, lambda p: p <= CMP)
        return f"{lhs}{op}{rhs}"

    def _print_And(self, expr):
        return self._call("AND", expr.args)

    def _print_Or(self, expr):
        return self._call("OR", expr.args)

    def _print_Not(self, expr):
        return self._call("NOT", expr.args)

    def _print_ITE(self, expr):
        # IF, not AND/OR: Excel evaluates every argument of AND and OR, so a
        # branch that divides by zero where it is not taken would spoil them.
        return self._call("IF", expr.args)

    def _print_BooleanFunction(self, expr):
        # Xor, Implies, ...: Excel 2010 lacks XOR, so use AND/OR/NOT.
        return self._print(expr.to_nnf())


def _has_minus(expr) -> bool:
    """Whether `expr` prints with a leading minus sign (a negative coefficient)."""
    if expr.is_Number:
        return bool(expr.is_negative)
    return expr.is_Mul and bool(expr.as_coeff_Mul()[0].is_negative)


def _flatten(expr) -> list:
    """The arguments of a Min or Max with nested Mins (Maxes) spliced in."""
    out = []
    for arg in expr.args:
        out += _flatten(arg) if arg.func is expr.func else [arg]
    return out


def _total_pairs(expr) -> list:
    """The (value, condition) pairs of a Piecewise whose last branch is a default.

    A Piecewise without `(value, True)` last is accepted when its conditions
    together cover every case; the last branch then serves as the default.
    """
    pairs = [tuple(p) for p in expr.args]
    if pairs[-1][1] != S.true:
        folded = piecewise_fold(expr)
        if getattr(folded, "is_Piecewise", False) and folded.args[-1].cond == S.true:
            return [tuple(p) for p in folded.args]
        if Or(*(c for _, c in pairs)).simplify() != S.true:
            raise ExportError(f"`{expr}` has no value when no condition holds",
                              hint="add a default (otherwise) branch")
    return pairs
