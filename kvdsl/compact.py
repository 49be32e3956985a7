"""Dataclasses pickled as the tuple of their fields' values (`@pickled_by_fields`).

hazard: a program read back from disk (`kvdsl/cache.py`) is about half a
million small objects: spec nodes, resolved names, spans.  Pickled the default
way, each object's state is a dict of its fields; the unpickler keeps every
one of those dicts in its memo until the whole program is read, and gives each
object a dict of its own.  Reading the catalog's program then peaked at twice
the memory it holds afterwards, and held a third more than it needed.  As a
tuple, the state is smaller on disk and in the memo, and the fields are set
one by one, which leaves them in the object's compact attribute storage.
"""

from __future__ import annotations

import dataclasses


def pickled_by_fields(cls):
    """Give the dataclass `cls` a `__getstate__` and `__setstate__` that use a tuple of its fields, in order."""
    names = [f.name for f in dataclasses.fields(cls)]
    # unrolled, as dataclasses writes its methods: a loop over the names makes reading a program a quarter slower
    code = (f"def __getstate__(self):\n    return ({''.join(f'self.{n}, ' for n in names)})\n"
            "def __setstate__(self, state):\n"
            + "".join(f"    _set(self, {n!r}, state[{i}])\n" for i, n in enumerate(names)) + "    return None\n")
    methods: dict = {"_set": object.__setattr__}
    exec(code, methods)  # noqa: S102 (the text is made from the class's own field names)
    cls.__getstate__, cls.__setstate__ = methods["__getstate__"], methods["__setstate__"]
    return cls
