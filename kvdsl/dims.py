"""Resolver pass 3: the dimension of every cell (bytes, tokens/s, a condition,
text), mixed dimensions refused, cycles found, and the cells put in dependency
order.
"""

from __future__ import annotations

import dataclasses
import re

from . import model as m
from .errors import CycleError, DimensionError, UnknownNameError, did_you_mean
from .functions import FUNCTIONS, MixedDimensions
from .names import ERROR, REF, TEXT
from .program import CellRef, Form, Key, ResolvedCell, walk_refs
from .units import BOOL, NUMBER, Dim
from .visitor import ExprVisitor


class _Zero:
    """The dimension of a bare `0`, which matches any other."""


ZERO = _Zero()


class DimensionChecker:
    """Dimension inference over the resolver's resolved cells."""

    def dim_of(self, key: Key):
        if key in self._dims:
            return self._dims[key]
        if key in self._on_stack:
            cycle = self._stack[self._stack.index(key) :]
            if frozenset(cycle) not in self._cycles:
                self._cycles.add(frozenset(cycle))
                names = " -> ".join(f"{b}.{c}" for b, c in cycle + [key])
                first = self.cells[cycle[0]]
                self.errors.append(CycleError(f"cells depend on each other in a cycle: {names}", first.cell.name_span))
            return ERROR
        rc = self.cells[key]
        if key in self._kept:
            return self._kept_dim(rc)
        self._stack.append(key)
        self._on_stack.add(key)
        try:
            dim = self._cell_dim(rc)
        finally:
            self._stack.pop()
            self._on_stack.discard(key)
        self._dims[key] = dim
        rc.dim = dim
        self.order.append(key)
        return dim

    def _kept_dim(self, rc: ResolvedCell):
        """A cell taken as it was from the program built before (`graph.rebuild`): its dimension is known,
        and the cells it reads are visited first, as `_infer_shared` visits them, so the order is the same."""
        dims = self._dims
        for key in self.reads.get(rc.key, ()):
            if key not in dims:
                self.dim_of(key)
        self._dims[rc.key] = rc.dim
        self.order.append(rc.key)
        return rc.dim

    def _cell_dim(self, rc: ResolvedCell):
        if rc.dim is ERROR:
            return ERROR
        if rc.form in (Form.TEXT, Form.REF):
            return TEXT if rc.form == Form.TEXT else REF
        if rc.form == Form.UNKNOWN:
            inherited = self.inherited_dim(rc)
            return inherited if isinstance(inherited, Dim) or inherited == BOOL else NUMBER
        inherited = self.inherited_dim(rc) if rc.form != Form.REQUIRE else None
        if rc.form == Form.INPUT and isinstance(rc.expr, m.Num) and rc.expr.bare:
            if isinstance(inherited, Dim) and not inherited.dimensionless:
                rc.expr = dataclasses.replace(rc.expr, dim=inherited, bare=False)
        dim = self._infer_shared(rc) if rc.form in (Form.RULE, Form.REQUIRE) else self._infer(rc.expr)
        dim = NUMBER if dim is ZERO else dim
        if rc.form == Form.REQUIRE:
            if dim not in (BOOL, ERROR):
                self.errors.append(DimensionError(f"`require` needs a condition, not {describe(dim)}", rc.cell.expr.span))
            return dim
        if dim is not ERROR and inherited is not None and inherited != dim:
            where = rc.cell.expr.span if rc.cell.expr is not None else rc.cell.span
            self.errors.append(DimensionError(
                f"`{rc.local_name}` is {describe_one(inherited)}, but this is {describe_one(dim)}", where,
                hint=_count_hint(rc, inherited) or f"`{rc.local_name}` is defined at {rc.shadowed[0].span}"))
            return ERROR
        return dim

    def _infer_shared(self, rc: ResolvedCell):
        """`_infer` of a rule, done once for every cell made from the same
        source cell whose references have the same dimensions (a prelude rule
        in each deployment, an engine's rule in each deployment)."""
        dims, reads = [], []
        for ref in walk_refs(rc.expr):
            key = ref.key
            dim = self._dims[key] if key in self._dims else self.dim_of(key)
            if dim is ERROR:
                return self._infer(rc.expr)
            dims.append(dim)
            reads.append(key)
        self.reads[rc.key] = tuple(dict.fromkeys(reads))
        shared = self._shared_dims.get(id(rc.cell))
        if shared is None:  # the source cell is kept beside its results, so its id stays its own
            shared = self._shared_dims[id(rc.cell)] = (rc.cell, {})
        key = tuple(dims)
        found = shared[1].get(key)
        if found is not None:
            return found
        errors = len(self.errors)
        dim = self._infer(rc.expr)
        if dim is not ERROR and len(self.errors) == errors:
            shared[1][key] = dim
        return dim

    def _infer(self, e):
        return self.dim_rules.visit(e)


