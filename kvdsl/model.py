"""The spec model: what a `.kvspec` file says, as frozen dataclasses with spans."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional, Union

from .errors import Span
from .units import Dim

BLOCK_KINDS = ("model", "hardware", "deployment", "format", "engine")
REQUIRE = "require"  # the name of a requirement starts with this word and a space: no cell can take it


# ---- expressions ---------------------------------------------------------


@dataclass(frozen=True)
class Num:
    """A number in base units. `bare` is true for a plain number written without unit."""

    value: Fraction
    dim: Dim
    span: Span
    bare: bool = False


@dataclass(frozen=True)
class Bool:
    value: bool
    span: Span


@dataclass(frozen=True)
class Name:
    """A reference: `layers`, `model.layers`, `h100_sxm.memory`."""

    parts: tuple
    span: Span

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "not"
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / ^ < <= > >= == != and or
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple
    span: Span
    func_span: Span


@dataclass(frozen=True)
class If:
    cond: "Expr"
    then: "Expr"
    otherwise: "Expr"
    span: Span


Expr = Union[Num, Bool, Name, Unary, Binary, Call, If]


# ---- cells and blocks ----------------------------------------------------


@dataclass(frozen=True)
class LayerKind:
    """One layer of a pattern: `full`, `sliding(128)`."""

    kind: str
    argument: Optional[Num]
    span: Span


@dataclass(frozen=True)
class Cell:
    """One `name = value` (or `name: dimension`) line.

    `form` is one of: rule (an expression), text (a string), unknown (`?`),
    pattern (a layer pattern), declare (a required input of a dimension),
    require (a condition every value must meet; not a cell a user reads).
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


@dataclass(frozen=True)
class Block:
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


@dataclass(frozen=True)
class Defaults:
    """`defaults model { ... }`: cells every block of a kind inherits."""

    kind: str
    cells: tuple
    span: Span
    kind_span: Span


@dataclass(frozen=True)
class Import:
    path: str
    span: Span


@dataclass(frozen=True)
class SpecFile:
    path: str
    items: tuple = field(default_factory=tuple)
