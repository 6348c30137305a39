"""The offset rule on the fast path: damaged offsets are damage, never the end of a log.

A v2 batch's baseOffset (and a legacy entry's offset) is not covered by any CRC, so a damaged
one passes CRC validation. Valid logs (kafkalog's builder) get one entry's offset field patched
near 2^63 - 1, negative, or below the previous entry's last offset (or an entry duplicated at the
end); both kernel twins, through decode and through iter_batches, with CRC validation on and
off, must return exactly the records kafka-python decodes before the damaged entry and then raise
CorruptRecordError with its position, or, where the offsets break no rule (or only the order
rule, when it is off), decode everything as kafka-python does. The expected records come from
kafka-python's decoder; the expected error's position from a model of the rule written here.
"""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog.errors import CorruptRecordError, KafkalogError
from kafkalog.format import MemoryRecords, MemoryRecordsBuilder
from kafkalog.format import columnar as fast
from kafkalog.format.crc import crc32c
from kafkalog.format.legacy import encode_legacy_entry

from .fastcheck import (
    TWINS,
    batch_specs,
    build_batch,
    columnar_outcome,
    reference_outcome,
    twin,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
INT64_MAX = (1 << 63) - 1
MAX_LAST = INT64_MAX - 1  # a log's next offset (last + 1) must fit int64
OVERFLOW = "overflow a 64-bit offset"
NEGATIVE = "are negative"


def entries(buf: bytes) -> list[tuple[int, int, int, int]]:
    """``(position, end, base, last)`` of each complete entry (a legacy entry's offsets are its
    own offset field), read here without kafkalog."""
    out, pos = [], 0
    while len(buf) - pos > 17:
        base, size = struct.unpack_from(">qi", buf, pos)
        end = pos + 12 + size
        if end > len(buf):
            break
        last = base + struct.unpack_from(">i", buf, pos + 23)[0] if buf[pos + 16] == 2 else base
        out.append((pos, end, base, last))
        pos = end
    return out


def expected_error(buf: bytes, check_order: bool) -> tuple[int, str, int] | None:
    """The model of the offset rule: ``(position, words, offset)`` of the first entry breaking
    it, or None."""
    previous = None
    for pos, _, base, last in entries(buf):
        if last > MAX_LAST or base > MAX_LAST:
            return pos, OVERFLOW, base
        if base < 0:
            return pos, NEGATIVE, base
        if check_order and previous is not None and base <= previous:
            return pos, f"is not above the previous batch's last offset {previous}", base
        previous = last
    return None


def kafka_python_rows(buf: bytes) -> list[tuple]:
    rows = []
    records = KpMemoryRecords(buf)
    while records.has_next():
        for r in records.next_batch():
            ts = -1 if r.timestamp is None else r.timestamp
            headers = [(k, v) for k, v in getattr(r, "headers", None) or []]
            rows.append((r.offset, ts, r.key, r.value, headers))
    return rows


def rows_of(batches) -> list[tuple]:
    rows = []
    for rb in batches:
        for r in rb.to_pylist():
            headers = [(h["key"], h["value"]) for h in r["headers"]]
            rows.append((r["offset"], r["timestamp"], r["key"], r["value"], headers))
    return rows


def check_decoders(buf: bytes) -> None:
    """Every decoder, both twins, CRC validation on and off, order check on and off."""
    for check_order in (True, False):
        expected = expected_error(buf, check_order)
        good = buf if expected is None else buf[: expected[0]]
        want = kafka_python_rows(good)
        for name in TWINS:
            kernels = twin(name)
            for validate_crc in (False, True):
                options = {"validate_crc": validate_crc, "check_offset_order": check_order}
                decoder = fast.ColumnarDecoder(kernels=kernels)
                got: list = []
                for how in ("decode", "chunks"):
                    try:
                        if how == "decode":
                            got = rows_of([decoder.decode(buf, **options)])
                        else:  # one batch a chunk: the rows before the damage all come out
                            got = []
                            for chunk in decoder.iter_batches(buf, max_rows=1, **options):
                                got += rows_of([chunk])
                    except CorruptRecordError as e:
                        assert expected is not None, (name, how, options, e)
                        pos, words, offset = expected
                        assert words in e.message, (name, how, options, e)
                        assert (e.position, e.offset) == (pos, offset), (name, how, options, e)
                        if how == "chunks":
                            assert got == want, (name, how, options)
                    else:
                        assert expected is None, (name, how, options, expected)
                        assert got == want, (name, how, options)
        # the record-at-a-time path raises the same range errors word for word
        if not check_order:
            ref = reference_outcome(buf, check_offset_order=False)
            for name in TWINS:
                assert columnar_outcome(buf, twin(name), check_offset_order=False) == ref, name


@st.composite
def plain_logs(draw) -> bytes:
    """A valid log of 1-5 specs (no control batches, which kafka-python reads differently),
    from an offset far enough from 0 that patches below a previous entry stay positive."""
    specs = draw(st.lists(batch_specs(), min_size=1, max_size=5))
    out = bytearray()
    offset = draw(st.integers(1 << 20, 1 << 40))
    for spec in specs:
        spec["control"] = False
        out += build_batch(spec, offset)
        offset += len(spec["records"])
    return bytes(out)


@st.composite
def damaged_logs(draw) -> bytes:
    buf = bytearray(draw(plain_logs()))
    found = entries(bytes(buf))
    kind = draw(st.sampled_from(["max", "overflow", "fits", "negative", "below", "duplicate"]))
    if kind == "duplicate":
        pos, end, _, _ = draw(st.sampled_from(found))
        return bytes(buf + buf[pos:end])
    k = draw(st.integers(0 if kind != "below" else 1, len(found) - 1)) if len(found) > 1 else 0
    pos, _, base, last = found[k]
    delta = last - base
    if kind == "max":
        new = INT64_MAX
    elif kind == "overflow":
        new = MAX_LAST - delta + draw(st.integers(1, 3))
    elif kind == "fits":
        new = MAX_LAST - delta
    elif kind == "negative":
        new = draw(st.sampled_from([-1, -2, -(1 << 40), -(1 << 63)]))
    else:
        new = found[k - 1][3] - draw(st.integers(0, 3)) if k else base
    if not -(1 << 63) <= new <= INT64_MAX:
        new = INT64_MAX
    struct.pack_into(">q", buf, pos, new)
    return bytes(buf)


@given(buf=plain_logs())
@SETTINGS
def test_valid_logs_decode_as_kafka_python_with_the_rule_on(buf):
    assert expected_error(buf, True) is None
    check_decoders(buf)


@given(buf=damaged_logs())
@SETTINGS
def test_damaged_offsets_raise_at_the_damaged_entry_after_kafka_pythons_records(buf):
    check_decoders(buf)


# -- the fuzz run's reproducer -----------------------------------------------------------------


def _log_of_400() -> tuple[bytes, list[int]]:
    out, positions, offset = bytearray(), [], 0
    sizes = [3, 9, 5, 1, 12, 7, 3, 10] * 20
    for n in sizes:
        if offset >= 400:
            break
        n = min(n, 400 - offset)
        b = MemoryRecordsBuilder(base_offset=offset)
        for i in range(n):
            b.append(timestamp=1000 + offset + i, key=b"k%d" % i, value=b"v" * (i + 1))
        positions.append(len(out))
        out += b.build()
        offset += n
    return bytes(out), positions


@pytest.mark.parametrize("which", [0, 1, 2, 17, -1])
def test_a_batch_at_base_offset_int64_max_is_a_typed_error_never_the_end(which):
    log, positions = _log_of_400()
    assert len(kafka_python_rows(log)) == 400
    pos = positions[which]
    bad = bytearray(log)
    struct.pack_into(">q", bad, pos, INT64_MAX)
    bad = bytes(bad)
    before = kafka_python_rows(bad[:pos])
    for name in TWINS:
        for validate_crc in (False, True):
            decoder = fast.ColumnarDecoder(kernels=twin(name))
            with pytest.raises(CorruptRecordError, match=OVERFLOW) as e:
                decoder.decode(bad, validate_crc=validate_crc)
            assert (e.value.position, e.value.offset) == (pos, INT64_MAX)
            with pytest.raises(CorruptRecordError, match=OVERFLOW) as e:
                decoder.decode(bad, validate_crc=validate_crc, position_base=4096)
            assert e.value.position == 4096 + pos
            got = []
            with pytest.raises(CorruptRecordError, match=OVERFLOW):
                for chunk in decoder.iter_batches(bad, max_rows=1, validate_crc=validate_crc):
                    got += rows_of([chunk])
            assert got == before
    with pytest.raises(CorruptRecordError, match=OVERFLOW) as e:  # the facade's twin
        fast.decode_columnar(bad, validate_crc=True)
    assert e.value.position == pos
    with pytest.raises(CorruptRecordError) as ref:  # the record-at-a-time path: same error
        list(MemoryRecords(bad).records())
    assert (str(ref.value), type(ref.value)) == (str(e.value), type(e.value))


def test_offset_bounds_past_int64_are_bounds_not_overflow_errors():
    log, _ = _log_of_400()
    for name in TWINS:
        decoder = fast.ColumnarDecoder(kernels=twin(name))
        assert decoder.decode(log, end_offset=INT64_MAX + 10).num_rows == 400
        assert decoder.decode(log, start_offset=-(1 << 70)).num_rows == 400
        assert decoder.decode(log, start_offset=1 << 64).num_rows == 0


# -- the rule's other cases, crafted -------------------------------------------------------------


def _v2(base: int, deltas: list[int], last_delta: int, codec: str = "none") -> bytes:
    """A v2 batch whose records have the offset deltas ``deltas`` and whose header says
    ``last_delta`` (CRC recomputed: lastOffsetDelta is inside it)."""
    b = MemoryRecordsBuilder(base_offset=0, compression=codec)
    for i, _ in enumerate(deltas):
        b.append(timestamp=10 + i, key=b"k", value=b"v%d" % i)
    raw = bytearray(b.build())
    if deltas != list(range(len(deltas))):
        raise ValueError("the builder writes deltas 0..n-1")
    struct.pack_into(">q", raw, 0, base)
    struct.pack_into(">i", raw, 23, last_delta)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def _kp_batch(deltas: list[int], codec: int, base: int) -> bytes:
    """A batch written by kafka-python's builder with these record offset deltas (its
    lastOffsetDelta is the last one appended), rebased to ``base`` (outside the CRC)."""
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i, delta in enumerate(deltas):
        builder.append(delta, 10 + i, b"k", b"v%d" % i, [])
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, base)
    return bytes(raw)


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize(
    ("deltas", "words"),
    [
        ([0, 3, 2], "is past the batch's lastOffsetDelta 2"),
        ([0, 2, 1, 3], "is not above the previous record's 2"),
        ([1, 1, 2], "is not above the previous record's 1"),
        ([-1, 0, 2], "is negative"),
    ],
)
@pytest.mark.parametrize("base", [0, MAX_LAST - 3])
def test_record_offsets_out_of_order_or_past_the_batch_are_damage_alike_everywhere(
    codec, deltas, words, base
):
    """The CRC covers record offset deltas, so only a writer's bug makes them go back or pass
    lastOffsetDelta: kafka-python decodes such a batch as it stands (offsets from its own
    decoder), and every kafkalog path refuses it with the same error, near 2^63 too (where a
    record past the batch's last offset would pass a log's)."""
    batch = _kp_batch(deltas, codec, base)
    decoded = [r.offset for r in KpMemoryRecords(batch).next_batch()]
    assert decoded == [base + d for d in deltas]  # the damage, as an independent decoder sees it
    ref = reference_outcome(batch, check_offset_order=False)
    assert ref[0] == "error" and words in ref[2], ref
    assert ref[4] == base
    for name in TWINS:
        for validate_crc in (False, True):
            assert columnar_outcome(batch, twin(name), validate_crc=validate_crc) == ref


