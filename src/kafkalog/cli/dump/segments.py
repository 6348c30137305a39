"""Dumps of files holding record batches: segments, their leftovers, KRaft snapshots.

Text output reproduces kafka-dump-log's lines (DumpLogSegments.dumpLog, Kafka 4.4) byte for byte,
so scripts written for it keep working.
JSON output is one object per batch and record (docs/cli.md holds the contract).
"""

from __future__ import annotations

import os
import struct

from ...errors import CorruptRecordError, InvalidRecordError, KafkalogError
from ...format import Batch, RecordsScan, Tail
from ...format import columnar as fast
from ...format.record import Record
from ...log.datadir import parse_snapshot_file_name
from ...log.errors import InvalidFileNameError
from ...log.verify import hidden_records_problem, partial_tail_problem
from ..progress import Progress
from .batches import (
    batch_line,
    batch_object,
    control_data,
    control_problem,
    record_line,
    record_object,
)
from .columnar import MetadataLineWindows, metadata_lines, records_of
from .file_dump import FileDump, open_buffer, segment_start_offset
from .message_parsers import Parsed

__all__ = ["LogDump"]

_ENTRY_OFFSET = struct.Struct(">q")


class LogDump(FileDump):
    """One ``.log`` (or ``.checkpoint``) file: a header line, batches, records, trailing bytes."""

    _cut_inside_entry = False  # --max-bytes stopped inside an entry that the file holds whole

    def dump(self, progress: Progress) -> None:
        with open_buffer(self.path) as buf:
            limit = self.options.max_bytes
            view = buf if limit is None else buf[:limit]
            try:
                self._dump(view, buf, truncated=limit is not None, progress=progress)
            finally:
                del view

    @property
    def _metadata_lines_only(self) -> bool:
        """Text with each record's metadata line and nothing else (no data, no decoders)."""
        o = self.options
        return not (o.json or o.print_data or o.skip_metadata or o.decoded)

    def _dump(
        self, view: memoryview, whole: memoryview, *, truncated: bool, progress: Progress
    ) -> None:
        self.begin()
        scan = RecordsScan(view)
        decoder = fast.ColumnarDecoder()  # one for the file: its arrays are reused
        windows = MetadataLineWindows(view, decoder) if self._metadata_lines_only else None
        batches = records = 0
        done = 0
        last_offset = -1
        for batch in scan:
            batches += 1
            # A legacy wrapper's first offset and count need its decompressed inner messages.
            try:
                base_offset, count = batch.base_offset, batch.count
                inner_error = None
            except KafkalogError as e:
                base_offset, count = batch.last_offset, 0
                inner_error = e.located(position=batch.position, offset=batch.last_offset)
            records += count
            valid = batch.is_valid  # once: the batch line and the error below both need it
            try:
                self.batch(batch, base_offset, count, valid)
            except KafkalogError as e:
                # A header Kafka cannot read (a codec id no version defines, 5-7 in magic 2,
                # 4-7 in magic 1): reported like other damage, the dump goes on.
                self.error(e.located(position=batch.position, offset=base_offset))
                size = batch.size_in_bytes
                done += size
                progress.advance(size)
                continue
            if not valid:
                stored, computed = batch.crc, batch.compute_checksum()
                self.error(
                    KafkalogError(
                        f"Record is corrupt (stored crc = {stored}, computed crc = {computed})",
                        position=batch.position,
                        offset=base_offset,
                    )
                )
            if inner_error is not None:
                self.error(inner_error)
            elif self.options.deep and count == 0 and batch.is_compressed and valid:
                hidden = hidden_records_problem(batch)  # records Kafka's readers never return
                if hidden is not None:
                    self.error(
                        InvalidRecordError(hidden[1], position=batch.position, offset=base_offset)
                    )
            elif self.options.deep:
                lines = None
                try:
                    if windows is not None:
                        lines = windows.lines(batch) or metadata_lines(batch, decoder)
                    batch_records = [] if lines is not None else records_of(batch, decoder)
                except KafkalogError as e:
                    self.error(e.located(position=batch.position, offset=base_offset))
                    batch_records = []
                if lines is not None:
                    offsets, text = lines
                    run = isinstance(offsets, range)  # each the one before plus one
                    for offset in offsets[:1] if run else offsets:  # as in the loop below
                        if offset != last_offset + 1:
                            self.reports.add(
                                self.reports.non_consecutive, self.path, (last_offset, offset)
                            )
                        last_offset = offset
                    if run and offsets:
                        last_offset = offsets[-1]
                    self.out.write(text)
                for record in batch_records:
                    # kafka-dump-log's rule (4.3+): the first record of a file follows -1, so
                    # a file whose records do not start at offset 0 (any segment but the first,
                    # a cleaned one) begins with "-1 is followed by FIRST".
                    if record.offset != last_offset + 1:
                        self.reports.add(
                            self.reports.non_consecutive, self.path, (last_offset, record.offset)
                        )
                    last_offset = record.offset
                    try:
                        self.record(batch, record)
                    except KafkalogError as e:
                        self.error(e.located(position=batch.position, offset=record.offset))
            size = batch.size_in_bytes
            done += size
            progress.advance(size)
        progress.advance(len(view) - done)
        problem = self._tail_problem(scan, whole, truncated)
        if problem is not None:
            self.error(problem)
        self.end(scan, batches, records, truncated)

    def _tail_problem(
        self, scan: RecordsScan, whole: memoryview, truncated: bool
    ) -> KafkalogError | None:
        """What is wrong where the walk stopped, judged on the whole file: where --max-bytes
        cut an entry, the bytes read so far may look like a torn or zero tail but are not."""
        at = scan.valid_bytes
        if truncated and scan.tail in (Tail.PARTIAL, Tail.ZEROS) and at < len(whole):
            peek = RecordsScan(whole[at:], position_base=at)
            if next(iter(peek), None) is not None:
                self._cut_inside_entry = True
                return None  # a complete entry of the file starts where --max-bytes cut
            scan = peek
        if scan.tail == Tail.PARTIAL:
            damage = partial_tail_problem(
                whole,
                at,
                max_batch_size=self.options.max_message_size,
                limit_name="--max-message-size",
            )
            if damage is None:
                return None  # a torn append: kafka-dump-log's "Found N invalid bytes" line
            offset = _ENTRY_OFFSET.unpack_from(whole, at)[0]
            return CorruptRecordError(damage, position=at, offset=offset)
        return scan.error

    # -- output ---------------------------------------------------------------------------------

    def begin(self) -> None:
        if self.options.json:
            return
        name = os.path.basename(self.path)
        if name == "bootstrap.checkpoint":
            self.line("KRaft bootstrap snapshot")
        elif name.endswith((".checkpoint", ".checkpoint.deleted")):
            try:
                snapshot = parse_snapshot_file_name(name)
            except InvalidFileNameError:
                snapshot = None  # kafka-dump-log fails here; the records can still be read
            if snapshot is not None:
                self.line(f"Snapshot end offset: {snapshot.end_offset}, epoch: {snapshot.epoch}")
        else:
            start = segment_start_offset(name)
            if start is not None:
                self.line(f"Log starting offset: {start}")

    def batch(self, batch: Batch, base_offset: int, count: int, valid: bool) -> None:
        if self.options.json:
            self.emit(batch_object(batch, base_offset, count, valid))
        else:
            self.line(batch_line(batch, base_offset, count, valid))

    def _parsed(self, batch: Batch, record: Record, wanted: bool) -> Parsed | None:
        if not wanted or batch.is_control:
            return None
        parsed = self.options.parser.parse(record)
        if parsed.problem is not None:
            self.error(parsed.problem.located(position=batch.position, offset=record.offset))
        return parsed

    def record(self, batch: Batch, record: Record) -> None:
        opts = self.options
        if batch.is_control:
            problem = control_problem(record)
            if problem is not None:
                self.error(problem.located(position=batch.position, offset=record.offset))
        if opts.json:
            obj = record_object(batch, record)
            parsed = self._parsed(batch, record, opts.decoded)
            obj["decodedKey"] = None if parsed is None else parsed.key_json
            obj["decodedValue"] = None if parsed is None else parsed.value_json
            obj["decodeError"] = None if parsed is None else parsed.note
            obj["controlData"] = control_data(record) if batch.is_control else None
            self.emit(obj)
            return
        parsed = self._parsed(batch, record, opts.print_data)
        self.line(record_line(batch, record, skip_metadata=opts.skip_metadata, parsed=parsed))

    def end(self, scan: RecordsScan, batches: int, records: int, truncated: bool) -> None:
        if self.options.json:
            self.emit(
                {
                    "type": "summary",
                    "batches": batches,
                    "records": records,
                    "validBytes": scan.valid_bytes,
                    "invalidBytes": scan.invalid_bytes,
                    "tail": Tail.PARTIAL if self._cut_inside_entry else scan.tail,
                    "error": self.errors[0].message if self.errors else None,
                }
            )
        elif scan.invalid_bytes > 0 and not truncated:
            name = os.path.basename(self.path)
            self.line(f"Found {scan.invalid_bytes} invalid bytes at the end of {name}")
