"""Long chains of one operator regrouped as balanced trees on the parse tree (`balance_chains`, which
`transform` runs before any rule), so that no walk of a spec model recurses as deep as its longest sum."""

from __future__ import annotations

from lark import Tree


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
