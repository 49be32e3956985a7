"""One base for the interpreters of the expression tree.

Each interpreter (exact evaluation, the NumPy sweep, SymPy conversion,
dimensions, the kvspec and Excel printers) is an `ExprVisitor` with one
`visit_<Node>` method per node class: `visit_Num`, `visit_Binary`,
`visit_CellRef`, ...  A subclass that misses a node class is refused when it
is defined, so a new node cannot be forgotten by a back end.
"""

from __future__ import annotations

from . import model as m
from .program import CellRef

# every node a resolved expression is made of
NODES = (*m.EXPR_NODES, CellRef)


class _Table(dict):
    """node class -> method; a class no method was made for goes to `visit_unknown`."""

    def __missing__(self, cls):
        return self.unknown


class ExprVisitor:
    """Dispatches on a node's class to the subclass's `visit_<Class>(node, *args)`.

    Subclasses may set `partial = True` to handle only some nodes;
    `visit_default` then receives the others.  `visit` is the entry point,
    and methods recurse through it too: a dictionary lookup and one call per
    node, as fast as a chain of `is` tests.
    """

    partial = False
    _table: dict = _Table()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        missing = missing_nodes(cls)
        if missing and not cls.partial:
            raise TypeError(f"{cls.__name__} has no visit method for {', '.join(missing)}")
        default = getattr(cls, "visit_default", cls.visit_unknown)
        cls._table = _Table({node: getattr(cls, f"visit_{node.__name__}", default) for node in NODES})
        cls._table.unknown = cls.visit_unknown

    def visit(self, node, *args):
        """The result of this interpreter for `node`."""
        return self._table[node.__class__](self, node, *args)

    def visit_unknown(self, node, *args):
        raise TypeError(f"{type(self).__name__} cannot interpret {node!r}")


def missing_nodes(visitor_class) -> list:
    """The node classes a visitor has no method of its own for (what a coverage test checks)."""
    return [node.__name__ for node in NODES if not hasattr(visitor_class, f"visit_{node.__name__}")]


class NameMapper(ExprVisitor):
    """`expr` with every Name replaced by `fn(name)`; parts without a Name are shared, not copied."""

    def __init__(self, fn):
        self.fn = fn

    def visit_Name(self, e):
        return self.fn(e)

    def visit_Num(self, e):
        return e

    visit_Bool = visit_Str = visit_NoneValue = visit_CellRef = visit_Num

    # hazard: the names pass maps every rule of every block; these methods
    # recurse through the table itself, one call per node, not through `visit`
    def visit_Binary(self, e):
        table = self._table
        left, right = e.left, e.right
        new_left, new_right = table[left.__class__](self, left), table[right.__class__](self, right)
        return e if new_left is left and new_right is right else _rebuilt(e, left=new_left, right=new_right)

    def visit_Call(self, e):
        table = self._table
        args = e.args
        new = [table[a.__class__](self, a) for a in args]
        for a, b in zip(new, args):
            if a is not b:
                return _rebuilt(e, args=tuple(new))
        return e

    def visit_If(self, e):
        table = self._table
        cond, then, otherwise = e.cond, e.then, e.otherwise
        new = (table[cond.__class__](self, cond), table[then.__class__](self, then),
               table[otherwise.__class__](self, otherwise))
        if new[0] is cond and new[1] is then and new[2] is otherwise:
            return e
        return _rebuilt(e, cond=new[0], then=new[1], otherwise=new[2])

    def visit_Unary(self, e):
        operand = e.operand
        new = self._table[operand.__class__](self, operand)
        return e if new is operand else _rebuilt(e, operand=new)


def map_names(expr, fn):
    """`expr` with every Name replaced by fn(name) (see `NameMapper`)."""
    return NameMapper(fn).visit(expr)


def _rebuilt(node, **fields):
    """A copy of a frozen node with some fields changed, without the dataclass constructor's cost."""
    new = object.__new__(node.__class__)
    new.__dict__.update(node.__dict__)
    new.__dict__.update(fields)
    return new