class DimensionRules(ExprVisitor):
    """The dimension of an expression (bytes, tokens/s, a condition, text), each mistake reported once.

    `checker` is the resolver: it gives the cells' dimensions and collects the errors.
    """

    def __init__(self, checker: DimensionChecker):
        self.checker = checker
        self.errors = checker.errors

    def visit_CellRef(self, e):
        dims = self.checker._dims
        dim = dims[e.key] if e.key in dims else self.checker.dim_of(e.key)
        return TEXT if dim == REF else dim

    def visit_Num(self, e):
        return ZERO if (e.bare and e.value == 0) else e.dim

    def visit_Bool(self, e):
        return BOOL

    def visit_NoneValue(self, e):
        return ZERO  # no value: it takes the dimension of what it stands beside

    def visit_Str(self, e):
        return TEXT

    def visit_Name(self, e):
        return ERROR

    def visit_Unary(self, e):
        inner = self.visit(e.operand)
        want = BOOL if e.op == "not" else "number"
        return self._expect(inner, want, e.operand, e.op)

    def visit_If(self, e):
        self._expect(self.visit(e.cond), BOOL, e.cond, "if")
        return self._same([e.then, e.otherwise], e.span, "the two branches of `if`")

    def _expect(self, dim, want, expr, op: str):
        if dim is ERROR:
            return ERROR
        if want == BOOL and dim != BOOL:
            if not self._blamed([expr], "a condition (true or false)", expr.span):
                self.errors.append(DimensionError(f"`{op}` needs a condition (true or false), not {describe(dim)}", expr.span))
            return ERROR
        if want == "number" and dim in (BOOL, TEXT):
            if not self._blamed([expr], "a number", expr.span):
                self.errors.append(DimensionError(f"`{op}` needs a number, not {'a condition' if dim == BOOL else 'text'}", expr.span))
            return ERROR
        return dim

    def _blamed(self, exprs, wanted: str, where) -> bool:
        """True when a prelude rule meets a value of the wrong kind that a user's cell gives it: the
        mistake is reported once, at the user's cell, not at every rule of the prelude that reads it."""
        if not where.path.startswith(PRELUDE_SHOWN):
            return False
        for expr in exprs:
            key = self._copied_from(expr.key) if isinstance(expr, CellRef) else None
            rc = self.checker.cells.get(key) if key is not None else None
            if rc is None or not rc.shadowed or rc.cell.span.path.startswith(PRELUDE_SHOWN):
                continue
            if key not in self.checker.blamed:
                self.checker.blamed.add(key)
                target = self.checker.blocks.get(rc.ref_target) if rc.ref_target else None
                self.errors.append(misread(rc, self.checker._dims.get(key), wanted, where, target.kind if target else None))
            return True
        return False

    def _copied_from(self, key):
        """The cell whose value `key` holds: itself, or through rules that copy another cell (`n_seq = batch`)."""
        for _ in range(50):
            rc = self.checker.cells[key]
            if rc.form != Form.RULE or not isinstance(rc.expr, CellRef) or rc.expr.key == key:
                return key
            key = rc.expr.key
        return key

    def _same(self, exprs, span, what: str):
        dims = [self.visit(x) for x in exprs]
        if any(d is ERROR for d in dims):
            return ERROR
        real = [d for d in dims if d is not ZERO]
        if not real:
            return ZERO
        if any(d != real[0] for d in real):
            odd = [x for x, d in zip(exprs, dims) if d in (TEXT, BOOL)]
            wanted = " or ".join(dict.fromkeys(describe(d) for d in real if d not in (TEXT, BOOL))) or "a number"
            if odd and self._blamed(odd, wanted, span):
                return ERROR
            described = " and ".join(dict.fromkeys(describe(d) for d in real))
            self.errors.append(DimensionError(f"{what} mix {described}", span))
            return ERROR
        return real[0]

    def visit_Binary(self, e: m.Binary):
        op = e.op
        if op in ("and", "or"):
            left = self._expect(self.visit(e.left), BOOL, e.left, op)
            right = self._expect(self.visit(e.right), BOOL, e.right, op)
            return ERROR if ERROR in (left, right) else BOOL
        if op == "&":
            sides = [self.visit(e.left), self.visit(e.right)]
            if ERROR in sides:
                return ERROR
            for side, expr in zip(sides, (e.left, e.right)):
                if side == BOOL:
                    self.errors.append(DimensionError("`&` joins text and numbers, not conditions", expr.span))
                    return ERROR
            return TEXT
        if op in ("+", "-"):
            word = "adds" if op == "+" else "subtracts"
            dim = self._same([e.left, e.right], e.span, f"`{op}` {word} values that")
            if dim in (BOOL, TEXT):
                if not self._blamed([e.left, e.right], "a number", e.span):
                    self.errors.append(DimensionError(f"`{op}` needs numbers, not {describe(dim)}", e.span,
                                                      hint="join text with `&`" if dim == TEXT else None))
                return ERROR
            return dim
        if op in ("<", "<=", ">", ">=", "==", "!="):
            dim = self._same([e.left, e.right], e.span, "the comparison's two sides")
            if dim in (BOOL, TEXT) and op not in ("==", "!=") and not self._blamed([e.left, e.right], "a number", e.span):
                self.errors.append(DimensionError(f"`{op}` compares numbers, not {describe(dim)}", e.span))
            return ERROR if dim is ERROR else BOOL
        left = self._expect(self.visit(e.left), "number", e.left, op)
        right = self._expect(self.visit(e.right), "number", e.right, op)
        if ERROR in (left, right):
            return ERROR
        left = NUMBER if left is ZERO else left
        right = NUMBER if right is ZERO else right
        if op == "*":
            return left * right
        if op == "/":
            return left / right
        # ^
        if not right.dimensionless:
            self.errors.append(DimensionError(f"an exponent must be a plain number, not {describe(right)}", e.right.span))
            return ERROR
        if left.dimensionless:
            return NUMBER
        if isinstance(e.right, m.Num) and e.right.value.denominator == 1:
            return left ** int(e.right.value)
        self.errors.append(DimensionError(f"{describe(left)} can only be raised to a whole number written out", e.right.span))
        return ERROR

    def visit_Call(self, e: m.Call):
        function = FUNCTIONS.get(e.func)
        if function is None:
            self.errors.append(unknown_function(e))
            return ERROR
        if not function.accepts(len(e.args)):
            self.errors.append(DimensionError(f"`{e.func}` takes {function.arity_text()}, not {len(e.args)}", e.span))
            return ERROR
        dims = [self.visit(a) for a in e.args]
        if ERROR in dims:
            return ERROR
        kinds = [d for d in dims if d in (BOOL, TEXT)]
        if kinds and len(set(kinds)) == 1 and len(kinds) == len([d for d in dims if d is not ZERO]):
            if not self._blamed(e.args, "a number", e.span):
                self.errors.append(DimensionError(f"`{e.func}` needs numbers, not {describe(kinds[0])}", e.span))
            return ERROR
        try:
            if kinds:
                raise MixedDimensions([d for d in dims if d is not ZERO])
            result = function.dims([None if d is ZERO else d for d in dims])
        except MixedDimensions as mixed:
            odd = [a for a, d in zip(e.args, dims) if d in (TEXT, BOOL)]
            wanted = " or ".join(dict.fromkeys(describe(d) for d in mixed.dims if d not in (TEXT, BOOL))) or "a number"
            if odd and self._blamed(odd, wanted, e.span):
                return ERROR
            described = " and ".join(dict.fromkeys(describe(d) for d in mixed.dims))
            self.errors.append(DimensionError(f"the arguments of `{e.func}` mix {described}", e.span))
            return ERROR
        return ZERO if result is None else result


