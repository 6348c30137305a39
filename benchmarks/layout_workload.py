"""A fixed workload of the hot paths, for timing one tree against another as whole processes.

Columnar decode (``iter_record_batches``) and encode of 200,000 records (none, lz4, zstd), then
5,000 one-KB client batches appended as a leader (``Log.append_as_leader``). It imports through
the module names of the layout before the redesign too (``kafkalog.format.fast``,
``kafkalog.log.log``), so an older checkout on ``PYTHONPATH`` runs the very same work::

    git archive e5625f1 src | tar -x -C /tmp/before     # then build its C kernels in place
    LOOPS=25 .venv/bin/python benchmarks/interleave.py -n 9 \\
        "env PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/layout_workload.py" \\
        ".venv/bin/python benchmarks/layout_workload.py"

Results in docs/benchmarks.md ("The layout step").
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

try:
    from kafkalog.format import columnar
except ImportError:  # the layout before the redesign
    from kafkalog.format import fast as columnar
try:
    from kafkalog.log.partition import Log
except ImportError:
    from kafkalog.log.log import Log

N = 200_000
LOOPS = int(os.environ.get("LOOPS", "6"))


def main() -> None:
    keys = [b"k%d" % (i % 1000) for i in range(N)]
    values = [b"v" * 100 for _ in range(N)]
    timestamps = np.arange(N, dtype=np.int64) + 1_700_000_000_000
    codecs = ("none", "lz4", "zstd")
    data = {c: columnar.encode_columnar(keys, values, timestamps, compression=c) for c in codecs}
    for _ in range(LOOPS):
        for codec, buffer in data.items():
            for _chunk in columnar.iter_record_batches(buffer, max_rows=65536):
                pass
            columnar.encode_columnar(keys, values, timestamps, compression=codec)
    small = [
        columnar.encode_columnar(keys[i : i + 8], values[i : i + 8], timestamps[i : i + 8])
        for i in range(0, 40_000, 8)
    ]
    directory = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(directory, "t-0"))
        log = Log.open(os.path.join(directory, "t-0"), writable=True)
        for batch in small:
            log.append_as_leader(batch)
        log.close()
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
