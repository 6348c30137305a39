"""The valid prefix of a partition, computed with kafka-python alone (never from kafkalog).

Walk the partition's segments in base-offset order; in each ``.log`` walk the entries (8-byte
offset, 4-byte size, then size bytes; magic at byte 16). A batch is valid when its framing is
complete, its size is at least the minimum (14 for magic 0/1, 61 - 12 for magic 2), its magic is
0..2, its CRC checks (kafka-python's ``validate_crc``, and every inner message's for legacy
wrappers), its records decode with kafka-python (offsets increasing inside the batch's range, key
and value inside the message), its offsets fit a log (base >= 0, last <= 2^63-2: the log's next
offset, last + 1, must fit int64) and its first offset is above the previous valid batch's last
offset. The prefix is every record of every batch before the first invalid one.

Where kafka-python is stricter than Kafka, Kafka's reading decides: a data batch with the control
bit set is a control batch to Kafka's consumer (its records are skipped, not an error), so its
records are decoded with the bit cleared and marked control; a legacy key size below -1 is a null
key (LegacyRecord.key()); a header key that is not UTF-8 is decoded as Kafka's client decodes it
(``new String(bytes, UTF_8)``: a replacement character for each malformed sequence), where
kafka-python would raise. A batch whose CRC matches but whose records' offsets go back or leave
the batch's range is damage (Kafka's consumer would silently drop the records below its
position).

The first problem is classified:

- ``clean``: none;
- ``torn-tail``: in the LAST segment, and from there to the end of the file there are 17 bytes
  or fewer (Kafka's FileLogInputStream stops there), or only zero bytes, or an entry whose
  declared size runs past the end, unless that size is more than a broker accepts
  (max.message.bytes, 1048588) or a whole batch with a matching CRC starts inside the bytes it
  claims: then its size field is damaged, not torn;
- ``damage``: anything else (also: a ``.log`` that is not a regular readable file, a segment
  whose ``.log`` is gone while its index remains).

Indexes are never read here: they are hints, the expected records are the ``.log`` files'.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

__all__ = ["Expected", "FileScan", "Rec", "expected_for", "scan_file", "segment_names"]

INT64_MAX = (1 << 63) - 1
LOG_OVERHEAD = 12
HEADER_NEEDED = 17  # offset, size, leader epoch / crc, magic
MIN_LEGACY = 14  # size field minimum, magic 0 (CRC 4, magic 1, attributes 1, key 4, value 4)
MIN_V2 = 61 - 12
MAX_MESSAGE_BYTES = 1048588  # Kafka's max.message.bytes default: no broker writes a bigger batch
SEGMENT = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


@dataclass(frozen=True)
class Rec:
    """A record as compared between readers: kafka-python's view."""

    offset: int
    timestamp: int  # -1 when none (magic 0)
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((str, bytes | None), ...)
    control: bool = False

    def short(self) -> str:
        def b(x):
            if x is None:
                return "null"
            return repr(x[:12] + (b"..." if len(x) > 12 else b""))

        head = f"{self.offset}@{self.timestamp}"
        return f"{head} k={b(self.key)} v={b(self.value)} h={len(self.headers)}"


@dataclass
class Batch:
    position: int
    size: int  # whole entry, 12-byte prefix included
    first: int
    last: int
    records: list[Rec]
    control: bool


@dataclass
class FileScan:
    """One ``.log`` walked alone (``prev_last`` carried in from earlier segments)."""

    name: str
    size: int
    batches: list[Batch] = field(default_factory=list)
    problem: str | None = None  # the rule the first invalid entry broke
    position: int | None = None  # where that entry starts
    end: int | None = None  # where it ends (its claimed end, capped at the file's size)
    tail: bool = False  # the problem is a torn/zero/short tail (if in the last segment)
    undetermined: bool = False  # bytes Kafka reads and kafka-python refuses: nothing to compare
    zeros: bool = False  # the tail is all zero bytes
    odd_control: bool = False  # a control batch whose records are not control records
    unreadable: bool = False  # not a regular readable file (FIFO, symlink loop, ...)

    @property
    def records(self) -> list[Rec]:
        return [r for b in self.batches for r in b.records]


