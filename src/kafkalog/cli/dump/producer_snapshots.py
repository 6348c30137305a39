"""Dumps of producer snapshots (``.snapshot``): one line per producer, as kafka-dump-log prints it
(DumpLogSegments.dumpProducerIdSnapshot); a corrupt snapshot is reported where kafka-dump-log
prints a stack trace."""

from __future__ import annotations

from ...log.datadir import open_regular
from ...log.producer import CorruptSnapshotError, ProducerStateEntry, decode_snapshot
from ..progress import Progress
from ..remote import is_url
from .file_dump import SegmentFileDump, optional_long

__all__ = ["ProducerSnapshotDump", "producer_entry_line", "producer_entry_object"]


class ProducerSnapshotDump(SegmentFileDump):
    """``.snapshot``: one line per producer, as kafka-dump-log 3.9/4.x prints it."""

    def dump(self, progress: Progress) -> None:
        if is_url(self.path):
            from ...log.storage import as_path

            data = as_path(self.path).read_bytes()
        else:
            with open_regular(self.path) as f:
                data = f.read()
        progress.advance(len(data))
        try:
            entries = decode_snapshot(data, path=self.path)
        except CorruptSnapshotError as e:
            self.error(e)
            entries = []
        self.entries = len(entries)
        for entry in entries:
            if self.options.json:
                self.emit(producer_entry_object(entry))
            else:
                self.line(producer_entry_line(entry))
        self.summary()


def producer_entry_line(entry: ProducerStateEntry) -> str:
    """kafka-dump-log's line (Kafka 4.3+: no space after lastTimestamp without a batch)."""
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} "
        f"currentTxnFirstOffset: {optional_long(entry.current_txn_first_offset)} "
        f"lastTimestamp: {entry.last_timestamp}"
    )
    if entry.batch_metadata:
        batch = entry.batch_metadata[0]
        line += (
            " "
            f"firstSequence: {batch.first_seq} lastSequence: {batch.last_seq} "
            f"lastOffset: {batch.last_offset} offsetDelta: {batch.offset_delta} "
            f"timestamp: {batch.timestamp}"
        )
    return line


def producer_entry_object(entry: ProducerStateEntry) -> dict:
    """The ``producerEntry`` object of the JSON contract (docs/cli.md)."""
    batch = entry.batch_metadata[0] if entry.batch_metadata else None
    return {
        "type": "producerEntry",
        "producerId": entry.producer_id,
        "producerEpoch": entry.producer_epoch,
        "coordinatorEpoch": entry.coordinator_epoch,
        "currentTxnFirstOffset": entry.current_txn_first_offset,
        "lastTimestamp": entry.last_timestamp,
        "firstSequence": None if batch is None else batch.first_seq,
        "lastSequence": None if batch is None else batch.last_seq,
        "lastOffset": None if batch is None else batch.last_offset,
        "offsetDelta": None if batch is None else batch.offset_delta,
        "timestamp": None if batch is None else batch.timestamp,
    }
