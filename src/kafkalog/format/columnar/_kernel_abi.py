"""The contract between the columnar driver and its two kernel twins (pure and compiled).

Both ``_pure.kernels`` and the C extension ``_compiled`` (built from ``_speedups/*.c``) export the
same functions and must
return the same tuples for the same input; the C file repeats these numbers as ``#define``\\ s and
exports them so a test can check that the two agree.

A *sink* is the set of growable numpy output arrays, in the slot order below; a kernel appends
records to it and keeps its fill levels in the ``STATE`` array. Every kernel returns
``(status, pos, code, a, b, c, entry_pos)``: ``status`` says why it stopped, ``pos`` where (an
entry start, or an error's byte position), ``code`` and ``a``..``c`` an error's rule and values
(or which buffer needs to grow, and to what), ``entry_pos`` the entry being read. Kernels never
raise for bad bytes and never format messages: the driver turns codes into kafkalog's
exceptions, so both twins raise identical errors.
"""

from __future__ import annotations

import operator

ABI_VERSION = 15

# -- output slots (sink arrays, in this order) ---------------------------------------------------
OFFSET = 0  # int64[R]
TIMESTAMP = 1  # int64[R]
TIMESTAMP_TYPE = 2  # int32[R]
KEY_OFFSETS = 3  # int32[R + 1], Arrow binary offsets
KEY_VALID = 4  # uint8[R]
KEY_DATA = 5  # uint8[...]
VALUE_OFFSETS = 6  # int32[R + 1]
VALUE_VALID = 7  # uint8[R]
VALUE_DATA = 8  # uint8[...]
HEADER_OFFSETS = 9  # int32[R + 1], Arrow list offsets into the header rows
HKEY_OFFSETS = 10  # int32[H + 1]
HKEY_DATA = 11  # uint8[...]
HVAL_OFFSETS = 12  # int32[H + 1]
HVAL_VALID = 13  # uint8[H]
HVAL_DATA = 14  # uint8[...]
PRODUCER_ID = 15  # int64[R]
PRODUCER_EPOCH = 16  # int16[R]
SEQUENCE = 17  # int32[R]
IS_TRANSACTIONAL = 18  # uint8[R]
IS_CONTROL = 19  # uint8[R]
PARTITION_LEADER_EPOCH = 20  # int32[R]
STATE = 21  # int64[STATE_SIZE], fill levels below
NUM_SLOTS = 22

# -- STATE indexes --------------------------------------------------------------------------------
ST_ROWS = 0
ST_KEY_BYTES = 1
ST_VALUE_BYTES = 2
ST_HEADERS = 3
ST_HKEY_BYTES = 4
ST_HVAL_BYTES = 5
# Null keys among the rows, null values, null header values. While one is 0, its validity array
# (KEY_VALID, VALUE_VALID, HVAL_VALID) may be unwritten: every item is valid.
ST_KEY_NULLS = 6
ST_VALUE_NULLS = 7
ST_HVAL_NULLS = 8
# Bit k set: batch-level column k (below) has one value in every row, ST_SHARED_VALUES + k, and
# its array has not been written (the driver makes a constant array); clear: the array holds it.
ST_SHARED = 9
ST_SHARED_VALUES = 10
# The offset rule's memory (kafkalog.format.offsets_rule): the last offset of the entry before the
# one the walk resumes at, and whether there is one (0 at a walk's start). The walk keeps them up
# to date as it moves past entries; the driver sets them after an entry it decoded itself
# (DECOMPRESS) and carries them into a new chunk's state.
ST_PREV_LAST = 17
ST_HAS_PREV = 18
STATE_SIZE = 19

# -- batch-level columns, by their bit in ST_SHARED -----------------------------------------------
B_TIMESTAMP_TYPE = 0
B_PRODUCER_ID = 1
B_PRODUCER_EPOCH = 2
B_SEQUENCE = 3
B_IS_TRANSACTIONAL = 4
B_IS_CONTROL = 5
B_PARTITION_LEADER_EPOCH = 6
BATCH_COLUMNS = 7
BATCH_SLOTS = (
    TIMESTAMP_TYPE,
    PRODUCER_ID,
    PRODUCER_EPOCH,
    SEQUENCE,
    IS_TRANSACTIONAL,
    IS_CONTROL,
    PARTITION_LEADER_EPOCH,
)

# -- statuses ------------------------------------------------------------------------------------
END = 0  # reached the end of the buffer or a partial trailing entry (at pos)
DECOMPRESS = 1  # the entry at pos is compressed: the driver decompresses it (a..c: see driver)
ROWS_FULL = 2  # max_rows reached before the entry at pos
NEED_SPACE = 3  # buffer group ``code`` must hold at least ``a`` (restart at pos)
RANGE_END = 4  # the entry at pos starts at or after end_offset
ERROR = 5  # bad bytes: rule ``code`` with values a..c at byte pos, in the entry at entry_pos

# -- NEED_SPACE buffer groups --------------------------------------------------------------------
GROW_ROWS = 0
GROW_KEY_DATA = 1
GROW_VALUE_DATA = 2
GROW_HEADERS = 3
GROW_HKEY_DATA = 4
GROW_HVAL_DATA = 5

# -- decode flags ---------------------------------------------------------------------------------
# With FLAG_VALIDATE_CRC the kernels check each v2 batch's CRC-32C and each magic 0/1 message's
# CRC-32 (inner messages of compressed wrappers included) before anything else of it: E_CRC.
FLAG_VALIDATE_CRC = 1
FLAG_KEEP_CONTROL = 2
# With FLAG_CHECK_ORDER the entry walk also checks that each entry's first offset is above the
# previous entry's last offset (E_OFFSET_ORDER): a log's offsets increase. Off for client produce
# requests. The range of each entry's offsets (E_OFFSETS, E_INNER_OFFSETS) is always checked.
FLAG_CHECK_ORDER = 4

