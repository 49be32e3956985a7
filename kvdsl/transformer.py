"""Parse tree -> spec model.  The only code that knows the grammar's rule names."""

from __future__ import annotations

import re
from fractions import Fraction

from lark import Token, Transformer, Tree, v_args
from lark.exceptions import VisitError

from . import model as m
from .errors import DuplicateError, InvalidValueError, KvdslError, Span, UnknownNameError, did_you_mean, raise_all, split_lines
from .units import DECLARED_DIMS, NUMBER, SUFFIXES, TOKENS, parse_unit

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


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


class SpecTransformer(Transformer):
    """Builds the spec model for one file; `lines` lets cells keep their text."""

    def __init__(self, path: str, text: str):
        super().__init__()
        self.errors: list[KvdslError] = []
        self.path = path
        self.lines = split_lines(text)

    # -- spans --

    def _span(self, meta) -> Span:
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tspan(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def _text(self, span: Span) -> str:
        if span.line == span.end_line:
            return self.lines[span.line - 1][span.column - 1 : span.end_column - 1]
        parts = [self.lines[span.line - 1][span.column - 1 :]]
        parts += self.lines[span.line : span.end_line - 1]
        parts.append(self.lines[span.end_line - 1][: span.end_column - 1])
        return "\n".join(parts)

    # -- file structure --

    def start(self, items):
        return m.SpecFile(self.path, tuple(items))

    @v_args(meta=True)
    def fn_def(self, meta, children):
        name, *params, body = children
        span = self._span(meta)
        seen = {}
        for tok in params:
            if str(tok) in seen:
                self.errors.append(DuplicateError(f"`{name}` has two parameters named `{tok}`", self._tspan(tok)))
            seen[str(tok)] = tok
        calls, _ = _scan(body)
        return m.FnDef(str(name), tuple(str(p) for p in params), body, span, self._tspan(name),
                       tuple(self._tspan(p) for p in params), source=self._text(span), doc=self._doc(span), calls=calls)

    @v_args(meta=True)
    def import_stmt(self, meta, children):
        return m.Import(_unquote(children[0]), self._span(meta))

    def _kind(self, tok: Token) -> str:
        if str(tok) not in m.BLOCK_KINDS:
            self.errors.append(UnknownNameError(
                f"unknown block kind `{tok}`",
                self._tspan(tok),
                hint=did_you_mean(str(tok), m.BLOCK_KINDS) or "blocks are " + ", ".join(m.BLOCK_KINDS),
            ))
        return str(tok)

    @v_args(meta=True)
    def block(self, meta, children):
        kind, name, title, *rest = children
        extends = None
        if rest and isinstance(rest[0], tuple):
            extends = rest.pop(0)
        return m.Block(
            kind=self._kind(kind),
            name=str(name),
            title=_unquote(title),
            cells=tuple(rest),
            span=self._span(meta),
            name_span=self._tspan(name),
            kind_span=self._tspan(kind),
            extends=str(extends[0]) if extends else None,
            extends_span=extends[1] if extends else None,
        )

    def extends(self, children):
        return (str(children[0]), self._tspan(children[0]))

    @v_args(meta=True)
    def defaults(self, meta, children):
        kinds = [c for c in children if isinstance(c, Token)]
        cells = [c for c in children if not isinstance(c, Token)]
        return m.Defaults(tuple(self._kind(k) for k in kinds), tuple(cells), self._span(meta),
                          tuple(self._tspan(k) for k in kinds))

    # -- cells --

    def _cell(self, meta, children: list, form: str, **kw) -> m.Cell:
        """A cell from `[let] name = ...`: children start with the optional LET and the name."""
        new = isinstance(children[0], Token) and children[0].type == "LET"
        if new:
            children = children[1:]
        name, name_span = children[0]
        span = self._span(meta)
        label, description = self._label(span)
        expr = kw.get("expr")
        if expr is not None:
            kw["calls"], kw["surface"] = _scan(expr)
        return m.Cell(name, form, span, name_span, source=self._text(span), new=new, doc=self._doc(span),
                      label=label, description=description, **kw)

    def cell_name(self, children):
        first, last = children[0], children[-1]
        parts = [str(c) for c in children if c.type == "NAME"]
        name = ".".join(parts)
        end_column = last.end_column
        if last.type == "NUMBER":  # `stage_start[3] = ...`: one member of a family
            digits = str(last)
            if not digits.isdigit():
                self.errors.append(InvalidValueError(
                    f"a member of a family is numbered with a whole number, not `{digits}`", self._tspan(last)))
                digits = "0"
            name, end_column = m.member_name(name, int(digits)), end_column + 1
        span = Span(self.path, first.line, first.column, last.end_line, end_column)
        return name, span

    def family_name(self, children):
        *names, var, bounds = children
        first = names[0]
        span = Span(self.path, first.line, first.column, names[-1].end_line, names[-1].end_column)
        low, high = bounds
        family = m.Family(str(var), low, high, Span(self.path, low.span.line, low.span.column, high.span.end_line,
                                                   high.span.end_column), self._tspan(var))
        return ".".join(str(n) for n in names), span, family

    def range(self, children):
        return tuple(children)

    @v_args(meta=True)
    def family(self, meta, children):
        new = isinstance(children[0], Token) and children[0].type == "LET"
        name, name_span, family = children[1 if new else 0]
        expr = children[-1]
        head = [children[0]] if new else []
        if isinstance(expr, m.Str):
            return self._cell(meta, head + [(name, name_span)], "text", text=expr.value, expr=expr, family=family)
        return self._cell(meta, head + [(name, name_span)], "rule", expr=expr, family=family)

    def _doc(self, span: Span) -> str:
        """The comment beside a cell, else the comment lines right above it."""
        line = self.lines[span.end_line - 1] if span.end_line <= len(self.lines) else ""
        after = line[span.end_column - 1 :]
        if after.lstrip().startswith("#"):
            return after.lstrip()[1:].strip()
        return " ".join(text for text in self._comments_above(span) if not text.startswith("#"))

    def _comments_above(self, span: Span) -> list:
        """The comment lines right above a cell, without their first `#`."""
        above = []
        for number in range(span.line - 2, -1, -1):
            text = self.lines[number].strip()
            if not text.startswith("#") or text.startswith("# ----"):
                break
            above.insert(0, text[1:].strip())
        return above

    def _label(self, span: Span) -> tuple:
        """(label, description) from the `## Label: One sentence.` lines right above a cell."""
        text = " ".join(line[1:].strip() for line in self._comments_above(span) if line.startswith("#"))
        label, _, description = text.partition(": ")
        return label.strip(), description.strip()

    @v_args(meta=True)
    def rule(self, meta, children):
        expr = children[-1]
        if isinstance(expr, m.Str):
            return self._cell(meta, children, "text", text=expr.value, expr=expr)
        return self._cell(meta, children, "rule", expr=expr)

    @v_args(meta=True)
    def unknown(self, meta, children):
        return self._cell(meta, children, "unknown")

    @v_args(meta=True)
    def pattern_cell(self, meta, children):
        layers = children[-1]
        if len(layers) > MAX_PATTERN_LAYERS:
            raise InvalidValueError(f"the pattern has {len(layers):,} layers, more than {MAX_PATTERN_LAYERS:,}", self._span(meta))
        return self._cell(meta, children, "pattern", layers=tuple(layers))

    @v_args(meta=True)
    def require(self, meta, children):
        span = self._span(meta)
        name = f"{m.REQUIRE} {span.path}:{span.line}:{span.column}"
        calls, surface = _scan(children[0])
        return m.Cell(name, "require", span, span, expr=children[0], source=self._text(span), calls=calls, surface=surface)

    @v_args(meta=True)
    def declare(self, meta, children):
        declared = "/".join(str(c) for c in children[1:])
        span = Span(self.path, children[1].line, children[1].column, children[-1].end_line, children[-1].end_column)
        if declared not in DECLARED_DIMS and declared not in m.BLOCK_KINDS:
            raise UnknownNameError(f"unknown dimension `{declared}`", span, hint=did_you_mean(declared, list(DECLARED_DIMS) + list(m.BLOCK_KINDS)))
        return self._cell(meta, [(str(children[0]), self._tspan(children[0]))], "declare", declared=declared, declared_span=span)

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
        return m.Str(_unquote(children[0]), self._span(meta))

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


def _scan(expr) -> tuple:
    """(the functions an expression calls, whether it has a `for` or an indexed name)."""
    calls, surface, stack = set(), False, [expr]
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is m.Call:
            calls.add(node.func)
        elif cls is m.For:
            surface = True
        elif cls is m.Name and node.index is not None:
            surface = True
            stack.append(node.index)
        if node._fields:
            stack.extend(node.children())
    return frozenset(calls), surface


BALANCE_AT = 32  # chains of more terms are rebuilt as balanced trees
_ADDITIVE, _MULTIPLICATIVE = frozenset("+-"), frozenset("*/")


def balance_chains(tree) -> None:
    """Regroup long chains of one associative operator (`a + b - c + ...`) into balanced trees.

    The grammar reads `a + b + c` as `(a + b) + c`: a sum of 10,000 terms
    would nest 10,000 levels deep, deeper than any recursive walk may go.
    Exact arithmetic gives the same value in any grouping, so a chain of more
    than BALANCE_AT terms becomes a tree about log2(n) levels deep: a sum is
    split anywhere (the signs after a `-` it is split at are flipped), a
    product only at a `*`, a chain of `&`, `and` or `or` anywhere.  Shorter
    chains keep the shape they are written in.  Works in place, without
    recursion.
    """
    stack = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, Tree):
            continue
        kind = _chain_kind(node)
        terms, ops = _chain(node, kind) if kind else ([], [])
        if len(terms) > BALANCE_AT:
            rebuilt = _balanced(node.data, kind, terms, ops, 0, len(terms), False)
            if isinstance(rebuilt, Tree):
                node.children = rebuilt.children  # the whole chain: its place is unchanged
        stack.extend(terms if terms else node.children)


