"""decode_entries with the driver's inflater: compressed v2 batches are inflated and appended inside
the walk (one kernel call for a run of them), and anything unusual about one (an exception from
the inflater, records that do not decode, a full buffer, an input that is not a byte view) hands
that batch back to the driver as DECOMPRESS with the sink as it was before it, in both twins.
"""

from __future__ import annotations

import pytest

from kafkalog.errors import CorruptRecordError
from kafkalog.format import CompressionType, MemoryRecordsBuilder
from kafkalog.format import columnar as fast
from kafkalog.format.codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from kafkalog.format.columnar import _kernel_abi as A
from kafkalog.format.columnar.inflate import Inflater

from .fastcheck import TWINS, twin

LO, HI, NO_LIMIT = -(2**63), 2**63 - 1, 2**62
CODECS = [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD]


def log_of(codecs: list[CompressionType], per_batch: int = 5) -> tuple[bytes, list[int]]:
    """Batches of ``per_batch`` records, one per codec; the log and each batch's position."""
    out, starts = bytearray(), []
    for i, codec in enumerate(codecs):
        b = MemoryRecordsBuilder(compression=codec, base_offset=i * per_batch)
        for j in range(per_batch):
            b.append(timestamp=1_700_000_000_000 + j, key=b"k%d" % j, value=b"v" * (j + 1))
        starts.append(len(out))
        out += b.build()
    return bytes(out), starts


def walk(name: str, buf, inflate) -> tuple[tuple, int]:
    """decode_entries over all of ``buf`` with ``inflate``: (its result, rows appended)."""
    kernels = twin(name)
    sink = fast.ColumnarDecoder(kernels=kernels)._acquire(len(buf), NO_LIMIT)
    result = kernels.decode_entries(
        sink.sink, buf, 0, len(buf), LO, HI, NO_LIMIT, 0, inflate, DEFAULT_MAX_DECOMPRESSED_SIZE
    )
    return result, sink.rows()


@pytest.mark.parametrize("name", TWINS)
def test_a_run_of_compressed_batches_is_one_call(name):
    log, _ = log_of([*CODECS, CompressionType.NONE, *CODECS])
    result, rows = walk(name, memoryview(log), Inflater().inflate)
    assert result[:2] == (A.END, len(log))
    assert rows == 5 * 9


@pytest.mark.parametrize("name", TWINS)
def test_without_an_inflater_the_walk_stops_at_the_first_compressed_batch(name):
    log, starts = log_of([CompressionType.NONE, CompressionType.LZ4])
    result, rows = walk(name, memoryview(log), None)
    assert result[:2] == (A.DECOMPRESS, starts[1])
    assert rows == 5


@pytest.mark.parametrize("name", TWINS)
def test_an_input_that_is_not_a_byte_view_goes_back_to_the_driver(name):
    log, starts = log_of([CompressionType.GZIP])
    result, rows = walk(name, log, Inflater().inflate)  # bytes: a slice would copy
    assert result[:2] == (A.DECOMPRESS, starts[0])
    assert rows == 0


@pytest.mark.parametrize("name", TWINS)
def test_an_inflater_exception_hands_the_batch_back_with_the_sink_untouched(name):
    log, starts = log_of([CompressionType.LZ4, CompressionType.SNAPPY, CompressionType.ZSTD])
    real = Inflater()

    def inflate(codec, data, magic, max_size):
        if codec == CompressionType.SNAPPY:
            raise ValueError("refused")
        return real.inflate(codec, data, magic, max_size)

    result, rows = walk(name, memoryview(log), inflate)
    assert result[:2] == (A.DECOMPRESS, starts[1])
    assert rows == 5


@pytest.mark.parametrize("name", TWINS)
def test_records_that_do_not_decode_hand_the_batch_back_with_the_sink_untouched(name):
    log, starts = log_of([CompressionType.GZIP, CompressionType.ZSTD])
    real = Inflater()

    def inflate(codec, data, magic, max_size):
        out = bytes(real.inflate(codec, data, magic, max_size))
        return out[:-1] if codec == CompressionType.ZSTD else out  # the last record cut short

    result, rows = walk(name, memoryview(log), inflate)
    assert result[:2] == (A.DECOMPRESS, starts[1])
    assert rows == 5


@pytest.mark.parametrize("name", TWINS)
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_the_inflater_is_not_swallowed(name, interrupt):
    log, _ = log_of([CompressionType.LZ4])

    def inflate(codec, data, magic, max_size):
        raise interrupt()

    with pytest.raises(interrupt):
        walk(name, memoryview(log), inflate)


@pytest.mark.parametrize("name", TWINS)
def test_the_driver_redoes_a_refused_batch_and_reports_its_error_in_context(name):
    """A batch whose records section is not valid lz4: the walk hands it back, the driver's own
    path raises the error naming the batch, as without the walk's inflating."""
    log = bytearray(log_of([CompressionType.NONE, CompressionType.LZ4])[0])
    second = log_of([CompressionType.NONE])[0]
    log[len(second) + 61 + 8] ^= 0xFF  # inside the lz4 frame of the second batch
    with pytest.raises(CorruptRecordError) as caught:
        fast.ColumnarDecoder(kernels=twin(name)).decode(bytes(log))
    assert caught.value.position == len(second) and caught.value.offset == 5
    assert f"Records of the batch at position {len(second)} cannot be decompressed: lz4:" in str(
        caught.value
    )
