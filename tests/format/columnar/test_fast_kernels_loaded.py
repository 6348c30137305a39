"""Which kernels run: the compiled ones, unless KAFKALOG_PUREPYTHON=1 forces the pure twins.

This guard fails (it does not skip) when the C extension did not build or load, so a broken build
cannot pass CI silently on the slow path.
"""

from __future__ import annotations

import subprocess
import sys

from kafkalog.format import columnar as fast
from kafkalog.format.columnar import _kernel_abi
from kafkalog.format.columnar import decode as _columnar_decode
from kafkalog.format.columnar import encode as _columnar_encode
from kafkalog.format.columnar._pure import kernels as _pure_kernels

from .fastcheck import FORCED_PURE


def test_every_facade_function_resolves_to_the_compiled_kernels():
    if FORCED_PURE:
        assert fast.IMPLEMENTATION == "pure"
        assert fast.kernels is _pure_kernels
        return
    assert fast.LOAD_ERROR is None, fast.LOAD_ERROR
    from kafkalog.format.columnar import _compiled as _speedups

    assert fast.IMPLEMENTATION == "compiled"
    assert fast.kernels is _speedups
    assert _columnar_decode.default_kernels is _speedups
    assert _columnar_encode.default_kernels is _speedups
    assert fast.ColumnarDecoder()._kernels is _speedups
    for name in fast.KERNEL_FUNCTIONS:
        obj = getattr(fast.kernels, name)
        owner = getattr(obj, "__self__", None) or sys.modules[obj.__module__]
        assert owner is _speedups, name


def test_both_twins_export_every_kernel_function():
    for name in fast.KERNEL_FUNCTIONS:
        assert callable(getattr(_pure_kernels, name))
    assert _pure_kernels.ABI_VERSION == _kernel_abi.ABI_VERSION


def test_the_compiled_kernels_numbers_are_the_abi_modules():
    """The C file repeats _kernel_abi's numbers as #defines and exports them: each must agree."""
    if FORCED_PURE:
        return
    from kafkalog.format.columnar import _compiled as _speedups

    exported = {
        name: value
        for name, value in vars(_speedups).items()
        if name.isupper() and isinstance(value, int)
    }
    assert len(exported) > 20
    for name, value in exported.items():
        assert getattr(_kernel_abi, name) == value, name


def test_compiled_batch_crcs_followed_by_the_walk_at_every_level():
    """An uncompressed v2 batch's CRC-32C is computed as its records are walked: with tables in
    steps of 16 KiB (level 0), through SSE4.2's crc32 instruction eight bytes at a time (level 1),
    or folded 64 bytes at a time with AVX-512 (level 2), the rest finished after the walk.
    Batches of every length modulo 64, from less than one block to several steps, validate at
    every CRC code level; damage anywhere reports the crc32c package's CRC of the damaged bytes.
    The batches are kafka-python's."""
    if FORCED_PURE:
        return
    import random
    import re

    import crc32c
    import pytest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from kafkalog.errors import CorruptRecordError
    from kafkalog.format.columnar import _compiled as _speedups

    rng = random.Random(13)
    batches = []
    for count, size in [*((1, n) for n in range(0, 130)), (9, 40), (200, 97), (700, 150)]:
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, batch_size=1 << 30)
        for i in range(count):
            headers = [("h", rng.randbytes(i % 7))] if i % 3 else []
            builder.append(i, 1_000 + i, rng.randbytes(i % 5) or None, rng.randbytes(size), headers)
        batches.append(bytes(builder.build()))
    assert {len(b) % 64 for b in batches} == set(range(64))
    decoder = fast.ColumnarDecoder(kernels=_speedups)
    top = _speedups.set_crc_hardware(2)
    try:
        for level in range(top + 1):
            _speedups.set_crc_hardware(level)
            for data in batches:
                count = int.from_bytes(data[57:61], "big")
                assert decoder.decode(data, validate_crc=True).num_rows == count
                for where in sorted({45, 61 + (len(data) - 61) // 2, len(data) - 1}):
                    bad = bytearray(data)
                    bad[where] ^= 0x40
                    with pytest.raises(CorruptRecordError) as e:
                        decoder.decode(bytes(bad), validate_crc=True)
                    computed = int(re.search(r"computed crc = (\d+)", str(e.value)).group(1))
                    assert computed == crc32c.crc32c(bytes(bad[21:])), (level, len(data), where)
    finally:
        _speedups.set_crc_hardware(2)


def test_compiled_constants_match_the_abi():
    if FORCED_PURE:
        return
    from kafkalog.format.columnar import _compiled as _speedups

    exported = {k: v for k, v in vars(_speedups).items() if isinstance(v, int)}
    assert len(exported) > 10
    for name, value in exported.items():
        assert getattr(_kernel_abi, name) == value, name


BLOCKED = """
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "kafkalog.format.columnar._compiled":
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
warnings.simplefilter("always")
from kafkalog.format import columnar as fast
from kafkalog.format import MemoryRecordsBuilder
import kafkalog.format.columnar._kernels as k2
b = MemoryRecordsBuilder()
b.append(timestamp=1, key=b"k", value=b"v")
print(fast.IMPLEMENTATION, fast.decode_columnar(b.build()).num_rows)
"""


def test_without_the_extension_kafkalog_runs_pure_and_says_so_once():
    env = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "default"}
    res = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, env=env, check=True
    )
    assert res.stdout.split() == ["pure", "1"]
    assert res.stderr.count("the compiled kernels did not load") == 1
    assert "using the pure-Python kernels" in res.stderr