@dataclass
class Expected:
    kind: str  # clean | torn-tail | damage | undetermined
    records: list[Rec]  # the valid prefix, control records included
    file: str | None = None  # segment file name of the first problem
    position: int | None = None
    end: int | None = None
    reason: str = ""
    unreadable: bool = False  # the problem is a file that cannot be read or is gone (no position)
    files: dict[str, FileScan] = field(default_factory=dict)  # each .log scanned alone (dump)
    later: list[Rec] = field(default_factory=list)  # records of valid batches past the problem

    @property
    def data_records(self) -> list[Rec]:
        return [r for r in self.records if not r.control]

    def describe(self) -> str:
        where = f" in {self.file} at position {self.position}" if self.file else ""
        n = len(self.records)
        return f"{self.kind}{where} ({self.reason or 'no problem'}); prefix {n} records"


class Invalid(Exception):
    pass


class Undetermined(Exception):
    """Bytes Kafka reads but kafka-python refuses (a legacy message key size below -1)."""


def segment_names(partition: Path) -> list[tuple[int, str, bool]]:
    """(base offset, log file name, whether the .log exists) for every segment, in order. A
    segment whose ``.log`` is gone but whose ``.index``/``.timeindex`` remains is listed too."""
    bases: dict[int, bool] = {}
    for name in os.listdir(partition):
        m = SEGMENT.match(name)
        if not m:
            continue
        base = int(m.group(1))
        has_log = m.group(2) == "log"
        bases[base] = bases.get(base, False) or has_log
    return [(b, f"{b:020d}.log", bases[b]) for b in sorted(bases)]


def _read(path: Path) -> bytes:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(path)  # raises on a loop
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file")
    return path.read_bytes()


class _JavaStrings(bytearray):
    """A records buffer for kafka-python's record reader that decodes strings (header keys) as
    Java's ``new String(bytes, UTF_8)`` does, malformed sequences replaced, where kafka-python's
    own ``decode("utf-8")`` raises. Slices keep the type, so the reader's slice-then-decode
    reaches :meth:`decode`."""

    def __getitem__(self, index):
        got = super().__getitem__(index)
        return _JavaStrings(got) if isinstance(index, slice) else got

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self).decode(encoding, "replace")


def _v2_records(entry: bytes) -> tuple[int, int, list[Rec], bool]:
    batch = DefaultRecordBatch(entry)
    if not batch.validate_crc():
        raise Invalid("crc mismatch")
    base = batch.base_offset
    delta = batch.last_offset_delta
    count = batch.records_count
    if base < 0:
        raise Invalid("negative base offset")
    if delta < 0:
        raise Invalid("negative lastOffsetDelta")
    if count < 0:
        raise Invalid("negative records count")
    last = base + delta
    if last > INT64_MAX - 1:
        raise Invalid("last offset past 2^63-2 (the next offset would not fit int64)")
    ctype = batch.compression_type
    if ctype > 4:
        raise Invalid(f"codec id {ctype}")
    control = batch.is_control_batch
    if control:  # Kafka's consumer skips a control batch's records whatever their keys hold
        plain = bytearray(entry)
        plain[22] &= ~0x20 & 0xFF  # the attributes' low byte: control bit cleared
        batch = DefaultRecordBatch(bytes(plain))
    try:
        batch._maybe_uncompress()  # the records section, decompressed, as the reader reads it
    except Exception as e:
        raise Invalid(f"records do not decompress: {type(e).__name__}: {e}") from None
    batch._buffer = _JavaStrings(batch._buffer)
    out: list[Rec] = []
    prev = base - 1
    try:
        for r in batch:
            if r.offset <= prev or r.offset > last:
                # Record offsets go back, or pass the batch's last offset, inside a batch whose
                # CRC matches: damage (Kafka's consumer would silently drop the lower ones).
                raise Invalid(
                    f"record offset {r.offset} outside [{base}, {last}] or not increasing"
                )
            prev = r.offset
            out.append(
                Rec(
                    r.offset,
                    r.timestamp,
                    r.key,
                    r.value,
                    tuple((k, v) for k, v in r.headers),
                    control,
                )
            )
    except Invalid:
        raise
    except Exception as e:
        raise Invalid(f"records do not decode: {type(e).__name__}: {e}") from None
    if len(out) != count:
        raise Invalid("records count")
    return base, last, out, control