def _wrapper(magic: int, wrapper_offset: int, inner_offsets: list[int]) -> bytes:
    inner = b"".join(
        encode_legacy_entry(offset=o, magic=magic, key=b"k", value=b"v%d" % i, timestamp=5)
        for i, o in enumerate(inner_offsets)
    )
    return encode_legacy_entry(
        offset=wrapper_offset, magic=magic, key=None, value=gzip.compress(inner), timestamp=5,
        compression=1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("magic", "wrapper_offset", "inner", "words", "first", "last"),
    [
        (0, 10, [-3, -2], NEGATIVE, -3, -2),  # magic 0: inner offsets are absolute
        (1, 0, [-1, 0], NEGATIVE, -1, 0),  # wrapper offset 0: inner offsets as they are
        (1, MAX_LAST, [5, 0], OVERFLOW, MAX_LAST, MAX_LAST + 5),  # relative, out of order
        (1, 3, [-4, 0], NEGATIVE, -1, 3),
    ],
)
def test_legacy_wrappers_absolute_inner_offsets_must_fit_alike_everywhere(
    magic, wrapper_offset, inner, words, first, last
):
    entry = _wrapper(magic, wrapper_offset, inner)
    ref = reference_outcome(entry, check_offset_order=False)
    assert ref[0] == "error", ref
    assert f"Batch offsets {first} to {last} {words}" in ref[2]
    assert (ref[1], ref[3], ref[4]) == ("CorruptRecordError", 0, wrapper_offset)
    for name in TWINS:
        for validate_crc in (False, True):
            assert columnar_outcome(entry, twin(name), validate_crc=validate_crc) == ref


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_messages_with_offset_zero_each_pass_only_with_the_order_check_off(magic):
    """Old clients may send every message of a produce request at offset 0."""
    data = b"".join(
        encode_legacy_entry(offset=0, magic=magic, key=b"k", value=b"v%d" % i, timestamp=5)
        for i in range(3)
    )
    for name in TWINS:
        decoder = fast.ColumnarDecoder(kernels=twin(name))
        rows = decoder.decode(data, check_offset_order=False).to_pylist()
        assert [r["offset"] for r in rows] == [0, 0, 0]
        with pytest.raises(CorruptRecordError, match="previous batch's last offset 0") as e:
            decoder.decode(data)
        assert (e.value.position, e.value.offset) == (len(data) // 3, 0)


def test_client_batches_all_at_base_offset_zero_decode_with_the_order_check_off():
    parts = []
    for i in range(3):
        b = MemoryRecordsBuilder(base_offset=0)
        b.append(timestamp=i, key=b"k", value=b"v%d" % i)
        parts.append(b.build())
    data = b"".join(parts)
    for name in TWINS:
        for chunk_rows in (1, 100):
            decoder = fast.ColumnarDecoder(kernels=twin(name))
            chunks = decoder.iter_batches(data, max_rows=chunk_rows, check_offset_order=False)
            assert [r[0] for r in rows_of(chunks)] == [0, 0, 0]
            with pytest.raises(KafkalogError, match="not above the previous batch"):
                list(decoder.iter_batches(data, max_rows=chunk_rows))