def test_compiled_crcs_match_zlib_and_crc32c_at_every_length_alignment_and_level():
    """Every code path of the compiled CRCs (tables; SSE4.2 and PCLMULQDQ; AVX-512 VPCLMULQDQ,
    where this CPU has them) against zlib and the crc32c package, around every boundary: the
    64- and 256-byte folding rounds, the 3 x 256 and 3 x 8192 byte streams of the crc32
    instruction."""
    if FORCED_PURE:
        return
    import random
    import zlib

    import crc32c

    from kafkalog.format.columnar import _compiled as _speedups

    rng = random.Random(7)
    data = rng.randbytes(60_000)
    lengths = [*range(0, 800), 1023, 1024, 4095, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 9, 59_000]
    top = _speedups.set_crc_hardware(2)
    try:
        for level in range(top + 1):
            _speedups.set_crc_hardware(level)
            for n in lengths:
                for start in (0, 1, 3, 8):
                    piece = data[start : start + n]
                    assert _speedups.crc32(piece) == zlib.crc32(piece), (level, n, start)
                    assert _speedups.crc32c(piece) == crc32c.crc32c(piece), (level, n, start)
    finally:
        _speedups.set_crc_hardware(2)
    assert _speedups.crc_implementation()


def test_compiled_message_crcs_match_zlib_at_every_length_and_level():
    """The CRC-32 of magic 0/1 messages has a path of its own for messages of up to 256 bytes
    (it reads the bytes before the message): every length from the smallest message to past
    that limit, alone and inside a compressed wrapper, at every CRC code level; the messages and
    their CRCs are kafka-python's, and a damaged message reports zlib's CRC of its bytes."""
    if FORCED_PURE:
        return
    import random
    import re
    import zlib

    import pytest
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    from kafkalog.errors import CorruptRecordError
    from kafkalog.format.columnar import _compiled as _speedups

    rng = random.Random(11)
    logs = []
    for magic in (0, 1):
        for codec in (0, 1):  # none, gzip
            builder = LegacyRecordBatchBuilder(magic, codec, batch_size=1 << 30)
            for i in range(300):
                key = None if i % 3 == 0 else rng.randbytes(i % 5)
                builder.append(
                    i, timestamp=1_000 + i if magic else None, key=key, value=rng.randbytes(i)
                )
            logs.append((codec, bytes(builder.build())))
    decoder = fast.ColumnarDecoder(kernels=_speedups)
    top = _speedups.set_crc_hardware(2)
    try:
        for level in range(top + 1):
            _speedups.set_crc_hardware(level)
            for codec, data in logs:
                assert decoder.decode(data, validate_crc=True).num_rows == 300
                if codec:
                    continue
                pos = offset = 0
                while pos < len(data):
                    end = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
                    bad = bytearray(data)
                    bad[end - 1] ^= 0x21
                    with pytest.raises(CorruptRecordError) as e:
                        decoder.decode(bytes(bad), validate_crc=True)
                    computed = int(re.search(r"computed crc = (\d+)", str(e.value)).group(1))
                    assert computed == zlib.crc32(bytes(bad[pos + 16 : end])), (level, pos)
                    assert e.value.offset == offset
                    pos, offset = end, offset + 1
    finally:
        _speedups.set_crc_hardware(2)
