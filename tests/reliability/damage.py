"""Source partitions and the damage done to copies of them.

A :class:`Source` builds a data directory holding one partition: written by kafkalog (``kafkalog
produce``, or kafkalog's :class:`~kafkalog.format.builder.MemoryRecordsBuilder` for magic 0/1
message sets), or copied from a real broker's data under ../shared/fixtures/kafka-data.

A :class:`Damage` changes a copy's partition directory in place. :func:`grid` enumerates the
damages for one source from its layout (entry positions found by framing the ``.log`` files here,
never by kafkalog), and :func:`random_damages` draws seeded random ones. Every damage has a name
that says exactly what was done, so that a failure can be reproduced by hand.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crc32c as _crc32c

from .expected import SEGMENT

__all__ = [
    "SOURCES",
    "Damage",
    "Entry",
    "Source",
    "fix_crc",
    "grid",
    "layout",
    "random_damages",
]

T0 = 1_767_225_600_000
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# sources


@dataclass(frozen=True)
class Source:
    name: str
    topic: str
    partition: int
    build: Callable[[Path], None]  # writes a data directory at the given path
    real: bool = False

    @property
    def dirname(self) -> str:
        return f"{self.topic}-{self.partition}"


def _produce(root: Path, topic: str, lines: list[dict], *args: str) -> None:
    import contextlib
    import io
    import sys

    from kafkalog.cli.main import main

    root.parent.mkdir(parents=True, exist_ok=True)
    src = root.parent / f"{root.name}.input.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out, err = io.StringIO(), io.StringIO()
    old_stdout = sys.stdout
    try:
        sys.stdout = io.TextIOWrapper(io.BytesIO(), write_through=True)
        with contextlib.redirect_stderr(err):
            code = main(
                ["produce", str(root), "--topic", topic, "--file", str(src), "--quiet", *args]
            )
    finally:
        sys.stdout = old_stdout
    src.unlink()
    if code != 0:
        raise RuntimeError(f"produce {args} failed: {code} {out.getvalue()} {err.getvalue()}")


def _lines(n: int, *, value_size: int = 40, headers: bool = True, start: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + n):
        line: dict = {
            "key": None if i % 5 == 0 else f"k{i}",
            "value": None if i % 11 == 10 else f"v{i}-" + "x" * (value_size + i % 7),
            "timestamp": T0 + i * 1000,
        }
        if headers and i % 3 == 0:
            line["headers"] = [{"key": "h", "value": str(i)}, {"key": "n", "value": None}]
        out.append(line)
    return out


def _kafkalog_source(name: str, n: int, *args: str, value_size: int = 40) -> Source:
    def build(root: Path) -> None:
        _produce(root, "t", _lines(n, value_size=value_size), "--partition", "0", *args)

    return Source(name, "t", 0, build)


def _transactional(root: Path) -> None:
    seg = ("--config", "internal.segment.bytes=1500", "--config", "index.interval.bytes=100")
    _produce(root, "t", _lines(4), "--partition", "0", "--batch-size", "200", *seg)
    _produce(
        root,
        "t",
        _lines(5, start=4),
        "--partition",
        "0",
        "--producer-id",
        "7",
        "--transaction",
        "commit",
        "--batch-size",
        "200",
    )
    _produce(
        root,
        "t",
        _lines(3, start=9),
        "--partition",
        "0",
        "--producer-id",
        "8",
        "--transaction",
        "abort",
        "--codec",
        "lz4",
    )
    _produce(
        root,
        "t",
        _lines(4, start=12),
        "--partition",
        "0",
        "--idempotent",
        "--codec",
        "zstd",
        "--batch-size",
        "300",
    )


def _legacy(root: Path) -> None:
    """Magic 0 and 1 message sets (plain and compressed wrappers) in two segments, written with
    kafkalog's builder straight into the files (no indexes: Kafka rebuilds them)."""
    from kafkalog.format.builder import MemoryRecordsBuilder
    from kafkalog.format.constants import TimestampType

    part = root / "legacy-0"
    part.mkdir(parents=True)
    plan = [
        [(0, "none"), (0, "gzip"), (0, "snappy"), (1, "none")],
        [(1, "gzip"), (1, "snappy"), (1, "lz4"), (1, "none")],
    ]
    offset = 0
    for segment in plan:
        base = offset
        data = b""
        for magic, codec in segment:
            kw = {"timestamp_type": TimestampType.NO_TIMESTAMP_TYPE} if magic == 0 else {}
            per = 1 if codec == "none" else 3
            for _ in range(2 if codec == "none" else 1):
                b = MemoryRecordsBuilder(magic=magic, compression=codec, base_offset=offset, **kw)
                for _ in range(per):
                    b.append(
                        timestamp=T0 + offset,
                        key=None if offset % 4 == 0 else b"k%d" % offset,
                        value=b"legacy-%d-" % offset + b"y" * (offset % 9),
                    )
                    offset += 1
                data += b.build()
        (part / f"{base:020d}.log").write_bytes(data)


