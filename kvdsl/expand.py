"""Resolver pass 1, first step: the text's shorthands expanded away.

- `fn name(a, b) = expr`: every call of `name` is replaced by its body, each
  parameter by the argument given (pure functions, inlined);
- `name[s in 1..8] = expr`: a family becomes the cells `name[1]` ... `name[8]`,
  each with `s` replaced by its number;
- `for s in 1..8: expr` among the arguments of `min`, `max` (any function of
  unbounded arity) becomes 8 arguments;
- `name[s - 1]`: the index of a member, known once `s` is, becomes part of the
  name (`name[2]`);
- inside a family, a `for` or a function's body, an `if` whose condition is
  known once the index, variable or arguments are substituted keeps only the
  branch it takes (so `if s == 1 then 0 else before[s - 1]` never names `before[0]`).

After this step every later pass (names, dimensions, evaluation, solving,
sweeps, both printers) sees plain cells and plain expressions.  Functions are
visible to every file loaded (the prelude's to every spec), like blocks.

Spans: an inlined body keeps the spans of the body, and the arguments those
of the call, so an error inside the body points at the body and one in an
argument at the call.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Optional

from . import model as m
from .dims import unknown_function
from .errors import CycleError, DimensionError, DuplicateError, InvalidValueError, KvdslError, UnknownNameError
from .evaluate import EvaluationError, Evaluator
from .functions import FUNCTIONS
from .units import NUMBER

MAX_MEMBERS = 1_000  # members of one family, and arguments one `for` gives
MAX_EXPANSION = 100_000  # operations one cell's rule may grow to once its functions are inlined


class _TooLarge(Exception):
    pass


class _Failed(Exception):
    """A mistake already recorded: the cell that holds it is left out of later checks."""


def expand_workspace(ws, only: Optional[set] = None, expanded=()):
    """A copy of the workspace whose blocks and defaults have plain cells only (see the module docstring).

    Errors join `ws.errors` in the copy; a cell that fails is kept, marked `broken`.  With `only`, the
    blocks of other names are left as written, and `expanded` holds (defaults as written, as expanded)
    pairs taken where the same defaults come again: a rebuild takes those as they were built (its
    functions are the same).
    """
    functions = FunctionTable(ws.functions)
    expander = Expander(functions)
    blocks = [(_with_cells(block, expander) if only is None or block.name in only else block, prelude)
              for block, prelude in ws.blocks]
    known = {id(written): (written, made) for written, made in expanded}
    defaults = [(known[id(d)][1] if id(d) in known and known[id(d)][0] is d else _with_cells(d, expander), prelude)
                for d, prelude in ws.defaults]
    return dataclasses.replace(ws, blocks=blocks, defaults=defaults,
                               errors=list(ws.errors) + functions.errors + expander.errors)


def _with_cells(holder, expander):
    cells = []
    changed = False
    for cell in holder.cells:
        out = expander.cell(cell)
        changed = changed or out != [cell]
        cells.extend(out)
    return dataclasses.replace(holder, cells=tuple(cells)) if changed else holder


class FunctionTable:
    """Every `fn` of a workspace by name, checked: no two of one name, none named like a
    built-in, bodies that read only their parameters, no function that calls itself."""

    def __init__(self, definitions):
        self.errors: list = []
        self.by_name: dict = {}
        for fn, _ in definitions:
            if fn.name in FUNCTIONS:
                self.errors.append(DuplicateError(f"`{fn.name}` is a built-in function: a `fn` cannot define it again",
                                                  fn.name_span, hint="choose another name"))
            elif fn.name in self.by_name:
                first = self.by_name[fn.name]
                self.errors.append(DuplicateError(f"function `{fn.name}` is defined twice", fn.name_span,
                                                  hint=f"first defined at {first.name_span}"))
            else:
                self.by_name[fn.name] = fn
        self.broken = set()
        for fn in self.by_name.values():
            before = len(self.errors)
            _check_body(fn, fn.body, set(fn.params), self.errors)
            if len(self.errors) > before:
                self.broken.add(fn.name)
        self._find_cycles()

    def get(self, name: str) -> Optional[m.FnDef]:
        return self.by_name.get(name)

    def _find_cycles(self) -> None:
        state: dict = {}  # name -> "busy" or "done"
        reported: set = set()
        for name in self.by_name:
            if name not in state:
                self._visit(name, [name], state, reported)

    def _visit(self, name: str, path: list, state: dict, reported: set) -> None:
        """Depth first from `name`, reporting each loop of calls once.

        A method, not a closure: a nested function that calls itself is a
        reference cycle, which only the cycle collector frees.
        """
        state[name] = "busy"
        for callee in sorted(self.by_name[name].calls):
            if callee not in self.by_name:
                continue
            if state.get(callee) == "busy":
                loop = path[path.index(callee):] + [callee]
                self.broken.update(loop)
                if frozenset(loop) not in reported:
                    reported.add(frozenset(loop))
                    fn = self.by_name[loop[0]]
                    self.errors.append(CycleError("functions call each other in a cycle: " + " -> ".join(loop),
                                                  fn.name_span, hint="a function is inlined where it is called, "
                                                  "so it cannot call itself"))
            elif callee not in state:
                self._visit(callee, path + [callee], state, reported)
        state[name] = "done"


def _check_body(fn: m.FnDef, expr, bound: set, errors: list) -> None:
    """A function's body reads only its parameters (and the variables of its own `for`s)."""
    stack = [(expr, bound)]
    while stack:
        node, names = stack.pop()
        cls = node.__class__
        if cls is m.Name:
            if node.index is not None or len(node.parts) > 1 or node.parts[0] not in names:
                params = ", ".join(fn.params) or "none"
                errors.append(UnknownNameError(
                    f"the body of `{fn.name}` reads `{node.dotted}{'[...]' if node.index is not None else ''}`, "
                    f"which is not one of its parameters ({params})", node.span,
                    hint="a function's body reads only its parameters: pass the value as an argument"))
            continue
        if cls is m.For:
            stack.extend([(node.low, names), (node.high, names), (node.body, names | {node.var})])
            continue
        if node._fields:
            stack.extend((child, names) for child in node.children())


