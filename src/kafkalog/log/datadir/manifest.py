"""The commit of a write to a data directory in object storage: a manifest, written last.

Object stores have no rename, so a write cannot be moved into place; objects are put under
their Kafka names (``<topic>-<n>/<base offset>.log`` and the files beside it) where readers can
list them, and made part of the directory by one put: the manifest
``kafkalog-manifest-<commit, 20 digits>.json`` in the data directory, naming every committed
object and, per partition, its segments (base offset and size) and log start and end offsets.
Readers of a directory that has manifests read only what the newest one lists
(:func:`newest_manifest`: the dataset planner, the command-line readers and verify): objects of
a write that has not committed, or that died, are invisible. Committed objects are never
rewritten: an append starts new segments at the log end offset, so a reader's plan stays valid
while the next write runs.

A writer remembers the newest commit it started from and refuses to commit over a newer one
(:class:`ConcurrentCommitError`): one writer at a time per directory, checked, not locked (a
put-if-absent is not in every store's API), so two commits in the same moment can still race.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from ...errors import ConcurrentCommitError, KafkalogError
from ..storage import RemotePath, as_path, put_bytes
from .naming import TopicPartition, log_dir_name

__all__ = [
    "MANIFEST_PREFIX",
    "MANIFEST_SUFFIX",
    "ConcurrentCommitError",
    "Manifest",
    "PartitionEntry",
    "is_manifest_name",
    "manifest_name",
    "newest_manifest",
    "write_manifest",
]

MANIFEST_PREFIX = "kafkalog-manifest-"
MANIFEST_SUFFIX = ".json"
FORMAT = 1


@dataclass(frozen=True)
class PartitionEntry:
    """A committed partition: its segments ``(base offset, size)`` by base offset."""

    log_start_offset: int
    log_end_offset: int
    segments: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Manifest:
    """One commit of a data directory in object storage (``commit`` counts from 1)."""

    url: str
    commit: int
    partitions: dict[TopicPartition, PartitionEntry] = field(default_factory=dict)
    objects: tuple[str, ...] = ()  # every committed object, relative to the data directory
    write_id: str = ""

    def bases(self, tp: TopicPartition) -> set[int] | None:
        entry = self.partitions.get(tp)
        return None if entry is None else {base for base, _ in entry.segments}

    def files(self, tp: TopicPartition) -> frozenset[str] | None:
        """The names of ``tp``'s committed files in its partition directory (None: the commit
        has no such partition)."""
        if tp not in self.partitions:
            return None
        prefix = f"{log_dir_name(tp)}/"
        return frozenset(n[len(prefix) :] for n in self.objects if n.startswith(prefix))


def _by_partition(item) -> tuple[str, int]:
    return item[0].topic, item[0].partition


def manifest_name(commit: int) -> str:
    return f"{MANIFEST_PREFIX}{commit:020d}{MANIFEST_SUFFIX}"


def is_manifest_name(name: str) -> bool:
    """Whether ``name`` is a manifest's (``kafkalog-manifest-<commit>.json``)."""
    return _commit_of(name) is not None


def _commit_of(name: str) -> int | None:
    if name.startswith(MANIFEST_PREFIX) and name.endswith(MANIFEST_SUFFIX):
        digits = name[len(MANIFEST_PREFIX) : -len(MANIFEST_SUFFIX)]
        if digits.isdigit():
            return int(digits)
    return None


def newest_manifest(data_dir) -> Manifest | None:
    """The newest commit of the data directory ``data_dir`` (a URL or :class:`RemotePath`),
    or None when it has no manifest (a copy uploaded as it is on a disk, or nothing yet)."""
    root = as_path(data_dir)
    if not isinstance(root, RemotePath) or not root.is_dir():
        return None
    commits = [(c, p) for p in root.iterdir() if (c := _commit_of(p.name)) is not None]
    if not commits:
        return None
    commit, path = max(commits, key=lambda cp: cp[0])
    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
        partitions = {
            TopicPartition(e["topic"], int(e["partition"])): PartitionEntry(
                int(e["logStartOffset"]),
                int(e["logEndOffset"]),
                tuple((int(b), int(s)) for b, s in e["segments"]),
            )
            for e in doc["partitions"]
        }
        if doc.get("format") != FORMAT or int(doc["commit"]) != commit:
            raise ValueError(f"format {doc.get('format')}, commit {doc.get('commit')}")
    except (ValueError, KeyError, TypeError) as e:
        raise KafkalogError(
            f"not a kafkalog manifest this version reads ({e})", path=str(path)
        ) from None
    return Manifest(str(root), commit, partitions, tuple(doc.get("objects", ())),
                    doc.get("writeId", ""))  # fmt: skip


def write_manifest(manifest: Manifest) -> str:
    """Put ``manifest`` (the commit point of its write); its URL."""
    doc = {
        "format": FORMAT,
        "commit": manifest.commit,
        "writeId": manifest.write_id,
        "committedAtMs": int(time.time() * 1000),
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "directory": log_dir_name(tp),
                "logStartOffset": e.log_start_offset,
                "logEndOffset": e.log_end_offset,
                "segments": [list(s) for s in e.segments],
            }
            for tp, e in sorted(manifest.partitions.items(), key=_by_partition)
        ],
        "objects": sorted(manifest.objects),
    }
    url = f"{manifest.url}/{manifest_name(manifest.commit)}"
    put_bytes(url, (json.dumps(doc, indent=1) + "\n").encode())
    return url