def _real(rel: str) -> Source:
    from shared_fixtures import KAFKA_DATA

    owner, partdir = rel.split("/")
    topic, _, p = partdir.rpartition("-")

    def build(root: Path) -> None:
        src = KAFKA_DATA / owner / partdir
        root.mkdir(parents=True)
        shutil.copytree(src, root / partdir, symlinks=True)
        for f in (root / partdir).iterdir():
            f.chmod(0o644)

    return Source("real:" + rel, topic, int(p), build, real=True)


SEG = ("--config", "internal.segment.bytes=500", "--config", "index.interval.bytes=150")

SOURCES: list[Source] = [
    _kafkalog_source("v2-none", 12, "--batch-size", "150", "--config", "index.interval.bytes=100"),
    _kafkalog_source("v2-none-3seg", 24, "--batch-size", "100", *SEG),
    _kafkalog_source("v2-gzip-3seg", 40, "--codec", "gzip", "--batch-size", "400", *SEG),
    _kafkalog_source("v2-snappy", 16, "--codec", "snappy", "--batch-size", "300"),
    _kafkalog_source("v2-lz4-3seg", 30, "--codec", "lz4", "--batch-size", "400", *SEG),
    _kafkalog_source("v2-zstd", 16, "--codec", "zstd", "--batch-size", "300"),
    Source("v2-txn", "t", 0, _transactional),
    Source("legacy-v0v1", "legacy", 0, _legacy),
    _real("xpxwo100+bullShit/foo-0"),  # magic 1
    _real("seanorth+kafka-server/some-topic-0"),  # snappy, xerial framing
    _real("mscaldas2012+kafka-connect-spooldir/test10-0"),  # lz4, LogAppendTime
    _real("NikhilDighe9975+kafka_setup/__consumer_offsets-12"),  # two segments
    _real("Danielowo2000+BigDataTechnologies-Version-2/_confluent-ksql-default__command_topic-0"),
    _real("William0423+kafka/debug_topic-0"),
]


# ---------------------------------------------------------------------------------------------
# layout and CRCs


@dataclass(frozen=True)
class Entry:
    position: int
    size: int  # whole entry
    magic: int


def entries(data: bytes) -> list[Entry]:
    out = []
    pos = 0
    while len(data) - pos >= 17:
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if size < 14 or pos + 12 + size > len(data):
            break
        out.append(Entry(pos, 12 + size, data[pos + 16]))
        pos += 12 + size
    return out


def layout(partition: Path) -> list[tuple[str, list[Entry]]]:
    """(log file name, entries) of each segment, in base-offset order."""
    logs = sorted(n for n in os.listdir(partition) if SEGMENT.match(n) and n.endswith(".log"))
    return [(n, entries((partition / n).read_bytes())) for n in logs]


def fix_crc(data: bytearray, pos: int) -> None:
    """Recompute the stored CRC of the entry at ``pos`` (v2: CRC-32C of [21, end) at 17;
    legacy: CRC-32 of [16, end) at 12). Nothing when the entry's header is not all there."""
    if pos + 21 > len(data):
        return
    (size,) = struct.unpack_from(">i", data, pos + 8)
    end = min(pos + 12 + max(size, 0), len(data))
    if data[pos + 16] == 2:
        if end < pos + 21:
            return
        struct.pack_into(">I", data, pos + 17, _crc32c.crc32c(bytes(data[pos + 21 : end])))
    else:
        struct.pack_into(">I", data, pos + 12, zlib.crc32(bytes(data[pos + 16 : end])))