def _legacy_records(entry: bytes, magic: int) -> tuple[int, int, list[Rec]]:
    try:
        batch = LegacyRecordBatch(entry, magic)
    except AssertionError:
        raise Invalid("legacy header") from None
    if not batch.validate_crc():
        raise Invalid("crc mismatch")
    if batch.compression_type > 3:
        raise Invalid(f"legacy codec id {batch.compression_type}")
    _check_legacy_message(entry[LOG_OVERHEAD:], magic, wrapper=True)
    out: list[Rec] = []
    prev = -1
    try:
        records = list(batch)
        for r in records:
            if not r.validate_crc():
                raise Invalid("inner message crc mismatch")
            if r.offset <= prev:
                raise Invalid("inner offsets not increasing")
            prev = r.offset
            ts = -1 if r.timestamp is None else r.timestamp
            out.append(Rec(r.offset, ts, r.key, r.value, ()))
        if batch.compression_type:
            inner = batch._buffer  # decompressed message set
            pos = 0
            while pos < len(inner):
                (size,) = struct.unpack_from(">i", inner, pos + 8)
                if size < MIN_LEGACY or pos + LOG_OVERHEAD + size > len(inner):
                    raise Invalid("inner message framing")
                inner_magic = inner[pos + 16]
                if inner_magic != magic:
                    raise Invalid("inner magic differs from the wrapper's")
                _check_legacy_message(
                    bytes(inner[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]),
                    magic,
                    wrapper=False,
                )
                pos += LOG_OVERHEAD + size
    except Invalid:
        raise
    except Exception as e:
        if _negative_key_size(entry[LOG_OVERHEAD:], magic):  # a null key to Kafka
            raise Undetermined(f"kafka-python refuses a key size below -1: {e}") from None
        raise Invalid(f"records do not decode: {type(e).__name__}: {e}") from None
    if not out:
        raise Invalid("no records")
    (entry_offset,) = struct.unpack_from(">q", entry, 0)
    first, last = out[0].offset, out[-1].offset
    if first < 0 or entry_offset != last:
        raise Invalid("wrapper offset is not its last inner offset")
    if last > INT64_MAX - 1:
        raise Invalid("last offset past 2^63-2 (the next offset would not fit int64)")
    return first, last, out


def _negative_key_size(msg: bytes, magic: int) -> bool:
    pos = 4 + 1 + 1 + (8 if magic == 1 else 0)
    return len(msg) >= pos + 4 and struct.unpack_from(">i", msg, pos)[0] < -1


def _check_legacy_message(msg: bytes, magic: int, *, wrapper: bool) -> None:
    """A legacy message's key and value lie inside it (kafka-python slices without checking)."""
    pos = 4 + 1 + 1 + (8 if magic == 1 else 0)
    if len(msg) < pos + 8:
        raise Invalid("legacy message too short")
    (ksize,) = struct.unpack_from(">i", msg, pos)
    pos += 4
    pos += max(ksize, 0)  # any negative size is a null key (Kafka's LegacyRecord.key())
    if pos + 4 > len(msg):
        raise Invalid("key past the message")
    (vsize,) = struct.unpack_from(">i", msg, pos)
    pos += 4
    if vsize < -1:
        raise Invalid("negative value size")
    if pos + max(vsize, 0) != len(msg):
        raise Invalid("value does not end the message")
    if not wrapper and msg[5] & 0x07:
        raise Invalid("nested compression")


def scan_file(path: Path, prev_last: int = -1) -> FileScan:
    """Walk one ``.log``; stops at the first invalid entry."""
    name = path.name
    try:
        data = _read(path)
    except OSError as e:
        return FileScan(name, 0, problem=f"unreadable: {e}", position=0, end=0, unreadable=True)
    scan = FileScan(name, len(data))
    pos = 0
    n = len(data)
    while pos < n:
        rest = n - pos
        scan.zeros = data.count(0, pos) == rest
        if rest <= HEADER_NEEDED:  # FileLogInputStream: position + 17 >= end is the end
            scan.problem, scan.position, scan.end, scan.tail = (
                f"{rest} bytes: too few for an entry header",
                pos,
                n,
                True,
            )
            break
        if data.count(0, pos) == rest:
            scan.problem, scan.position, scan.end, scan.tail = "zero-filled tail", pos, n, True
            break
        (size,) = struct.unpack_from(">i", data, pos + 8)
        magic = data[pos + 16]
        if size >= 0 and pos + LOG_OVERHEAD + size > n:
            why = _damaged_size(data, pos, size)
            scan.problem, scan.position, scan.end, scan.tail = (
                why or f"entry of size {size} runs past the end of the file",
                pos,
                n,
                why is None,
            )
            break
        end = pos + LOG_OVERHEAD + max(size, 0)
        try:
            if magic > 2:
                raise Invalid(f"magic {magic}")
            if size < (MIN_V2 if magic == 2 else MIN_LEGACY):
                raise Invalid(f"size {size} below the minimum")
            entry = data[pos:end]
            if magic == 2:
                first, last, recs, control = _v2_records(entry)
                if control and any(r.key is None or len(r.key) < 4 for r in recs):
                    scan.odd_control = True  # Kafka's dump fails parsing its control keys
            else:
                first, last, recs = _legacy_records(entry, magic)
                control = False
            if first <= prev_last:
                raise Invalid(f"first offset {first} not above the previous batch's {prev_last}")
        except Invalid as e:
            scan.problem, scan.position, scan.end = str(e), pos, min(max(end, pos + 17), n)
            break
        except Undetermined as e:
            scan.problem, scan.position, scan.undetermined = str(e), pos, True
            break
        scan.batches.append(Batch(pos, end - pos, first, last, recs, control))
        prev_last = last
        pos = end
    return scan


