"""Cheap constructors for the frozen, slotted dataclasses made per packet or per partition row.

A frozen dataclass's __init__ assigns every field through object.__setattr__ (plain assignment raises), several
times dearer than a plain object. fast_constructor fills the same slots on a mutable twin class with the same
layout, then makes the object a `cls` (CPython allows assigning __class__ between classes of identical layout):
about 4x cheaper than __init__. The object is the one __init__ makes: that is checked on a sample when the
constructor is made, and the class itself is returned when it cannot be (other slots, a __post_init__).
Only for classes whose __init__ does nothing but store its fields. A field's default is the constructor's too, so
a caller passing fields by name may leave out what __init__ would let it leave out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def fast_constructor(cls: type) -> Callable:
    """A function taking `cls`'s fields as __init__ does (in order, or by name; defaults as the fields have them)
    and returning the instance __init__ would make."""
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    if (getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__")
            or any(f.kw_only or f.default_factory is not dataclasses.MISSING for f in fields)):
        return cls
    twin = type(f"_Mutable{cls.__name__}", cls.__bases__, {"__slots__": names})  # same bases: same layout
    args = ", ".join(n if f.default is dataclasses.MISSING else f"{n}=_defaults[{i}]"
                     for i, (n, f) in enumerate(zip(names, fields)))
    body = "".join(f"    o.{n} = {n}\n" for n in names)
    namespace: dict[str, Any] = {"_twin": twin, "_cls": cls, "_defaults": [f.default for f in fields]}
    exec(f"def build({args}):\n    o = _twin()\n{body}    o.__class__ = _cls\n    return o\n",  # noqa: S102
         namespace)  # generated from the dataclass's own field names
    build = namespace["build"]
    sample = tuple(range(len(names)))
    try:
        made = build(*sample)
    except TypeError:  # the layouts differ after all
        return cls
    if type(made) is not cls or [getattr(made, n) for n in names] != [getattr(cls(*sample), n) for n in names]:
        return cls
    build.__doc__ = f"Build a {cls.__name__} from its fields, as its __init__ takes them (see fetchtool._fast)."
    return build
