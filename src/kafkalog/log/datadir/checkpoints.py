"""Kafka's text checkpoint files (CheckpointFile.java, OffsetCheckpointFile.java,
LeaderEpochCheckpointFile.java).

Layout (UTF-8, ``\\n`` line ends)::

    0                       <- version
    2                       <- entry count
    my-topic 0 1234         <- one entry per line: offset checkpoints "topic partition offset"
    my-topic 1 99                                  leader-epoch-checkpoint "epoch startOffset"

Offset checkpoints sit at the root of a log dir (recovery-point-offset-checkpoint,
log-start-offset-checkpoint, replication-offset-checkpoint, cleaner-offset-checkpoint); a
leader-epoch-checkpoint sits in each partition dir.

Reading follows Kafka: an empty file, or one holding only the version line, has no entries;
lines end at ``\\n``, ``\\r`` or ``\\r\\n``; entry fields are split on runs of whitespace (a
leading blank makes an extra empty field, as Java's String.split does); numbers are Java ints or
longs (optional sign, ASCII digits). Any break (bad version, malformed line, count mismatch)
raises :class:`CorruptCheckpointError` naming the file and line.

Every write is atomic, as Kafka's: ``<file>.tmp`` is written, flushed and fsynced, renamed over the
target, and the directory is fsynced so the rename itself survives a crash
(:func:`write_file_atomically`, shared by the other metadata files).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..errors import CorruptCheckpointError
from .bounded_json import DEFAULT_MAX_BYTES, read_bounded_bytes
from .naming import TopicPartition, validate_partition, validate_topic

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CURRENT_VERSION",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "MAX_CHECKPOINT_LINES",
    "OFFSET_CHECKPOINT_FILES",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "EpochEntry",
    "encode_checkpoint_file",
    "encode_leader_epoch_checkpoint",
    "encode_offset_checkpoint",
    "parse_java_int",
    "read_checkpoint_file",
    "read_leader_epoch_checkpoint",
    "read_offset_checkpoint",
    "read_offset_checkpoint_or_reset",
    "read_text_file",
    "split_lines",
    "write_checkpoint_file",
    "write_file_atomically",
    "write_leader_epoch_checkpoint",
    "write_offset_checkpoint",
]

T = TypeVar("T")

CURRENT_VERSION = 0
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

# Far beyond any broker (a line per partition of the data directory, or per leader epoch),
# and it keeps a hostile file from becoming millions of Python strings.
MAX_CHECKPOINT_LINES = 4_000_000

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_LINE_END = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\x0b\f]+")  # Java's \s, minus the line ends already split on


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEntry:
    """A leader epoch and the first offset written in it (Kafka's EpochEntry)."""

    epoch: int
    start_offset: int


# ---------------------------------------------------------------------------------------------
# Shared file helpers


def write_file_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` so a crash leaves the old or the new file, never a mix.

    ``<path>.tmp`` is written, flushed and fsynced, renamed over ``path``, then the directory is
    fsynced (Kafka's write + Utils.atomicMoveWithFallback). The temporary is removed on failure.
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:  # platforms that cannot open a directory (Windows) cannot fsync one either
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_text_file(
    path: str | os.PathLike, *, encoding: str = "utf-8", max_bytes: int = DEFAULT_MAX_BYTES
) -> str:
    """The file's text; undecodable bytes raise :class:`CorruptCheckpointError` (not
    UnicodeDecodeError), and so does a file over ``max_bytes`` (never read whole into memory).
    Only a regular file is opened (a FIFO would block: NotRegularFileError, an OSError). A
    missing file raises FileNotFoundError: absence is the caller's call."""
    data = read_bounded_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CorruptCheckpointError(
            f"bytes at {e.start} are not valid {encoding}: {e.reason}",
            path=os.fspath(path),
            line=line,
        ) from None


def split_lines(text: str) -> list[str]:
    """Lines as Java's BufferedReader.readLine yields them: ends are ``\\n``, ``\\r`` or ``\\r\\n``;
    a final line end does not start another line."""
    if not text:
        return []
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def parse_java_int(text: str, *, what: str, path: str, line: int, bits: int = 32) -> int:
    """Integer.parseInt / Long.parseLong, failing with :class:`CorruptCheckpointError`."""
    low, high = _INT32 if bits == 32 else _INT64
    if not _JAVA_INT.fullmatch(text):
        raise CorruptCheckpointError(
            f"malformed {what}: {text!r} is not an integer", path=path, line=line
        )
    value = int(text)
    if not low <= value <= high:
        kind = "an int" if bits == 32 else "a long"
        raise CorruptCheckpointError(f"{what} {value} does not fit in {kind}", path=path, line=line)
    return value


def _java_split(line: str) -> list[str]:
    """Java's ``line.split("\\\\s+")``: trailing empty fields dropped, a leading one kept."""
    parts = _JAVA_WHITESPACE.split(line)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


# ---------------------------------------------------------------------------------------------
# The generic format


def read_checkpoint_file(
    path: str | os.PathLike,
    *,
    version: int,
    parse_entry: Callable[[list[str], str, int], T],
) -> list[T]:
    """Entries of a checkpoint file in the version/count/lines format.

    ``parse_entry(fields, path, line_number)`` turns one whitespace-split line into an entry and
    raises :class:`CorruptCheckpointError` when it cannot.
    """
    where = os.fspath(path)
    text = read_text_file(path)
    line_ends = text.count("\n") + text.count("\r")
    if line_ends > MAX_CHECKPOINT_LINES:
        raise CorruptCheckpointError(
            f"{line_ends} lines, more than the {MAX_CHECKPOINT_LINES} kafkalog reads in a "
            f"checkpoint (one line per partition or leader epoch): not a file Kafka writes",
            path=where,
        )
    lines = split_lines(text)
    if not lines:
        return []
    read_version = parse_java_int(lines[0], what="version", path=where, line=1)
    if read_version != version:
        raise CorruptCheckpointError(
            f"unrecognised version {read_version}, expected version {version}", path=where, line=1
        )
    if len(lines) == 1:
        return []
    expected = parse_java_int(lines[1], what="entry count", path=where, line=2)
    if expected < 0:
        raise CorruptCheckpointError(f"negative entry count {expected}", path=where, line=2)
    entries = [
        parse_entry(_java_split(text), where, n) for n, text in enumerate(lines[2:], start=3)
    ]
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"expected {expected} entries (the count on line 2) but found {len(entries)}",
            path=where,
            line=2,
        )
    return entries


def encode_checkpoint_file(*, version: int, lines: Iterable[str]) -> bytes:
    """The bytes of a checkpoint file: ``version``, the count, then ``lines`` (without ends)."""
    body = list(lines)
    for text in body:
        if "\n" in text or "\r" in text:
            raise ValueError(f"checkpoint entry {text!r} contains a line end")
    return ("\n".join([str(version), str(len(body)), *body]) + "\n").encode("utf-8")


def write_checkpoint_file(path: str | os.PathLike, *, version: int, lines: Iterable[str]) -> None:
    """Atomically write :func:`encode_checkpoint_file`."""
    write_file_atomically(path, encode_checkpoint_file(version=version, lines=lines))


def _malformed(fields: list[str], path: str, line: int, expected: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"malformed line {' '.join(fields)!r}: expected {expected}", path=path, line=line
    )


# ---------------------------------------------------------------------------------------------
# Offset checkpoints


def _parse_offset_entry(fields: list[str], path: str, line: int) -> tuple[TopicPartition, int]:
    if len(fields) != 3 or not fields[0]:
        raise _malformed(fields, path, line, "'topic partition offset'")
    partition = parse_java_int(fields[1], what="partition", path=path, line=line)
    offset = parse_java_int(fields[2], what="offset", path=path, line=line, bits=64)
    return TopicPartition(fields[0], partition), offset


def read_offset_checkpoint(path: str | os.PathLike) -> dict[TopicPartition, int]:
    """Offsets by partition, in file order (a repeated partition keeps its last offset, as
    Kafka's map does)."""
    entries = read_checkpoint_file(path, version=CURRENT_VERSION, parse_entry=_parse_offset_entry)
    return dict(entries)


def read_offset_checkpoint_or_reset(
    path: str | os.PathLike,
) -> tuple[dict[TopicPartition, int], CorruptCheckpointError | None]:
    """A data directory's offset checkpoint as a broker's startup reads it: a missing file has
    no entries, and so has a malformed one, with the error returned for a warning (Kafka's
    LogManager resets recovery points to 0 and log start offsets to the first segments' bases,
    then recovers, rather than refusing to start; the next checkpoint rewrites the file)."""
    if not os.path.exists(path):
        return {}, None
    try:
        return read_offset_checkpoint(path), None
    except CorruptCheckpointError as e:
        return {}, e


def encode_offset_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    """An offset checkpoint's bytes, entries in the mapping's order."""
    lines = []
    for tp, offset in offsets.items():
        validate_topic(tp.topic)  # a space in a topic would break the line format
        validate_partition(tp.partition)
        _check_range(offset, _INT64, "offset")
        lines.append(f"{tp.topic} {tp.partition} {offset}")
    return encode_checkpoint_file(version=CURRENT_VERSION, lines=lines)


def write_offset_checkpoint(path: str | os.PathLike, offsets: Mapping[TopicPartition, int]) -> None:
    """Atomically write an offset checkpoint, entries in the mapping's order."""
    write_file_atomically(path, encode_offset_checkpoint(offsets))


# ---------------------------------------------------------------------------------------------
# leader-epoch-checkpoint


def _parse_epoch_entry(fields: list[str], path: str, line: int) -> EpochEntry:
    if len(fields) != 2:
        raise _malformed(fields, path, line, "'epoch startOffset'")
    epoch = parse_java_int(fields[0], what="epoch", path=path, line=line)
    start_offset = parse_java_int(fields[1], what="start offset", path=path, line=line, bits=64)
    return EpochEntry(epoch=epoch, start_offset=start_offset)


def read_leader_epoch_checkpoint(path: str | os.PathLike) -> list[EpochEntry]:
    """The epoch entries of a leader-epoch-checkpoint, in file order."""
    return read_checkpoint_file(path, version=CURRENT_VERSION, parse_entry=_parse_epoch_entry)


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    """A leader-epoch-checkpoint's bytes."""
    lines = []
    for entry in entries:
        _check_range(entry.epoch, _INT32, "epoch")
        _check_range(entry.start_offset, _INT64, "start offset")
        lines.append(f"{entry.epoch} {entry.start_offset}")
    return encode_checkpoint_file(version=CURRENT_VERSION, lines=lines)


def write_leader_epoch_checkpoint(path: str | os.PathLike, entries: Iterable[EpochEntry]) -> None:
    """Atomically write a leader-epoch-checkpoint."""
    write_file_atomically(path, encode_leader_epoch_checkpoint(entries))


def _check_range(value: int, bounds: tuple[int, int], what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{what} must be an int in {bounds[0]}..{bounds[1]}, got {value!r}")
