"""Parse tree -> spec model.  The only code that knows the grammar's rule names.

This module holds the rules of files, blocks and cells; the rules of
expressions, literals and layer patterns are `ExpressionRules` in
transformer_expr.py, and long operator chains are regrouped first by
transformer_chains.py.
"""

from __future__ import annotations

from lark import Token, Transformer, v_args
from lark.exceptions import VisitError

from . import model as m
from .errors import (DuplicateError, InvalidValueError, KvdslError, Span, SpecSyntaxError, UnknownNameError, did_you_mean,
                     raise_all, split_lines)
from .transformer_chains import balance_chains
from .transformer_expr import MAX_PATTERN_LAYERS, ExpressionRules, unquote
from .units import DECLARED_DIMS


class SpecTransformer(ExpressionRules, Transformer):
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
        return m.Import(unquote(children[0]), self._span(meta))

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
            title=unquote(title),
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


def transform(tree, path: str, text: str) -> m.SpecFile:
    """Turn a Lark tree into a SpecFile, unwrapping errors raised while visiting."""
    balance_chains(tree)
    transformer = SpecTransformer(path, text)
    try:
        result = transformer.transform(tree)
    except RecursionError:
        raise _too_deep(tree, path) from None
    except VisitError as exc:  # Lark wraps what a transformer raises
        if isinstance(exc.orig_exc, KvdslError):
            raise_all(transformer.errors + [exc.orig_exc])
        if isinstance(exc.orig_exc, RecursionError):
            raise _too_deep(tree, path) from None
        if isinstance(exc.orig_exc, (ValueError, ArithmeticError)):  # a literal no rule above foresaw
            raise_all(transformer.errors + [_unreadable(exc, transformer)])
        raise
    raise_all(transformer.errors)
    return result


_STATEMENTS = frozenset({"start", "block", "extends", "defaults", "fn_def", "import_stmt", "rule", "family", "unknown",
                         "pattern_cell", "declare", "require", "cell_name", "family_name"})


def _too_deep(tree, path: str) -> SpecSyntaxError:
    """The error for an expression nested too deeply to read, at the expression that holds the deepest part.

    Found without recursion: a walk with an explicit stack, keeping each node's
    path from the root only as a parent link.
    """
    from lark import Tree

    deepest, depth_of, parent = tree, {id(tree): 0}, {id(tree): None}
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in node.children:
            if isinstance(child, Tree):
                depth_of[id(child)], parent[id(child)] = depth_of[id(node)] + 1, node
                if depth_of[id(child)] > depth_of[id(deepest)]:
                    deepest = child
                stack.append(child)
    chain = [deepest]
    while parent[id(chain[-1])] is not None:
        chain.append(parent[id(chain[-1])])
    outer = next((n for n in reversed(chain) if n.data not in _STATEMENTS and not n.meta.empty), deepest)
    meta = outer.meta
    return SpecSyntaxError(f"this expression nests too deeply to read ({depth_of[id(deepest)] - depth_of[id(outer)]:,} levels)",
                           Span(path, meta.line, meta.column, meta.end_line, meta.end_column),
                           hint="split it into cells of your own, each a few thousand levels deep at most")


def _unreadable(exc: VisitError, transformer: SpecTransformer) -> InvalidValueError:
    meta = getattr(exc.obj, "meta", None)
    span = transformer._span(meta) if meta is not None and not getattr(meta, "empty", True) else None
    return InvalidValueError(f"cannot read this value: {exc.orig_exc}", span)