# ---------------------------------------------------------------------------------------------
# damages


@dataclass(frozen=True)
class Damage:
    name: str  # family:what
    apply: Callable[[Path], None]  # changes the partition directory

    @property
    def family(self) -> str:
        return self.name.split(":", 1)[0]


def _edit(seg: str, fn: Callable[[bytearray], bytearray | None]) -> Callable[[Path], None]:
    def apply(part: Path) -> None:
        path = part / seg
        data = bytearray(path.read_bytes())
        out = fn(data)
        path.write_bytes(bytes(data if out is None else out))

    return apply


def _truncate(seg: str, at: int):
    return _edit(seg, lambda d: d[:at])


def _flip(seg: str, at: int, mask: int, crc_at: int | None):
    def fn(d: bytearray) -> None:
        if at < len(d):
            d[at] ^= mask
        if crc_at is not None:
            fix_crc(d, crc_at)

    return _edit(seg, fn)


def _put(seg: str, at: int, fmt: str, value: int, crc_at: int | None = None):
    def fn(d: bytearray) -> None:
        if at + struct.calcsize(fmt) > len(d):
            return
        struct.pack_into(fmt, d, at, value)
        if crc_at is not None:
            fix_crc(d, crc_at)

    return _edit(seg, fn)


def _zero(seg: str, start: int, end: int):
    def fn(d: bytearray) -> None:
        d[start:end] = bytes(len(d[start:end]))

    return _edit(seg, fn)


def _append(seg: str, blob_of: Callable[[bytes], bytes]):
    return _edit(seg, lambda d: d + blob_of(bytes(d)))


def _delete_range(seg: str, start: int, end: int):
    return _edit(seg, lambda d: d[:start] + d[end:])


def _write(name: str, content_of: Callable[[Path], bytes]):
    def apply(part: Path) -> None:
        (part / name).write_bytes(content_of(part))

    return apply


def _sample(items: list, k: int) -> list:
    """Up to ``k`` items spread over the list, first and last included."""
    if len(items) <= k:
        return list(items)
    step = (len(items) - 1) / (k - 1)
    return [items[round(i * step)] for i in range(k)]


def _index_damages(part: Path, seg: str, size: int) -> list[Damage]:
    base = int(seg[:20])
    idx, tidx = f"{base:020d}.index", f"{base:020d}.timeindex"
    rnd = random.Random(base)
    garbage = bytes(rnd.randrange(256) for _ in range(64))

    def index(pairs):
        return b"".join(struct.pack(">ii", o, p) for o, p in pairs)

    def tindex(pairs):
        return b"".join(struct.pack(">qi", t, o) for t, o in pairs)

    def truncated(name: str, cut: int):
        def content(p: Path) -> bytes:
            data = (p / name).read_bytes() if (p / name).exists() else index([(1, 0), (2, 0)])
            return data[: max(len(data) - cut, 1)] if len(data) > cut else data + b"\x01\x02\x03"

        return content

    out = [
        Damage(f"index:{idx} garbage", _write(idx, lambda p: garbage)),
        Damage(f"index:{idx} decreasing", _write(idx, lambda p: index([(9, 0), (5, 0), (1, 0)]))),
        Damage(
            f"index:{idx} negative positions", _write(idx, lambda p: index([(1, -70), (3, -1)]))
        ),
        Damage(
            f"index:{idx} past the end",
            _write(idx, lambda p: index([(1, size + 100), (2, size + 4096)])),
        ),
        Damage(f"index:{idx} offsets past 2^31", _write(idx, lambda p: index([(INT32_MAX, 0)]))),
        Damage(f"index:{idx} empty", _write(idx, lambda p: b"")),
        Damage(f"index:{idx} truncated", _write(idx, truncated(idx, 3))),
        Damage(f"index:{tidx} garbage", _write(tidx, lambda p: garbage[:60])),
        Damage(
            f"index:{tidx} decreasing",
            _write(tidx, lambda p: tindex([(T0 + 9000, 9), (T0, 1), (T0 - 5, 0)])),
        ),
        Damage(f"index:{tidx} empty", _write(tidx, lambda p: b"")),
        Damage(f"index:{tidx} truncated", _write(tidx, truncated(tidx, 5))),
    ]
    return out


