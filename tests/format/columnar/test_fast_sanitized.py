"""The C kernels under AddressSanitizer and UBSan: damaged logs never read or write out of bounds.

Builds ``format/columnar/_speedups/*.c`` with ``-fsanitize=address,undefined`` into a temporary
directory and runs a differential fuzz in a subprocess (libasan preloaded,
``PYTHONMALLOC=malloc`` so every buffer is its own allocation with red zones; inputs are copied
into exactly sized numpy arrays), at every CRC code level (tables, SSE4.2/PCLMULQDQ, AVX-512).
Any out-of-bounds access aborts the subprocess; any difference from the pure kernels fails the
test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from .fastcheck import FORCED_PURE

SPEEDUPS = (
    Path(__file__).resolve().parents[3] / "src" / "kafkalog" / "format" / "columnar" / "_speedups"
)
SOURCES = sorted(SPEEDUPS.glob("*.c"))
# The subprocess imports this package's helpers as format.columnar.* with tests/ on PYTHONPATH.
TESTS = Path(__file__).resolve().parents[2]

FUZZ = r"""
import importlib.util, random, sys
import numpy as np
spec = importlib.util.spec_from_file_location("asan._compiled", SO)
asan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(asan)
from hypothesis import HealthCheck, given, settings, strategies as st
from format.columnar.fastcheck import columnar_outcome, corrupted, logs
from kafkalog.format import columnar as fast
from kafkalog.format.columnar._pure import kernels as _pure_kernels

def exact(buf):
    a = np.empty(len(buf), np.uint8)
    a[:] = np.frombuffer(buf, np.uint8)
    return memoryview(a)

@given(buf=corrupted(), crc=st.booleans(), lo=st.none() | st.integers(0, 2**41),
       hardware=st.sampled_from([0, 1, 2]))
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def fuzz_decode(buf, crc, lo, hardware):
    asan.set_crc_hardware(hardware)
    got = columnar_outcome(exact(buf), asan, validate_crc=crc, start_offset=lo)
    assert got == columnar_outcome(buf, _pure_kernels, validate_crc=crc, start_offset=lo)

@given(buf=logs(), max_rows=st.integers(1, 10))
@settings(max_examples=EXAMPLES // 4, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def fuzz_chunks(buf, max_rows):
    chunks = list(fast.ColumnarDecoder(kernels=asan).iter_batches(exact(buf), max_rows=max_rows))
    assert sum(c.num_rows for c in chunks) == fast.decode_columnar(buf).num_rows

@given(rows=st.lists(st.tuples(st.integers(0, 2**41), st.none() | st.binary(max_size=30),
                               st.none() | st.binary(max_size=300),
                               st.lists(st.tuples(st.text(max_size=5),
                                                  st.none() | st.binary(max_size=9)),
                                        max_size=3)), min_size=1, max_size=40),
       size=st.integers(1, 2000), codec=st.sampled_from(["none", "gzip", "lz4"]))
@settings(max_examples=EXAMPLES // 4, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def fuzz_encode(rows, size, codec):
    cols = ([r[1] for r in rows], [r[2] for r in rows], [r[0] for r in rows], [r[3] for r in rows])
    a = fast.encode_columnar(*cols, batch_bytes=size, compression=codec, kernels=asan)
    assert a == fast.encode_columnar(*cols, batch_bytes=size, compression=codec,
                                     kernels=_pure_kernels)

from format.columnar.test_fast_offsets import MAX_LAST, _v2, _wrapper, damaged_logs

@given(buf=damaged_logs(), crc=st.booleans(), order=st.booleans(),
       hardware=st.sampled_from([0, 1, 2]))
@settings(max_examples=EXAMPLES // 4, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def fuzz_offsets(buf, crc, order, hardware):
    asan.set_crc_hardware(hardware)
    options = {"validate_crc": crc, "check_offset_order": order}
    assert columnar_outcome(exact(buf), asan, **options) == columnar_outcome(
        buf, _pure_kernels, **options)

def crafted_offsets():
    bufs = [_v2(MAX_LAST, [0, 1], 0, codec) for codec in ("none", "gzip")]
    bufs += [_wrapper(1, MAX_LAST, [5, 0]), _wrapper(0, 10, [-3, -2]), _wrapper(1, 3, [-4, 0])]
    for buf in bufs:
        for crc in (False, True):
            got = columnar_outcome(exact(buf), asan, validate_crc=crc)
            assert got[0] == "error" and got == columnar_outcome(buf, _pure_kernels,
                                                                 validate_crc=crc)

fuzz_decode()
fuzz_chunks()
fuzz_encode()
fuzz_offsets()
crafted_offsets()
print("fuzzed clean")
"""


@pytest.mark.slow
@pytest.mark.skipif(FORCED_PURE, reason="the compiled kernels' own check")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_compiled_kernels_fuzz_clean_under_asan_and_ubsan(tmp_path):
    libasan = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.exists(libasan):
        pytest.skip("libasan not installed")
    so = tmp_path / ("_compiled" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            f"-I{sysconfig.get_paths()['include']}",
            *map(str, SOURCES),
            "-o",
            str(so),
        ],
        check=True,
    )
    script = FUZZ.replace("SO", repr(str(so)))
    script = script.replace("EXAMPLES", "400")
    env = dict(
        os.environ,
        LD_PRELOAD=libasan,
        PYTHONMALLOC="malloc",
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
        UBSAN_OPTIONS="print_stacktrace=1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    assert "fuzzed clean" in res.stdout
