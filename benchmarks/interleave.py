"""Time two whole commands side by side: run them alternately (A, B, A, B, ...) so that a noisy
machine slows both alike, then print each one's medians (wall seconds, CPU seconds of the
process and its children, peak resident memory) and the ratios B/A.

    python benchmarks/interleave.py -n 9 \\
        "env PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/layout_workload.py" \\
        ".venv/bin/python benchmarks/layout_workload.py"

Extra environment (e.g. ``LOOPS=25``) is passed to both. A command that fails stops the run.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(command: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one run of ``command``."""
    start = time.perf_counter()
    proc = subprocess.Popen(shlex.split(command), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"interleave: {command!r} exited with {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=9, help="runs of each command (9)")
    parser.add_argument("a", help="the first command (the baseline)")
    parser.add_argument("b", help="the second command")
    args = parser.parse_args(argv)
    runs: dict[str, list[tuple[float, float, float]]] = {"A": [], "B": []}
    for i in range(args.n):
        order = (("A", args.a), ("B", args.b)) if i % 2 == 0 else (("B", args.b), ("A", args.a))
        for name, command in order:
            runs[name].append(run_once(command))
    medians = {
        name: [statistics.median(r[k] for r in results) for k in range(3)]
        for name, results in runs.items()
    }
    for name, command in (("A", args.a), ("B", args.b)):
        wall, cpu, rss = medians[name]
        print(f"{name}: wall {wall:.3f} s, cpu {cpu:.3f} s, peak {rss:.0f} MiB  ({command})")
    a, b = medians["A"], medians["B"]
    print(f"B/A: wall {b[0] / a[0]:.3f}, cpu {b[1] / a[1]:.3f}, peak {b[2] / a[2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