def grid(part: Path, *, budget: int = 8) -> list[Damage]:
    """The enumerated damages of one partition (``budget``: batches sampled per segment)."""
    segs = layout(part)
    out: list[Damage] = []
    last_seg, last_entries = segs[-1]
    # a segment that is not the last (a middle one when there are three or more)
    middle = segs[max(len(segs) // 2 - (len(segs) % 2 == 0), 0)] if len(segs) > 1 else None
    if middle is not None and len(segs) >= 3 and middle is segs[0]:
        middle = segs[1]
    sizes = {n: (part / n).stat().st_size for n, _ in segs}

    # truncation: at and inside every (sampled) batch of the last segment, and of a middle one
    for e in _sample(last_entries, budget):
        for cut, what in [
            (0, "start"),
            (5, "+5"),
            (16, "+16"),
            (17, "+17"),
            (e.size // 2, "middle"),
            (e.size - 1, "end-1"),
        ]:
            out.append(
                Damage(
                    f"truncate:{last_seg} at {e.position + cut} (batch@{e.position} {what})",
                    _truncate(last_seg, e.position + cut),
                )
            )
    if middle:
        name, ents = middle
        for e in _sample(ents, 3):
            for cut, what in [(0, "start"), (17, "+17"), (e.size // 2, "middle")]:
                out.append(
                    Damage(
                        f"truncate-middle:{name} at {e.position + cut} (batch@{e.position} {what})",
                        _truncate(name, e.position + cut),
                    )
                )

    # bit flips, CRC left wrong and recomputed
    for name, ents in segs:
        for e in _sample(ents, max(2, budget // (2 if name != last_seg else 1))):
            p, s = e.position, e.size
            v2 = e.magic == 2
            crc_field = p + (17 if v2 else 12)
            spots = (
                [
                    (crc_field + 1, "crc"),
                    (p + 21, "attributes"),
                    (p + 24, "lastOffsetDelta"),
                    (p + 40, "maxTimestamp"),
                    (p + 60, "records count"),
                    (p + 61 + (s - 61) // 2, "records middle"),
                    (p + s - 1, "last byte"),
                ]
                if v2
                else [
                    (crc_field + 1, "crc"),
                    (p + 17, "attributes"),
                    (p + s // 2, "middle"),
                    (p + s - 1, "last byte"),
                ]
            )
            for at, what in spots:
                if at >= p + s:
                    continue
                out.append(
                    Damage(
                        f"flip:{name} byte {at} ^0x10 ({what} of batch@{p})",
                        _flip(name, at, 0x10, None),
                    )
                )
                if what != "crc":
                    out.append(
                        Damage(
                            f"flip-crc:{name} byte {at} ^0x10 ({what} of batch@{p}), "
                            "CRC recomputed",
                            _flip(name, at, 0x10, p),
                        )
                    )
                if what in ("records middle", "middle", "last byte"):
                    out.append(
                        Damage(
                            f"flip-crc:{name} byte {at} ^0xff ({what} of batch@{p}), "
                            "CRC recomputed",
                            _flip(name, at, 0xFF, p),
                        )
                    )

    # zeroed ranges, zero-filled tails
    for name, ents in segs:
        for e in _sample(ents, 3):
            p, s = e.position, e.size
            out.append(
                Damage(
                    f"zero:{name} [{p + 20}, {p + s // 2}) (inside batch@{p})",
                    _zero(name, p + 20, p + s // 2),
                )
            )
            out.append(
                Damage(f"zero:{name} [{p}, {p + s}) (all of batch@{p})", _zero(name, p, p + s))
            )
    e = last_entries[-1] if last_entries else None
    out.append(
        Damage(f"zero-tail:{last_seg} + 4096 zero bytes", _append(last_seg, lambda d: bytes(4096)))
    )
    if e:
        out.append(
            Damage(
                f"zero-tail:{last_seg} [{e.position}, end) zeroed + 1000 zero bytes",
                _edit(last_seg, lambda d, e=e: d[: e.position] + bytes(e.size + 1000)),
            )
        )
        out.append(
            Damage(
                f"zero-tail:{last_seg} 16 zero bytes appended",
                _append(last_seg, lambda d: bytes(16)),
            )
        )

    # length fields
    for name, ents in segs:
        for e in _sample(ents, 3 if name == last_seg else 2):
            for value in (0, -1, INT32_MAX, 13, 48, e.size - 12 + 1, e.size - 12 - 1):
                out.append(
                    Damage(
                        f"size:{name} batch@{e.position} size field = {value}",
                        _put(name, e.position + 8, ">i", value),
                    )
                )

    # record offset deltas (CRC-covered) that go back or pass lastOffsetDelta, CRC recomputed
    for name, ents in segs:
        data = (part / name).read_bytes()
        for e in _sample([x for x in ents if x.magic == 2], 2):
            p = e.position
            spots = _delta_bytes(data, p, e.size)
            if len(spots) < 2:
                continue
            (last_delta,) = struct.unpack_from(">i", data, p + 23)
            out.append(
                Damage(
                    f"record-offset:{name} batch@{p} record 1 offsetDelta = 0 (goes back), "
                    "CRC fixed",
                    _put(name, spots[1], ">B", 0, p),
                )
            )
            if last_delta + 1 < 64:  # still one zigzag byte
                out.append(
                    Damage(
                        f"record-offset:{name} batch@{p} last record offsetDelta = "
                        f"{last_delta + 1} (past lastOffsetDelta), CRC fixed",
                        _put(name, spots[-1], ">B", 2 * (last_delta + 1), p),
                    )
                )

    # v2 header fields, CRC recomputed: records count, codec ids, attribute bits
    for name, ents in segs:
        for e in _sample([x for x in ents if x.magic == 2], 2):
            p = e.position
            for value in (0, -1, 1 << 20, INT32_MAX):
                out.append(
                    Damage(
                        f"count:{name} batch@{p} records count = {value}, CRC fixed",
                        _put(name, p + 57, ">i", value, p),
                    )
                )
            out.append(
                Damage(
                    f"count:{name} batch@{p} records count + 1, CRC fixed",
                    _edit(name, _bump(p + 57, ">i", 1, p)),
                )
            )
            for codec in (5, 6, 7):
                for fix in (True, False):
                    out.append(
                        Damage(
                            f"codec:{name} batch@{p} codec id {codec}" + (", CRC fixed" * fix),
                            _edit(name, _attr(p + 21, 0x07, codec, p if fix else None)),
                        )
                    )
            for bit, what in [
                (0x08, "LogAppendTime"),
                (0x10, "transactional"),
                (0x20, "control"),
                (0x40, "delete horizon"),
                (0x8000, "bit 15"),
            ]:
                out.append(
                    Damage(
                        f"attr:{name} batch@{p} toggle {what} (0x{bit:x}), CRC fixed",
                        _edit(name, _xor16(p + 21, bit, p)),
                    )
                )
            out.append(
                Damage(
                    f"attr:{name} batch@{p} lastOffsetDelta = -1, CRC fixed",
                    _put(name, p + 23, ">i", -1, p),
                )
            )
        for e in _sample([x for x in ents if x.magic < 2], 2):
            p = e.position
            for codec in (4, 5, 7):
                out.append(
                    Damage(
                        f"codec:{name} legacy batch@{p} codec id {codec}, CRC fixed",
                        _edit(name, _attr8(p + 17, 0x07, codec, p)),
                    )
                )
            out.append(
                Damage(
                    f"attr:{name} legacy batch@{p} magic = 3",
                    _edit(name, _attr8(p + 16, 0xFF, 3, None)),
                )
            )

    # base offsets
    for name, ents in segs:
        for e in _sample(ents, 3):
            p = e.position
            for value, what in [(INT64_MAX, "2^63-1"), (-1, "-1"), (1 << 62, "2^62")]:
                out.append(
                    Damage(
                        f"offset:{name} batch@{p} base offset = {what}", _put(name, p, ">q", value)
                    )
                )
            if e.magic == 2:
                out.append(
                    Damage(
                        f"offset:{name} batch@{p} base offset = 2^63-1-lastOffsetDelta",
                        _edit(name, _max_base(p)),
                    )
                )
            idx = ents.index(e)
            if idx > 0:
                prev = ents[idx - 1].position
                out.append(
                    Damage(
                        f"offset:{name} batch@{p} base offset = previous batch's",
                        _edit(name, _copy_field(prev, p, 8)),
                    )
                )

    # appended garbage, duplicates, deleted batches
    rnd = random.Random(len(last_entries))
    for n in (5, 16, 17, 40, 300):
        blob = bytes(rnd.randrange(256) for _ in range(n))
        out.append(
            Damage(
                f"append:{last_seg} {n} random bytes (seed {len(last_entries)})",
                _append(last_seg, lambda d, b=blob: b),
            )
        )
    if last_entries:
        e = last_entries[-1]
        out.append(
            Damage(
                f"append:{last_seg} duplicate of its last batch@{e.position}",
                _append(last_seg, lambda d, e=e: d[e.position : e.position + e.size]),
            )
        )
        f = last_entries[0]
        out.append(
            Damage(
                f"append:{last_seg} copy of its first batch@{f.position}",
                _append(last_seg, lambda d, f=f: d[f.position : f.position + f.size]),
            )
        )
    for name, ents in segs:
        if len(ents) >= 3:
            e = ents[len(ents) // 2]
            out.append(
                Damage(
                    f"delete:{name} batch@{e.position} removed (middle)",
                    _delete_range(name, e.position, e.position + e.size),
                )
            )

    # indexes
    for name, _ in segs:
        out.extend(_index_damages(part, name, sizes[name]))

    # files
    out.append(Damage(f"file:{last_seg} emptied", _truncate(last_seg, 0)))
    if middle:
        where = "middle" if len(segs) >= 3 else "not last"
        out.append(Damage(f"file:{middle[0]} emptied ({where})", _truncate(middle[0], 0)))
    if len(segs) >= 3:
        name = segs[1 + (len(segs) - 2) // 2][0]
        out.append(Damage(f"file:{name} removed (middle{_kept(part, name)})", _remove(name)))
    if len(segs) >= 2:
        name = segs[0][0]
        out.append(Damage(f"file:{name} removed (first segment{_kept(part, name)})", _remove(name)))
    nxt = _next_base(part, segs)
    out.append(Damage(f"file:{nxt:020d}.log is a FIFO", _fifo(f"{nxt:020d}.log")))
    out.append(Damage(f"file:{nxt:020d}.log is a symlink loop", _loop(f"{nxt:020d}.log")))
    out.append(Damage(f"file:{nxt:020d}.log is a directory", _mkdir(f"{nxt:020d}.log")))
    return out


def _kept(part: Path, log: str) -> str:
    """What remains of a removed segment: its indexes (a trace of the segment) or nothing."""
    return "; indexes kept" if (part / log.replace(".log", ".index")).exists() else "; no index"


def _bump(at: int, fmt: str, by: int, crc_at: int):
    def fn(d: bytearray) -> None:
        (v,) = struct.unpack_from(fmt, d, at)
        struct.pack_into(fmt, d, at, v + by)
        fix_crc(d, crc_at)

    return fn


def _attr(at: int, mask: int, value: int, crc_at: int | None):
    def fn(d: bytearray) -> None:
        (v,) = struct.unpack_from(">h", d, at)
        struct.pack_into(">h", d, at, (v & ~mask) | value)
        if crc_at is not None:
            fix_crc(d, crc_at)

    return fn


def _attr8(at: int, mask: int, value: int, crc_at: int | None):
    def fn(d: bytearray) -> None:
        d[at] = (d[at] & ~mask & 0xFF) | value
        if crc_at is not None:
            fix_crc(d, crc_at)

    return fn


def _xor16(at: int, bit: int, crc_at: int):
    def fn(d: bytearray) -> None:
        (v,) = struct.unpack_from(">H", d, at)
        struct.pack_into(">H", d, at, v ^ bit)
        fix_crc(d, crc_at)

    return fn


def _max_base(p: int):
    def fn(d: bytearray) -> None:
        (delta,) = struct.unpack_from(">i", d, p + 23)
        struct.pack_into(">q", d, p, INT64_MAX - max(delta, 0))

    return fn


def _varint_end(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def _delta_bytes(data: bytes, p: int, size: int) -> list[int]:
    """Where each record's offsetDelta varint is in the uncompressed v2 batch at ``p``, when
    every one is a single byte (none for a compressed batch, or when framing is odd)."""
    if data[p + 22] & 0x07:
        return []
    out, pos, end = [], p + 61, p + size
    try:
        while pos < end:
            length, body = 0, _varint_end(data, pos)
            shift = 0
            for i in range(pos, body):
                length |= (data[i] & 0x7F) << shift
                shift += 7
            length = (length >> 1) ^ -(length & 1)
            at = _varint_end(data, body + 1)  # past the attributes byte and timestampDelta
            if data[at] & 0x80 or length <= 0:
                return []
            out.append(at)
            pos = body + length
    except IndexError:
        return []
    return out if pos == end else []


def _copy_field(src: int, dst: int, n: int):
    def fn(d: bytearray) -> None:
        d[dst : dst + n] = d[src : src + n]

    return fn


def _remove(name: str):
    def apply(part: Path) -> None:
        (part / name).unlink()

    return apply


def _fifo(name: str):
    def apply(part: Path) -> None:
        os.mkfifo(part / name)

    return apply


def _loop(name: str):
    def apply(part: Path) -> None:
        os.symlink(name, part / name)

    return apply


def _mkdir(name: str):
    def apply(part: Path) -> None:
        (part / name).mkdir()

    return apply


def _next_base(part: Path, segs) -> int:
    """An offset above every record: the base offset a next segment would get."""
    from .expected import scan_file

    last = -1
    for name, _ in segs:
        scan = scan_file(part / name)
        if scan.batches:
            last = max(last, scan.batches[-1].last)
    return max(last + 1, int(segs[-1][0][:20]) + 1)


# ---------------------------------------------------------------------------------------------
# random damage


OPS = ["flip", "flip-crc", "flip-crc", "cut", "zero", "poke"]


def ops_damage(part: Path, ops: list[tuple[str, int, int, int]], label: str) -> Damage | None:
    """A damage made of steps ``(op, segment, at, n)``: ``op`` one of :data:`OPS`, ``segment``
    and ``at`` taken modulo the segment count and the file's size, ``n`` the bit to flip, the
    zeroed length or the word written. None when no step applies (all files empty)."""
    segs = layout(part)
    sizes = [(name, (part / name).stat().st_size) for name, _ in segs]
    steps = []
    for op, seg, at, n in ops:
        si = seg % len(sizes)
        name, size = sizes[si]
        ents = segs[si][1]
        if size == 0:
            continue
        at %= size
        if op == "flip":
            steps.append((f"flip {name} byte {at}", _flip(name, at, 1 << (n % 8), None)))
        elif op == "flip-crc":
            host = max((e.position for e in ents if e.position <= at), default=0)
            steps.append(
                (
                    f"flip {name} byte {at}, CRC of batch@{host} fixed",
                    _flip(name, at, 1 << (n % 8), host),
                )
            )
        elif op == "cut":
            steps.append((f"truncate {name} at {at}", _truncate(name, at)))
            sizes[si] = (name, at)
        elif op == "zero":
            end = min(size, at + 1 + n % 200)
            steps.append((f"zero {name} [{at}, {end})", _zero(name, at, end)))
        else:
            value = n % (1 << 32)
            at = min(at, max(size - 4, 0))
            steps.append((f"write {name} byte {at} = 0x{value:08x}", _put(name, at, ">I", value)))
    if not steps:
        return None

    def apply(p: Path) -> None:
        for _, fn in steps:
            fn(p)

    return Damage(f"{label}: " + "; ".join(s for s, _ in steps), apply)


def random_damages(part: Path, seed: int, n: int) -> list[Damage]:
    """``n`` seeded random damages: one to three of a byte flip (CRC fixed half the time), a cut,
    a zeroed range, four random bytes written, in random segments."""
    out = []
    for k in range(n):
        rnd = random.Random(f"{seed}/{k}")
        ops = [
            (
                rnd.choice(OPS),
                rnd.randrange(1 << 16),
                rnd.randrange(1 << 30),
                rnd.randrange(1 << 32),
            )
            for _ in range(rnd.randint(1, 3))
        ]
        damage = ops_damage(part, ops, f"random:seed {seed}/{k}")
        if damage is not None:
            out.append(damage)
    return out