class Expander:
    """Expands cells: families into members, calls of `fn`s into their bodies, `for` into arguments."""

    def __init__(self, functions: FunctionTable):
        self.functions = functions
        self.errors: list = []
        self.budget = 0

    # ---- cells ----------------------------------------------------------------

    def cell(self, cell: m.Cell) -> list:
        """The plain cells a written cell stands for: itself, or a family's members."""
        if cell.family is None and not cell.surface and cell.calls.issubset(FUNCTIONS):
            return [cell]
        self.budget = MAX_EXPANSION
        try:
            if cell.family is None:
                return [dataclasses.replace(cell, expr=self.rule(cell.expr, {}, cell))]
            return self.members(cell)
        except _Failed:
            return [dataclasses.replace(cell, family=None, broken=True)]

    def members(self, cell: m.Cell) -> list:
        family = cell.family
        low, high = self.bound(family.low, {}), self.bound(family.high, {})
        count = high - low + 1
        if count < 1:
            self._fail(InvalidValueError(f"`{cell.name}[{family.var} in {low}..{high}]` has no members: the first "
                                         "bound is above the last", family.span))
        if count > MAX_MEMBERS:
            self._fail(InvalidValueError(f"`{cell.name}` would have {count:,} members, more than {MAX_MEMBERS:,}",
                                         family.span))
        out = []
        for index in range(low, high + 1):
            expr = self.rule(cell.expr, {family.var: index}, cell)
            member = dataclasses.replace(cell, name=m.member_name(cell.name, index), expr=expr, family=None,
                                         surface=False, calls=frozenset(), member=(family.var, index))
            if cell.form == "text" and isinstance(expr, m.Str):
                member = dataclasses.replace(member, text=expr.value)
            out.append(member)
        return out

    def rule(self, expr, env: dict, cell: m.Cell):
        """One cell's expression, expanded, within the size limit."""
        try:
            expanded = self.expand(expr, env)
            if expanded is not expr and _tree_size(expanded, MAX_EXPANSION) > MAX_EXPANSION:
                raise _TooLarge
            return expanded
        except _TooLarge:
            self._fail(InvalidValueError(
                f"`{cell.name}` grows past {MAX_EXPANSION:,} operations once its functions are inlined",
                cell.span, hint="a function that uses a parameter twice doubles its argument at each call: "
                "give a large part a cell of its own"))

    def bound(self, expr, env: dict) -> int:
        """A family's or a `for`'s bound: a whole number known before evaluation."""
        return self._whole(self.expand(expr, env), expr.span, "a bound")

    # ---- expressions ------------------------------------------------------------

    def expand(self, e, env: dict):
        self.budget -= 1
        if self.budget < 0:
            raise _TooLarge
        cls = e.__class__
        if cls is m.Name:
            return self._name(e, env)
        if cls is m.Binary:
            left, right = self.expand(e.left, env), self.expand(e.right, env)
            return e if left is e.left and right is e.right else dataclasses.replace(e, left=left, right=right)
        if cls is m.Call:
            return self._call(e, env)
        if cls is m.If:
            cond = self.expand(e.cond, env)
            if env:
                known = _constant(cond)
                if isinstance(known, bool):
                    return self.expand(e.then if known else e.otherwise, env)
            then, otherwise = self.expand(e.then, env), self.expand(e.otherwise, env)
            if cond is e.cond and then is e.then and otherwise is e.otherwise:
                return e
            return dataclasses.replace(e, cond=cond, then=then, otherwise=otherwise)
        if cls is m.Unary:
            operand = self.expand(e.operand, env)
            return e if operand is e.operand else dataclasses.replace(e, operand=operand)
        if cls is m.For:
            self._fail(InvalidValueError("`for` gives the arguments of a call (`max(for s in 1..8: ...)`), "
                                         "not a value of its own", e.span))
        return e  # Num, Bool, Str

    def _name(self, e: m.Name, env: dict):
        head = e.parts[0]
        if head in env:
            if len(e.parts) > 1 or e.index is not None:
                what = "a number (an index)" if isinstance(env[head], int) else "a parameter: a value"
                self._fail(UnknownNameError(f"`{head}` is {what}, not a block or a family: "
                                            f"`{e.dotted}{'[...]' if e.index is not None else ''}` means nothing", e.span))
            value = env[head]
            return m.Num(Fraction(value), NUMBER, e.span, bare=True) if isinstance(value, int) else value
        if e.index is None:
            return e
        index = self._whole(self.expand(e.index, env), e.index.span, "an index")
        return m.Name(e.parts[:-1] + (m.member_name(e.parts[-1], index),), e.span)

    def _call(self, e: m.Call, env: dict):
        builtin = FUNCTIONS.get(e.func)
        args = []
        for arg in e.args:
            if arg.__class__ is m.For:
                if builtin is None or not builtin.variadic:
                    takes = (f"`{e.func}` takes {builtin.arity_text()}" if builtin else
                             f"`{e.func}` takes {_arity(self.functions.get(e.func))}")
                    self._fail(InvalidValueError(
                        f"`for` gives any number of arguments, and {takes}", arg.span,
                        hint="`for` goes in a call of a function of any number of arguments: "
                        + ", ".join(f.name for f in FUNCTIONS.values() if f.variadic)))
                args.extend(self._for(arg, env))
            else:
                args.append(self.expand(arg, env))
        if builtin is not None:
            return e if all(a is b for a, b in zip(args, e.args)) and len(args) == len(e.args) else \
                dataclasses.replace(e, args=tuple(args))
        fn = self.functions.get(e.func)
        if fn is None:
            self._fail(unknown_function(e, self.functions.by_name))
        if fn.name in self.functions.broken:
            raise _Failed
        if len(args) != len(fn.params):
            self._fail(DimensionError(f"`{fn.name}` takes {_arity(fn)}, not {len(args)}", e.span,
                                      hint=f"`{fn.name}` is defined at {fn.name_span}"))
        return self.expand(fn.body, dict(zip(fn.params, args)))

    def _for(self, arg: m.For, env: dict) -> list:
        low, high = self.bound(arg.low, env), self.bound(arg.high, env)
        if high - low + 1 > MAX_MEMBERS:
            self._fail(InvalidValueError(f"`for {arg.var} in {low}..{high}` gives {high - low + 1:,} arguments, "
                                         f"more than {MAX_MEMBERS:,}", arg.span))
        return [self.expand(arg.body, {**env, arg.var: i}) for i in range(low, high + 1)]

    def _whole(self, expr, span, what: str) -> int:
        """The whole number `expr` stands for, known before evaluation, or an error at `span`."""
        value = _constant(expr)
        if value is None:
            read = _first_name(expr)
            reads = f": it cannot read `{read}`" if read else ""
            self._fail(InvalidValueError(f"{what} is fixed before evaluation{reads}", span,
                                         hint="write a whole number, the variable of a family or a `for`, or "
                                         "arithmetic on them (`s - 1`)"))
        if isinstance(value, bool) or not isinstance(value, Fraction) or value.denominator != 1 or not _plain(expr):
            shown = value if not isinstance(value, Fraction) else (value.numerator if value.denominator == 1 else float(value))
            self._fail(InvalidValueError(f"{what} must be a whole number, not {shown}", span))
        return int(value)

    def _fail(self, error: KvdslError):
        self.errors.append(error)
        raise _Failed