def _damaged_size(data: bytes, pos: int, size: int) -> str | None:
    """Why an entry claiming more bytes than are left is a damaged size field and not a torn
    append (None: it may be the append a crash cut)."""
    if size + LOG_OVERHEAD > MAX_MESSAGE_BYTES:
        return f"size {size} past max.message.bytes: the size field is damaged"
    n = len(data)
    for i in range(pos + 1, n - 61 + 1):
        if data[i + 16] != 2:
            continue
        (length,) = struct.unpack_from(">i", data, i + 8)
        if length < MIN_V2 or i + LOG_OVERHEAD + length > n:
            continue
        (crc,) = struct.unpack_from(">I", data, i + 17)
        if crc32c(data[i + 21 : i + LOG_OVERHEAD + length]) == crc:
            return f"a whole batch at {i} inside the claimed bytes: the size field is damaged"
    return None


def expected_for(partition: Path) -> Expected:
    segments = segment_names(partition)
    records: list[Rec] = []
    files: dict[str, FileScan] = {}
    prev_last = -1
    result: Expected | None = None
    for i, (_, name, has_log) in enumerate(segments):
        last_segment = i == len(segments) - 1
        path = partition / name
        alone = scan_file(path) if has_log else None
        if alone is not None:
            files[name] = alone
        if result is not None:
            continue
        if not has_log:
            result = Expected("damage", records, name, 0, 0, "segment .log is gone", True)
            continue
        scan = scan_file(path, prev_last)
        records.extend(scan.records)
        if scan.batches:
            prev_last = scan.batches[-1].last
        if scan.problem is None:
            continue
        kind = "torn-tail" if scan.tail and last_segment else "damage"
        if scan.undetermined:
            kind = "undetermined"
        result = Expected(
            kind, records, name, scan.position, scan.end, scan.problem, scan.unreadable
        )
    if result is None:
        result = Expected("clean", records)
    result.files = files
    result.later = _later(partition, segments, result)
    return result


def _later(partition: Path, segments, result: Expected) -> list[Rec]:
    """Records of batches past the problem that are valid on their own, in log order."""
    if result.kind == "clean":
        return []
    out: list[Rec] = []
    started = False
    for _, name, has_log in segments:
        if name == result.file:
            started = True
            if not has_log:
                continue
            try:
                data = _read(partition / name)
            except OSError:
                continue
            out.extend(_valid_entries(data, result.position or 0))
            continue
        if started and has_log:
            try:
                data = _read(partition / name)
            except OSError:
                continue
            out.extend(_valid_entries(data, 0))
    return out


def _valid_entries(data: bytes, start: int) -> list[Rec]:
    """Records of entries framed from ``start`` that are valid alone (offset order not checked);
    framing stops where it breaks."""
    out: list[Rec] = []
    pos = start
    n = len(data)
    while n - pos > HEADER_NEEDED:
        (size,) = struct.unpack_from(">i", data, pos + 8)
        magic = data[pos + 16]
        if size < MIN_LEGACY or pos + LOG_OVERHEAD + size > n or magic > 2:
            break
        end = pos + LOG_OVERHEAD + size
        try:
            if magic == 2:
                if size < MIN_V2:
                    raise Invalid("size")
                out.extend(_v2_records(data[pos:end])[2])
            else:
                out.extend(_legacy_records(data[pos:end], magic)[2])
        except Invalid:
            pass
        except Exception:
            pass
        pos = end
    return out