def _chain_kind(node):
    """What chain `node` heads: the operators a sum or product joins, or its tree name; None if none."""
    if not isinstance(node, Tree):
        return None
    if node.data == "binary" and len(node.children) == 3:
        op = str(node.children[1])
        return _ADDITIVE if op in _ADDITIVE else _MULTIPLICATIVE if op in _MULTIPLICATIVE else None
    if node.data in ("concat", "and_op", "or_op") and len(node.children) == 2:
        return node.data
    return None


def _chain(node, kind) -> tuple[list, list]:
    """The terms of the left-leaning chain under `node`, and the operator token before each (None first)."""
    terms, ops = [], []
    while _chain_kind(node) == kind and node.data == ("binary" if isinstance(kind, frozenset) else kind):
        terms.append(node.children[-1])
        ops.append(node.children[1] if len(node.children) == 3 else None)
        node = node.children[0]
    terms.append(node)
    ops.append(None)
    return terms[::-1], ops[::-1]


def _balanced(data, kind, terms: list, ops: list, lo: int, hi: int, flip: bool):
    """The tree of terms[lo:hi] joined by ops[lo+1:hi]; `flip` reads each `+` as `-` and back."""
    if hi - lo == 1:
        return terms[lo]
    mid = (lo + hi) // 2
    if kind is _MULTIPLICATIVE:
        mid = _split_at_times(ops, lo, hi)
        if mid is None:  # only divisions: `a / b / c` cannot be regrouped without changing where zero fails
            return _left_deep(data, terms, ops, lo, hi)
    left = _balanced(data, kind, terms, ops, lo, mid, flip)
    op = _flipped(ops[mid], flip)
    right = _balanced(data, kind, terms, ops, mid, hi, flip != (op is not None and str(op) == "-"))
    children = [left, right] if op is None else [left, op, right]
    return Tree(data, children, _meta(left, right))