# -- error rules (a, b, c are the values each message needs) -------------------------------------
E_ENTRY_SIZE = 1  # a=size, b=offset
E_MAGIC = 2  # a=magic, b=offset
E_BATCH_SIZE = 3  # a=batch size, b=offset
E_COUNT_NEGATIVE = 4  # a=count
E_COUNT_TOO_LARGE = 5  # a=count, b=bytes of records
E_VARINT_EOF = 6  # a=field
E_VARINT_LONG = 7  # a=field, b=max bytes
E_RECORD_SIZE_OVERRUN = 8  # a=length, b=bytes left
E_RECORD_SIZE_SMALL = 9  # a=length
E_KEY_OVERRUN = 10  # a=size, b=bytes left
E_VALUE_OVERRUN = 11  # a=size, b=bytes left
E_HEADERS_NEGATIVE = 12  # a=count
E_HEADERS_TOO_MANY = 13  # a=count, b=bytes left
E_HKEY_SIZE = 14  # a=size
E_HVAL_OVERRUN = 15  # a=size
E_RECORD_PAYLOAD = 16  # a=length, b=bytes read
E_RECORDS_REMAINING = 17  # a=bytes left, b=count
E_CRC = 18  # a=stored, b=computed (a v2 batch or a legacy message; its offset is read at pos)
E_LEGACY_MSG_SIZE = 19  # a=size, b=magic
E_LEGACY_OVERRUN = 20  # a=field (0 key, 1 value), b=size, c=bytes left
E_LEGACY_CODEC = 21  # a=codec, b=magic
E_LEGACY_NULL_WRAPPER = 22  # a=magic
E_INNER_STRAY = 23  # a=bytes left
E_INNER_SIZE = 24  # a=byte offset in the set, b=size, c=bytes left
E_INNER_MAGIC = 25  # a=inner magic, b=wrapper magic
E_INNER_NESTED = 26
E_INNER_EMPTY = 27
E_WRAPPER_OFFSET = 28  # a=wrapper offset, b=last inner offset
# The offset rule (offsets_rule.py); an entry's last offset must be at most 2^63 - 2:
E_OFFSETS = 29  # a=base offset, b=delta: a v2 batch's offsets a..a+b overflow, or a < 0 (a
#                 legacy entry: a=its offset, b=0); its records' lie within (E_RECORD_OFFSET)
E_OFFSET_ORDER = 30  # a=base offset, b=the previous entry's last offset (FLAG_CHECK_ORDER)
E_INNER_OFFSETS = 31  # a=lowest, b=highest inner offset of a legacy wrapper's set, c=the inner
#                       offset that maps to the wrapper offset (absolute = inner + wrapper - c;
#                       c=the wrapper offset when inner offsets are absolute): out of range
E_BATCH_HEADER = 32  # a=lastOffsetDelta, b=recordsCount: a v2 header that disagrees with itself
#                      (offsets_rule.check_batch_header: delta < 0, or count > delta + 1)
E_CODEC = 33  # a=codec id, b=offset: a v2 batch's codec id above 4 (skipped batches too)
E_RECORD_OFFSET = 34  # a=offset delta, b=the previous record's (-1 for the first), c=the batch's
#                       lastOffsetDelta: record offset deltas increase within [0, lastOffsetDelta]

# Varint fields named in E_VARINT_* messages, by index (record.py's words).
VARINT_FIELDS = (
    "record length",
    "timestamp delta",
    "offset delta",
    "key length",
    "value length",
    "header count",
    "header key length",
    "header value length",
)
F_RECORD_LENGTH, F_TIMESTAMP_DELTA, F_OFFSET_DELTA, F_KEY_LENGTH = 0, 1, 2, 3
F_VALUE_LENGTH, F_HEADER_COUNT, F_HKEY_LENGTH, F_HVAL_LENGTH = 4, 5, 6, 7

# -- encode: per-batch plan columns (int64[5 * B]) -----------------------------------------------
PLAN_START = 0  # first row of the batch
PLAN_COUNT = 1  # rows in the batch
PLAN_BYTES = 2  # size of its (uncompressed) records section
PLAN_FIRST_TS = 3  # first record's timestamp: the batch's baseTimestamp
PLAN_MAX_TS = 4  # its max timestamp
PLAN_WIDTH = 5

# -- valid_prefix_run (the valid-prefix walk of kafkalog.log.segment.valid_prefix, a window at a
# time): statuses, and the int64 columns of a row per accepted batch (positions in the window)
VP_END = 0  # a partial entry or the end of the window at pos
VP_STOP = 1  # the entry at pos is for the walk to judge (legacy, a marker, or a rule broken)
VP_FULL = 2  # out is full before the entry at pos
VP_POSITION, VP_SIZE, VP_BASE_OFFSET, VP_LAST_OFFSET = 0, 1, 2, 3
VP_MAX_TIMESTAMP, VP_LEADER_EPOCH, VP_PRODUCER_ID = 4, 5, 6
VP_WIDTH = 7

# -- frame_run (entries.framed_run's framing, a window at a time): int64 pairs of a row per entry
FR_END, FR_OFFSET = 0, 1  # where the entry ends (positions in the buffer), its offset field
FR_WIDTH = 2

# -- decode_records_v2's batch fields, out of a v2 header unpacked whole (constants.BATCH_HEADER):
# count, base offset, base and max timestamps, attributes, base sequence, producer id and epoch,
# leader epoch, then lastOffsetDelta (which the kernel takes after the offset range)
records_v2_fields = operator.itemgetter(12, 0, 7, 8, 5, 11, 9, 10, 2, 6)
