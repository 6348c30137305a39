"""The numba-vs-C measurement behind the fast path's choice (docs/benchmarks.md).

    .venv/bin/python benchmarks/kernel_choice/measure.py

Builds the two minimal kernels (decode uncompressed v2 batches without headers into numpy arrays),
then measures decode M records/s (CPU-time median of 7) on 1M records in 16 KB and 1 MB batches,
and first-use latency (a fresh process: import + first call) for numba with a cold and a warm
cache, and for the C extension.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from decode import make_data  # noqa: E402


def build_c(outdir: str) -> None:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    inc = sysconfig.get_paths()["include"]
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-shared",
            "-fPIC",
            f"-I{inc}",
            str(HERE / "minimal_c.c"),
            "-o",
            f"{outdir}/minimal_c{suffix}",
        ],
        check=True,
    )


FIRST_USE = """
import time, sys, numpy as np
t0 = time.perf_counter()
sys.path[:0] = [{outdir!r}, {here!r}]
import {mod} as k
buf = np.frombuffer(open({data!r}, 'rb').read(), np.uint8)
n = 200_000
out = [np.empty(n, np.int64), np.empty(n, np.int64), np.zeros(n + 1, np.int32),
       np.empty(len(buf), np.uint8), np.zeros(n + 1, np.int32), np.empty(len(buf), np.uint8)]
k.decode(buf, *out)
print(time.perf_counter() - t0)
"""


def first_use(mod: str, outdir: str, data_path: str, env: dict) -> float:
    code = FIRST_USE.format(outdir=outdir, here=str(HERE), mod=mod, data=data_path)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return float(res.stdout.strip())


def main() -> None:
    import numpy as np

    outdir = tempfile.mkdtemp()
    build_c(outdir)
    sys.path.insert(0, outdir)
    import minimal_c
    import minimal_numba

    n = 1_000_000
    for batch in (16_384, 1_048_576):
        data = make_data(n, batch, "none", 0, 2)
        buf = np.frombuffer(data, np.uint8)
        out = [
            np.empty(n, np.int64),
            np.empty(n, np.int64),
            np.zeros(n + 1, np.int32),
            np.empty(len(buf), np.uint8),
            np.zeros(n + 1, np.int32),
            np.empty(len(buf), np.uint8),
        ]
        for name, fn in (("numba", minimal_numba.decode), ("C", minimal_c.decode)):
            assert fn(buf, *out)[0] == n
            times = []
            for _ in range(7):
                t0 = time.process_time()
                fn(buf, *out)
                times.append(time.process_time() - t0)
            print(
                f"{name:6} {batch // 1024:5} KB batches: {n / statistics.median(times) / 1e6:6.2f}"
                " M records/s"
            )
    data_path = os.path.join(outdir, "data.bin")
    Path(data_path).write_bytes(make_data(200_000, 16_384, "none", 0, 2))
    cache = tempfile.mkdtemp()
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    print(
        f"numba first use, cold cache: {first_use('minimal_numba', outdir, data_path, env):.2f} s"
    )
    print(
        f"numba first use, warm cache: {first_use('minimal_numba', outdir, data_path, env):.2f} s"
    )
    print(f"C first use:                 {first_use('minimal_c', outdir, data_path, env):.3f} s")
    base = (
        "import time, sys; t0 = time.perf_counter(); import numpy; print(time.perf_counter() - t0)"
    )
    res = subprocess.run([sys.executable, "-c", base], capture_output=True, text=True, check=True)
    print(f"(numpy import alone:         {float(res.stdout):.3f} s)")


if __name__ == "__main__":
    main()