def _split_at_times(ops: list, lo: int, hi: int):
    """The index of the `*` nearest the middle of ops[lo+1:hi], or None."""
    mid = (lo + hi) // 2
    for distance in range(hi - lo):
        for i in (mid - distance, mid + distance):
            if lo < i < hi and str(ops[i]) == "*":
                return i
    return None


def _left_deep(data, terms, ops, lo, hi):
    tree = terms[lo]
    for i in range(lo + 1, hi):
        tree = Tree(data, [tree, ops[i], terms[i]], _meta(tree, terms[i]))
    return tree


def _flipped(op, flip: bool):
    if op is None or not flip or str(op) not in _ADDITIVE:
        return op
    return op.update(value="-" if str(op) == "+" else "+")


def _meta(left, right):
    """Where a regrouped part of a chain is: from its first term's start to its last term's end."""
    from lark.tree import Meta

    first, last = getattr(left, "meta", left), getattr(right, "meta", right)
    meta = Meta()
    meta.empty = False
    meta.line, meta.column, meta.start_pos = first.line, first.column, first.start_pos
    meta.end_line, meta.end_column, meta.end_pos = last.end_line, last.end_column, last.end_pos
    return meta


def transform(tree, path: str, text: str) -> m.SpecFile:
    """Turn a Lark tree into a SpecFile, unwrapping errors raised while visiting."""
    balance_chains(tree)
    transformer = SpecTransformer(path, text)
    try:
        result = transformer.transform(tree)
    except VisitError as exc:  # Lark wraps what a transformer raises
        if isinstance(exc.orig_exc, KvdslError):
            raise_all(transformer.errors + [exc.orig_exc])
        if isinstance(exc.orig_exc, RecursionError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, (ValueError, ArithmeticError)):  # a literal no rule above foresaw
            raise_all(transformer.errors + [_unreadable(exc, transformer)])
        raise
    raise_all(transformer.errors)
    return result


def _unreadable(exc: VisitError, transformer: SpecTransformer) -> InvalidValueError:
    meta = getattr(exc.obj, "meta", None)
    span = transformer._span(meta) if meta is not None and not getattr(meta, "empty", True) else None
    return InvalidValueError(f"cannot read this value: {exc.orig_exc}", span)
