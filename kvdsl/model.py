"""The spec model: what a `.kvspec` file says, as frozen dataclasses with spans."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional, Union

from .compact import pickled_by_fields
from .errors import Span
from .units import Dim
from .words import BLOCK_KINDS  # noqa: F401 (the kinds a block may have, as the spec model names them)

# An engine block is a set of rules every deployment runs for itself: its
# cells live in each deployment as `ENGINE.cell` (`vllm.num_blocks`).
INSTANCED = {"engine": "deployment"}
REQUIRE = "require"  # the name of a requirement starts with this word and a space: no cell can take it


class _Node:
    """Tree-walk helpers shared by every expression node."""

    _fields: tuple = ()

    def children(self) -> tuple:
        """The sub-expressions, in source order."""
        if len(self._fields) == 1:
            value = getattr(self, self._fields[0])
            return value if isinstance(value, tuple) else (value,)
        return tuple(getattr(self, name) for name in self._fields)  # only Call has a tuple field

    def replace(self, children) -> "Expr":
        """A copy with `children` (as `children()` lists them) in place of the current ones."""
        children = list(children)
        node = object.__new__(type(self))
        state = dict(self.__dict__)
        for name in self._fields:
            value = state[name]
            if isinstance(value, tuple):
                state[name] = tuple(children[: len(value)])
                del children[: len(value)]
            else:
                state[name] = children.pop(0)
        node.__dict__.update(state)  # a frozen dataclass: its fields live in __dict__
        return node


@pickled_by_fields
@dataclass(frozen=True)
class Num(_Node):
    """A number in base units. `bare` is true for a plain number written without unit."""

    value: Fraction
    dim: Dim
    span: Span
    bare: bool = False


@pickled_by_fields
@dataclass(frozen=True)
class Bool(_Node):
    """`true` or `false`."""

    value: bool
    span: Span


@pickled_by_fields
@dataclass(frozen=True)
class NoneValue(_Node):
    """`none`: no value, where one does not apply (the cost of a deployment that does not run)."""

    span: Span


@pickled_by_fields
@dataclass(frozen=True)
class Str(_Node):
    """A text literal: `"GQA"`."""

    value: str
    span: Span


@pickled_by_fields
@dataclass(frozen=True)
class Name(_Node):
    """A reference: `layers`, `model.layers`, `h100_sxm.memory`, `stage_start[3]`.

    As written, a member of a family may carry its `index` (`stage_start[s - 1]`);
    the first pass (`kvdsl/expand.py`) folds it into the last part
    (`stage_start[2]`), so later passes never see one.
    """

    parts: tuple
    span: Span
    index: Optional["Expr"] = None

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@pickled_by_fields
@dataclass(frozen=True)
class Unary(_Node):
    """`-x` or `not x`."""

    op: str  # "-" or "not"
    operand: "Expr"
    span: Span
    _fields = ("operand",)


@pickled_by_fields
@dataclass(frozen=True)
class Binary(_Node):
    """Two operands and an operator: arithmetic, `&` (text), a comparison, `and`, `or`."""

    op: str  # + - * / ^ & < <= > >= == != and or
    left: "Expr"
    right: "Expr"
    span: Span
    _fields = ("left", "right")


@pickled_by_fields
@dataclass(frozen=True)
class Call(_Node):
    """A built-in function called (`ceil(x)`, `min(a, b)`); a spec's own `fn` is inlined before."""

    func: str
    args: tuple
    span: Span
    func_span: Span
    _fields = ("args",)


@pickled_by_fields
@dataclass(frozen=True)
class If(_Node):
    """`if cond then a else b`."""

    cond: "Expr"
    then: "Expr"
    otherwise: "Expr"
    span: Span
    _fields = ("cond", "then", "otherwise")


@pickled_by_fields
@dataclass(frozen=True)
class For(_Node):
    """`for s in 1..8: body` among a call's arguments: the body once for each `s`.

    Written only inside calls; the first pass turns it into the arguments it stands for.
    """

    var: str
    low: "Expr"
    high: "Expr"
    body: "Expr"
    span: Span
    var_span: Span
    _fields = ("low", "high", "body")