def _arity(fn: Optional[m.FnDef]) -> str:
    if fn is None:
        return "a fixed number of arguments"
    count = len(fn.params)
    names = f" ({', '.join(fn.params)})" if fn.params else ""
    return f"{count} argument{'s' if count != 1 else ''}{names}"


def _constant(expr):
    """The value of an expression that reads no cell (numbers, conditions, text), or None."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.__class__ is m.Name:
            return None
        if node.__class__ is m.Call and not (node.func in FUNCTIONS and FUNCTIONS[node.func].accepts(len(node.args))):
            return None  # a call the dimension pass refuses, with its own message (`floor()`)
        if node._fields:
            stack.extend(node.children())
    try:
        return Evaluator({}).visit(expr)
    except (EvaluationError, ArithmeticError, ValueError, TypeError):
        return None


def _first_name(expr) -> Optional[str]:
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.__class__ is m.Name:
            return node.dotted
        if node._fields:
            stack.extend(reversed(node.children()))
    return None


def _tree_size(expr, limit: int) -> int:
    """How many nodes `expr` has when every shared part is counted each time it is used (more than `limit`: stops).

    Inlining shares an argument among the uses of its parameter, so the
    expression is smaller in memory than the tree every later pass walks.
    """
    sizes: dict = {}
    stack = [(expr, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = node.children() if node._fields else ()
        if not done and children:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        size = 1 + sum(sizes[id(child)] for child in children)
        if size > limit:
            return size
        sizes[key] = size
    return sizes[id(expr)]


def _plain(expr) -> bool:
    """True when every number in `expr` is a plain number (an index has no unit)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.__class__ is m.Num and not (node.dim == NUMBER):
            return False
        if node._fields:
            stack.extend(node.children())
    return True
