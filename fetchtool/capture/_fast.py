"""Fast constructors for the frozen, slotted event dataclasses on the per-packet path.

A frozen dataclass's __init__ assigns every field through object.__setattr__ (the frozen guard makes plain
assignment raise), which costs ~150 ns per field: for Segment that was most of the capture layer's per-packet
budget. The slot descriptors' own __set__ does the same store at about half the cost. The objects are identical
(same class, same fields, same equality/hash); they are just built without going through __init__, so this is
only for classes whose __init__ does nothing but store fields (no __post_init__, no default factories).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


def fast_constructor(cls: type) -> Callable:
    """A function taking all of `cls`'s fields positionally and returning an instance, without __init__."""
    names = [f.name for f in dataclasses.fields(cls)]
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__; build it the normal way")
    namespace = {"_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": getattr(cls, n).__set__ for n in names})
    body = "".join(f"    _set_{n}(o, {n})\n" for n in names)
    source = f"def build({', '.join(names)}):\n    o = _new(_cls)\n{body}    return o\n"
    exec(source, namespace)  # noqa: S102  (generated from the dataclass's own field names)
    build = namespace["build"]
    build.__doc__ = f"Build a {cls.__name__} from all its fields, positionally (see fetchtool.capture._fast)."
    return build