Expr = Union[Num, Bool, NoneValue, Str, Name, Unary, Binary, Call, If]
# the nodes of a resolved expression: every interpreter of the tree handles each
EXPR_NODES = (Num, Bool, NoneValue, Str, Name, Unary, Binary, Call, If)
# nodes that only the text has: the first pass expands them away
SURFACE_NODES = (For,)


def conjuncts(expr):
    """The parts of an expression joined by `and`, in order."""
    if isinstance(expr, Binary) and expr.op == "and":
        yield from conjuncts(expr.left)
        yield from conjuncts(expr.right)
    else:
        yield expr


def member_name(family: str, index: int) -> str:
    """The name of one member of a family: `stage_start[3]`."""
    return f"{family}[{index}]"


# ---- cells and blocks ----------------------------------------------------


@pickled_by_fields
@dataclass(frozen=True)
class KindSetting:
    """`kv_heads = 16` inside a layer kind: the shape of that kind's layers."""

    name: str
    value: Num
    span: Span


@pickled_by_fields
@dataclass(frozen=True)
class LayerKind:
    """One layer of a pattern: `full`, `sliding(128)`, `sliding(1024, kv_heads = 16, head_dim = 256)`."""

    kind: str
    argument: Optional[Num]
    span: Span
    shape: tuple = ()  # KindSetting


@pickled_by_fields
@dataclass(frozen=True)
class Family:
    """`[s in 1..8]` after a cell's name: the index, and its bounds as written."""

    var: str
    low: Expr
    high: Expr
    span: Span
    var_span: Span


@pickled_by_fields
@dataclass(frozen=True)
class Cell:
    """One `name = value` (or `name: dimension`) line.

    `form` is one of: rule (an expression), text (a string), unknown (`?`),
    pattern (a layer pattern), declare (a required input of a dimension),
    require (a condition every value must meet; not a cell a user reads).
    `new` is true for `let NAME = ...`: a cell of one's own, which the block's
    kind does not define.  `doc` is the comment written beside or above it;
    `label` and `description` come from a `## Label: One sentence.` line right
    above it (see `kvdsl.labels`).
    """

    name: str
    form: str
    span: Span
    name_span: Span
    expr: Optional[Expr] = None
    text: Optional[str] = None
    layers: tuple = ()  # LayerKind, expanded, for a pattern
    declared: Optional[str] = None  # the dimension word of a declaration
    declared_span: Optional[Span] = None
    source: str = ""  # the cell's text as written
    new: bool = False
    doc: str = ""
    label: str = ""
    description: str = ""
    family: Optional[Family] = None  # `stage_start[s in 1..8] = ...`: the first pass makes the members
    member: tuple = ()  # a member of a family: (its index's name, its number), `("s", 3)`
    calls: frozenset = frozenset()  # the functions its expression calls
    surface: bool = False  # it has a `for` or an indexed name, which the first pass expands
    broken: bool = False  # the first pass met a mistake in it (already reported): later passes skip it


@pickled_by_fields
@dataclass(frozen=True)
class FnDef:
    """`fn NAME(a, b) = expr` at the top of a file: a pure function, inlined where it is called."""

    name: str
    params: tuple
    body: Expr
    span: Span
    name_span: Span
    param_spans: tuple = ()
    source: str = ""
    doc: str = ""
    calls: frozenset = frozenset()


@pickled_by_fields
@dataclass(frozen=True)
class Block:
    """A block as written: its kind, name, title, cells and the block it extends."""

    kind: str
    name: str
    title: str
    cells: tuple
    span: Span
    name_span: Span
    kind_span: Span
    extends: Optional[str] = None
    extends_span: Optional[Span] = None

    def cell(self, name: str) -> Optional[Cell]:
        for c in self.cells:
            if c.name == name:
                return c
        return None


@pickled_by_fields
@dataclass(frozen=True)
class Defaults:
    """`defaults model, deployment { ... }`: cells every block of these kinds inherits."""

    kinds: tuple
    cells: tuple
    span: Span
    kind_spans: tuple


@pickled_by_fields
@dataclass(frozen=True)
class Import:
    """`import "path"`."""

    path: str
    span: Span


@pickled_by_fields
@dataclass(frozen=True)
class SpecFile:
    """One parsed file: its blocks, imports, defaults and functions, in order."""

    path: str
    items: tuple = field(default_factory=tuple)
