"""The check every body passes before kio's native reader sees it: no array may claim more entries than fit.

Read kio bodies through reader(entity_type), kio's entity_reader behind this check, never entity_reader itself.

kio 0.6.5's Rust reader reserves memory for an array's claimed count before it reads one element
(`Vec::with_capacity(n)`, compact and legacy arrays alike), so a damaged count of billions is an allocation
failure, and Rust aborts the process (SIGABRT): no Python exception, the whole tool dies. Strings and bytes are
safe (kio bounds-checks their lengths and raises), and the tagged-field count is a plain loop.

check() walks the body by the same entity schema kio compiles (dataclass fields, their `kafka_type`, the
entity's `__flexible__`, kio.serial._introspect's classification, tags), reading only lengths and counts and
skipping fixed-size fields, and raises CodecError at the first array claiming more entries than bytes are left:
every element takes at least one byte, so no body holds such an array, and a count kio may reserve is at most
the body's length. Where the bytes go wrong in any other way (too short, a null where none is allowed, an
unknown tag, a varint too long) it simply stops: kio, reading the same fields in the same order, raises its own
error at that spot or earlier, having met only counts this walk accepted.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from struct import Struct, error as StructError
from typing import Any

from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField, EntityTupleField, PrimitiveTupleField, classify_field, get_field_tag, get_schema_field_type,
    is_optional,
)

from .codec import CodecError

_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
          "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
          "uuid": 16}
_I16, _I32 = Struct(">h"), Struct(">i")

# One op per field: (kind, a, b). SKIP a fixed bytes; CSTR compact string/bytes (a: nullable); LSTR legacy
# string/bytes (a: its int16/int32 length, b: nullable); CARRAY/LARRAY (a: the element's op); ENTITY (a: the
# entity type, b: nullable).
SKIP, CSTR, LSTR, CARRAY, LARRAY, ENTITY = range(6)
Op = tuple[int, Any, Any]


class ArrayTooLong(CodecError):
    """An array claiming more entries than bytes are left (kio would abort reserving room for them)."""

    def __init__(self, count: int, left: int):
        super().__init__(f"an array of {count:,} entries in {left:,} bytes")
        self.count = count


class _Stop(Exception):
    """The bytes are damaged in a way kio itself raises on; the walk ends here."""


@cache
def reader(entity_type):
    """kio's entity_reader for `entity_type`, with check() first: read(buf, offset=0) -> (entity, size), and a
    CodecError (ArrayTooLong) where kio would abort the process."""
    read = entity_reader(entity_type)

    def guarded_read(buf, offset: int = 0):
        check(entity_type, buf, offset)
        return read(buf, offset)

    return guarded_read


def check(entity_type, buf, offset: int = 0) -> int | None:
    """Raise CodecError if `buf` (a body of `entity_type` from `offset` to its end) holds an array count no body
    that size can. Returns where the walk ended (offset + kio's size for a body it reads), or None where it
    stopped early."""
    if not (fields(entity_type) or entity_type.__flexible__):
        return offset  # a body of no bytes (ApiVersions v0-v2 requests): nothing to count
    try:
        return _walker(entity_type, False)(buf, offset)
    except (_Stop, IndexError, StructError):  # a length or count past the end
        return None


# -- what kio reads: the entity's fields, as kio's native reader compiles them ------------------------------
@cache
def _plan(entity_type, nullable: bool):
    """(nullable, flexible, ops for the untagged fields, {tag: op})."""
    flexible = entity_type.__flexible__
    ops: list[Op] = []
    tags: dict[int, Op] = {}
    for f in fields(entity_type):
        tag = get_field_tag(f)
        op = _op(f, flexible, tagged=tag is not None)
        if tag is None:
            if ops and op[0] == SKIP and ops[-1][0] == SKIP:  # one skip for a run of fixed-size fields
                op = (SKIP, ops.pop()[1] + op[1], None)
            ops.append(op)
        else:
            tags[int(tag)] = op
    if not (ops or flexible or nullable):  # could take no bytes at all: an array of it would defeat the check
        raise NotImplementedError(f"{entity_type.__name__}: an empty entity, unknown to the kio guard")
    return nullable, flexible, tuple(ops), tags


def _op(f, flexible: bool, tagged: bool) -> Op:
    cls = classify_field(f)
    elem: Op
    if isinstance(cls, (EntityField, EntityTupleField)):
        # as kio: a struct field is nullable (an int8 marker first) when its type is optional, tagged or not
        elem = (ENTITY, cls.type_, isinstance(cls, EntityField) and is_optional(f))
        plan = _plan(*elem[1:])
        if plan[:2] == (False, False) and len(plan[2]) == 1 and plan[2][0][0] == SKIP:
            elem = plan[2][0]  # a struct of fixed-size fields only (no tags): just so many bytes
    else:
        kafka_type = get_schema_field_type(f)
        # as kio: a tagged primitive is never nullable (its absence is its null), nor an array's element
        nullable = is_optional(f) and not tagged and not isinstance(cls, PrimitiveTupleField)
        if kafka_type in _FIXED:
            elem = (SKIP, _FIXED[kafka_type], None)
        elif kafka_type in ("string", "bytes", "records"):
            length = None if flexible else (_I16 if kafka_type == "string" else _I32)
            elem = (CSTR, nullable, None) if flexible else (LSTR, length, nullable)
        else:
            raise NotImplementedError(f"field {f.name}: kafka_type {kafka_type!r} unknown to the kio guard")
    if not cls.is_array:
        return elem
    return (CARRAY if flexible else LARRAY, elem, None)


# -- how the guard walks it: one generated function per body type ------------------------------------------
# Straight-line code, nested entities inlined, rather than a loop over the ops: this runs before every body kio
# reads, and interpreting the ops cost two to three times kio's own read.
@cache
def _walker(entity_type, nullable: bool):
    """walk(buf, pos) -> pos after the entity; raises ArrayTooLong, or _Stop / IndexError / struct.error."""
    env: dict[str, Any] = {}
    return _function(_code((ENTITY, entity_type, nullable), env, 1), env)


def _field_walker(op: Op):
    env: dict[str, Any] = {}
    return _function(_code(op, env, 1), env)


def _function(body: list[str], env: dict):
    env.update(I16=_I16.unpack_from, I32=_I32.unpack_from, uvarint=_uvarint, Stop=_Stop, TooLong=ArrayTooLong)
    source = "\n".join(["def walk(buf, pos):", " end = len(buf)", *body, " return pos"])
    exec(compile(source, "<kio guard>", "exec"), env)  # noqa: S102  (our own source, from kio's schema)
    return env["walk"]


def _code(op, env: dict, depth: int) -> list[str]:
    """Source lines that walk one field at indent `depth` (`n<depth>` is this depth's own length)."""
    kind, a, b = op
    i, n = " " * depth, f"n{depth}"
    if kind == SKIP:
        return [f"{i}pos += {a}"]
    if kind == ENTITY:
        nullable, flexible, ops, tags = _plan(a, b)
        lines = []
        if nullable:
            lines = [f"{i}if buf[pos] == 0xFF: pos += 1  # int8 -1: null", f"{i}else:", f"{i} pos += 1"]
            i, depth = i + " ", depth + 1
        for field in ops:
            lines += _code(field, env, depth)
        if flexible:  # kio reads a tag's field by its schema and ignores the size before it, so we do too
            name = f"tags{len(env)}"
            env[name] = {tag: _field_walker(field) for tag, field in tags.items()}
            lines += _uvarint_code(n, i) + [
                f"{i}for _ in range({n}):", f"{i} tag, pos = uvarint(buf, pos)", f"{i} _, pos = uvarint(buf, pos)",
                f"{i} walk_tag = {name}.get(tag)", f"{i} if walk_tag is None: raise Stop  # kio: unknown tag",
                f"{i} pos = walk_tag(buf, pos)"]
        return lines
    if kind == CSTR:
        null = f"{i}if {n}: pos += {n} - 1" if a else f"{i}if not {n}: raise Stop  # kio: unexpected null"
        return _uvarint_code(n, i) + [null] + ([] if a else [f"{i}pos += {n} - 1"])
    if kind == LSTR:
        reader = "I16" if a is _I16 else "I32"
        bad = f"{n} < -1" if b else "True"  # kio: a negative length, or an unexpected null
        return [f"{i}{n} = {reader}(buf, pos)[0]", f"{i}pos += {a.size}", f"{i}if {n} >= 0: pos += {n}",
                f"{i}elif {bad}: raise Stop"]
    if kind == CARRAY:  # 0: null, else the count plus one
        lines = _uvarint_code(n, i) + [f"{i}if {n} > 1:", f"{i} {n} -= 1"]
    else:  # LARRAY: -1 null
        lines = [f"{i}{n} = I32(buf, pos)[0]", f"{i}pos += 4", f"{i}if {n} < -1: raise Stop  # kio: negative count",
                 f"{i}if {n} > 0:"]
    lines.append(f"{i} if {n} > end - pos: raise TooLong({n}, end - pos)")
    if a[0] == SKIP:
        return lines + [f"{i} pos += {n} * {a[1]}"]
    return lines + [f"{i} for _ in range({n}):", *_code(a, env, depth + 2)]


def _uvarint_code(var: str, i: str) -> list[str]:
    return [f"{i}{var} = buf[pos]", f"{i}if {var} < 0x80: pos += 1", f"{i}else: {var}, pos = uvarint(buf, pos)"]


def _uvarint(buf, pos: int) -> tuple[int, int]:
    """kio's unsigned varint: at most 5 bytes."""
    value = shift = 0
    for i in range(pos, pos + 5):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise _Stop  # kio: varint too long
