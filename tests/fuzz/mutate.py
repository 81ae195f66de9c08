"""Mutations for fuzzing without atheris (the bounded run in the suite, `run.py --engine mutate`, the CLI
campaign): byte-level damage plus the values that break length and count fields, applied by a seeded
random.Random so that every run is reproducible from its seed.

`Mutation`s are plain tuples, so hypothesis can draw them (and shrink a failure to the fewest) as well.
"""

from __future__ import annotations

import random
import struct

# Values for a 1/2/4/8-byte field that hit the edges: zero, -1, the signed limits, "just past the end".
INTERESTING_32 = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                  0x10000000, 0x00FFFFFF,
                  12, 16, 20, 24, 28)  # pcapng block lengths shorter than a block's fixed fields
INTERESTING_64 = (0, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF, 0x0000FFFFFFFFFFFF)
OPS = ("flip", "byte", "int16", "int32", "int64", "truncate", "delete", "duplicate", "insert", "varint", "splice",
       "block")

Mutation = tuple[str, int, int]  # (op, position seed, value seed)


def apply(data: bytes, mutations: list[Mutation], donors: list[bytes] = ()) -> bytes:
    buf = bytearray(data)
    for op, where, value in mutations:
        n = len(buf)
        pos = where % n if n else 0
        if op == "flip" and n:
            buf[pos] ^= 1 << (value % 8)
        elif op == "byte" and n:
            buf[pos] = (0, 0xFF, 0x7F, 0x80, 1, value & 0xFF)[value % 6]
        elif op in ("int16", "int32", "int64") and n:
            width = {"int16": 2, "int32": 4, "int64": 8}[op]
            table = INTERESTING_64 if width == 8 else INTERESTING_32
            v = table[value % len(table)] & ((1 << (8 * width)) - 1)
            order = "big" if value & 0x100 else "little"  # Kafka is big-endian, pcap headers usually little
            buf[pos : pos + width] = v.to_bytes(width, order)
        elif op == "varint" and n:
            # a protobuf-style unsigned varint (compact arrays and strings): huge, zero, or a null (0)
            buf[pos : pos + 5] = (b"\xff\xff\xff\xff\x0f", b"\x00", b"\x80\x80\x80\x80\x08", b"\x81\x01")[value % 4]
        elif op == "truncate":
            del buf[pos:]
        elif op == "delete" and n:
            del buf[pos : pos + 1 + value % 64]
        elif op == "duplicate" and n:
            chunk = buf[pos : pos + 1 + value % 256]
            buf[pos:pos] = chunk
        elif op == "insert":
            buf[pos:pos] = random.Random(value).randbytes(1 + value % 16)
        elif op == "block":
            _damage_block(buf, where, value)
        elif op == "splice" and donors:
            donor = donors[value % len(donors)]
            if donor:
                start = (value >> 8) % len(donor)
                buf[pos:] = donor[start:]
    return bytes(buf)


def pcapng_blocks(data: bytes | bytearray) -> list[int]:
    """Offsets of the blocks of a little-endian pcapng file (empty for anything else)."""
    if data[:4] != b"\x0a\x0d\x0d\x0a" or data[8:12] != b"\x4d\x3c\x2b\x1a":
        return []
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(pos)
        n = struct.unpack_from("<I", data, pos + 4)[0]
        if n < 12:
            break
        pos += n
    return out


def _damage_block(buf: bytearray, where: int, value: int) -> None:
    """Structure-aware damage to one capture block or record: its length becomes small or absurd, and the file
    may end right after it, so a reader that trusts the length reads past the block or the file."""
    starts = pcapng_blocks(buf)
    field = 4
    if not starts:
        starts, field = pcap_records(bytes(buf)), 8  # classic pcap: the record's captured length
    if not starts:
        return
    pos = starts[where % len(starts)]
    small = (12, 16, 20, 24, 28, 32, 0, 4, 0xFFFFFFFF, 0x7FFFFFFF)[value % 10]
    struct.pack_into("<I", buf, pos + field, small)
    if (value // 10) % 2 and small < 64:
        del buf[pos + small + (16 if field == 8 else 0):]


def random_mutations(rng: random.Random, count: int | None = None) -> list[Mutation]:
    return [(rng.choice(OPS), rng.getrandbits(32), rng.getrandbits(32)) for _ in range(count or rng.randint(1, 6))]


def mutate(rng: random.Random, data: bytes, donors: list[bytes] = ()) -> bytes:
    return apply(data, random_mutations(rng), donors)


# -- capture-aware damage for the CLI campaign: what a broken capture tool or a hostile file does ----------------
def pcap_records(data: bytes) -> list[int]:
    """Offsets of the record headers of a little-endian classic pcap (empty for anything else)."""
    if data[:4] not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return []
    out, pos = [], 24
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return out


def damage_capture(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One named kind of damage to a classic pcap: (what, damaged bytes)."""
    records = pcap_records(data)
    buf = bytearray(data)
    kind = rng.choice(("bitflips", "truncate", "record_length", "orig_length", "timestamp", "kafka_count",
                       "kafka_size", "mixed"))
    if not records and kind != "bitflips":
        kind = "truncate"  # pcapng: bit flips or a cut
    if kind == "bitflips":
        for _ in range(rng.randint(1, 40)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return "bitflips", bytes(buf)
    if kind == "truncate":
        return kind, bytes(buf[: rng.randrange(len(buf))])
    rec = rng.choice(records)
    if kind == "record_length":  # absurd captured length in a record header
        struct.pack_into("<I", buf, rec + 8, rng.choice((0xFFFFFFFF, 0x7FFFFFFF, 0x0FFFFFFF, 300_000_000,
                                                          rng.randrange(1 << 20))))
        return kind, bytes(buf)
    if kind == "orig_length":
        struct.pack_into("<I", buf, rec + 12, rng.choice((0, 0xFFFFFFFF, 1)))
        return kind, bytes(buf)
    if kind == "timestamp":  # absurd seconds / fractions, for one record or from one record on
        for r in records if rng.random() < 0.5 else [rec]:
            struct.pack_into("<II", buf, r, rng.choice((0, 0xFFFFFFFF, 0x7FFFFFFF, 1)),
                             rng.choice((0, 0xFFFFFFFF, 999_999_999)))
        return kind, bytes(buf)
    # Kafka-level damage inside a packet's payload: an int32 somewhere past the headers becomes absurd (an
    # array count, a string or bytes length, a size prefix), or several.
    for _ in range(rng.randint(1, 4) if kind == "mixed" else 1):
        r = rng.choice(records)
        incl = struct.unpack_from("<I", buf, r + 8)[0]
        if incl <= 60:
            continue
        at = r + 16 + rng.randrange(54, incl - 4)
        value = rng.choice((0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x10000000, 1_000_000, 0x00010000))
        if kind == "kafka_size":
            at = r + 16 + 54  # the first bytes of the TCP payload (Ethernet + IPv4 + TCP without options)
        struct.pack_into(">I", buf, at, value)
    return kind, bytes(buf)