def unknown_function(call: m.Call, defined=()) -> UnknownNameError:
    """The error for a call of a function that is neither built in nor defined with `fn`."""
    known = list(FUNCTIONS) + list(defined)
    return UnknownNameError(f"unknown function `{call.func}`", call.func_span,
                            hint=did_you_mean(call.func, known) or "functions: " + ", ".join(FUNCTIONS)
                            + (" (and those a spec defines with `fn`)" if defined else ""))


PRELUDE_SHOWN = "kvdsl/prelude/"  # how a prelude file's path shows in a span


def misread(rc: ResolvedCell, dim, wanted: str, where, kind_named=None) -> DimensionError:
    """A user's cell whose value the prelude cannot read (`context = "32K"`), at the user's own line."""
    at = rc.cell.expr.span if rc.cell.expr is not None else rc.cell.span
    kind = "text" if dim in (TEXT, REF) else describe_one(dim)
    if kind_named:
        kind = f"the {kind_named} `{rc.ref_target}`"
    hint = f"the prelude reads `{rc.local_name}` as {wanted} (at {where})"
    written = rc.cell.text if rc.cell.form == "text" else None
    if written is not None and re.fullmatch(r"\s*[\d_.]+(?:[eE][+-]?\d+)?\s*[A-Za-z%/]*\s*", written):
        hint += f"; a number is written without quotes: `{rc.local_name} = {written.strip()}`"
    verb = "names" if kind_named else "is"
    return DimensionError(f"`{rc.local_name}` {verb} {kind}, but it must be {wanted}", at, hint=hint)


def describe_one(dim) -> str:
    """A dimension as the kind of one value: a condition, text, tokens."""
    return "a condition (true or false)" if dim == BOOL else describe(dim)


def describe(dim) -> str:
    if dim is ZERO:  # a bare 0: a number of any dimension
        return "a number"
    if dim == BOOL:
        return "conditions"
    if dim == TEXT:
        return "text"
    return str(dim)


_COUNT_SCALES = {"K": ("thousand", "e3"), "M": ("million", "e6"), "B": ("billion", "e9")}


def _count_hint(rc: ResolvedCell, inherited) -> str | None:
    """`params = 7B` in a plain-number cell: `B` is bytes, so say how a count in billions is written."""
    if inherited != NUMBER or rc.form != Form.INPUT or not isinstance(rc.expr, m.Num) or not rc.cell.source:
        return None
    found = re.fullmatch(r"\s*([\d_]*\.?\d+)\s*([KMB])\s*", rc.cell.source.split("=", 1)[-1].split("#")[0])
    if not found:
        return None
    number, suffix = found.groups()
    word, exponent = _COUNT_SCALES[suffix]
    unit = "bytes" if suffix == "B" else "tokens"
    return f"`{suffix}` means {unit} here; {number} {word} is written `{number}{exponent}`"
