"""The tools that read every record of a log: deep verify, dump --deep-iteration and compaction,
on 1 M records, each through the columnar fast path and the record-at-a-time path, in one run.

    .venv/bin/python benchmarks/tools.py [--records 1000000] [--repeat 5] [--json OUT]

Data (the rows of benchmarks/fast.py: 16-byte keys, 100-byte JSON-like values):

- verify: one partition per layout (1 MB lz4 batches with two headers a record; 16 KB
  uncompressed batches without headers), one segment each; ``kafkalog.log.verify.data_dir`` of the
  partition directory, deep (every record decoded and its offset checked);
- dump: ``kafkalog dump --deep-iteration`` of the same segments (in-process, output to memory):
  one line per record, which the column path formats from the columns (the other path decodes
  the records through the columns too, then formats each from a ``Record``);
- compact: a compacted topic written through ``Log.append_as_leader`` in 16 KB lz4 batches, keys
  drawn at random from half as many keys as records (57% of the records superseded, in nearly
  every batch, which the cleaner then rebuilds from its survivors) or all distinct (nothing
  removed, every batch kept byte for byte); ``kafkalog.log.cleaner.cleaner.clean`` of a fresh copy
  of the log each run (the copy is not timed).

Contenders: "columns" is kafkalog as it is; "record by record" is the same code with the column
paths switched off (batches of any size below their thresholds), as before they existed. Runs of the
two alternate; times are CPU-time medians (time.process_time) of --repeat runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from fast import columns, make

from kafkalog.cli.dump import columnar as dump_log
from kafkalog.cli.main import main as cli_main
from kafkalog.format import MemoryRecords
from kafkalog.format import columnar as fast
from kafkalog.log.cleaner.cleaner import clean
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition
from kafkalog.log.segment import record_fields
from kafkalog.log.verify import segment as verify_segment
from kafkalog.log.verify.data_dir import verify

T0 = 1_700_000_000_000


SWITCHES = (  # the thresholds of the column paths: batches of fewer records take the other one
    (verify_segment, "_COLUMNAR_MIN_RECORDS"),
    (record_fields, "MIN_RECORDS"),
    (dump_log, "_LINES_MIN_RECORDS"),
)


@contextlib.contextmanager
def record_by_record():
    """The column paths off: every batch counts as too small for them."""
    saved = [getattr(module, name) for module, name in SWITCHES]
    for module, name in SWITCHES:
        setattr(module, name, 1 << 62)
    try:
        yield
    finally:
        for (module, name), value in zip(SWITCHES, saved, strict=True):
            setattr(module, name, value)


def write_segment(root: Path, name: str, data: bytes) -> Path:
    part = root / name
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(data)
    return part


def compacted_log(root: Path, n: int, distinct: bool) -> Path:
    """A data directory with the compacted partition c-0 (its active segment rolled, so that all
    of it is cleanable)."""
    keys, values, stamps, _ = columns(n, 0)
    if not distinct:
        draw, half = random.Random(1).randrange, max(1, n // 2)
        keys = [b"key-%012d" % draw(half) for _ in range(n)]
    data = fast.encode_columnar(keys, values, stamps, compression="lz4", batch_bytes=16384 - 61)
    clock = MockClock(now_ms=T0 + 10**9)
    with LogManager(root, writable=True, create=True, clock=clock) as manager:
        (log,) = manager.create_topic("c", 1, {"cleanup.policy": "compact"})
        for batch in MemoryRecords(bytes(data)):
            client = bytearray(batch.buffer)
            struct.pack_into(">q", client, 0, 0)  # a producer's batch starts at offset 0
            log.append_as_leader(bytes(client), leader_epoch=0)
        log.roll()
    return root


def timed(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def compare(name: str, run, repeat: int) -> dict:
    """run() -> a fact to check (the same for both contenders); CPU-time medians of each."""
    times: dict[str, list[float]] = {"columns": [], "record by record": []}
    facts = set()
    for i in range(repeat):
        order = ["columns", "record by record"][:: 1 if i % 2 == 0 else -1]
        for contender in order:
            context = record_by_record() if contender != "columns" else contextlib.nullcontext()
            with context:
                seconds, fact = run()
            times[contender].append(seconds)
            facts.add(fact)
    if len(facts) != 1:
        raise SystemExit(f"{name}: the contenders disagree: {facts}")
    row = {"case": name, "fact": facts.pop()}
    for contender, t in times.items():
        row[contender] = statistics.median(t)
    row["speedup"] = row["record by record"] / row["columns"]
    print(
        f"{name}: columns {row['columns']:.2f} s, record by record "
        f"{row['record by record']:.2f} s ({row['speedup']:.1f}x); {row['fact']}",
        flush=True,
    )
    return row


def verify_case(part: Path):
    def run():
        box = {}
        seconds = timed(lambda: box.setdefault("r", verify(part, deep=True)))
        report = box["r"]
        return seconds, f"{report.partitions[0].records} records, {len(report.errors)} errors"

    return run


def dump_case(part: Path):
    def run():
        out = io.StringIO()
        argv = ["dump", "--deep-iteration", "--quiet", str(part / f"{0:020d}.log")]
        with contextlib.redirect_stdout(out):
            seconds = timed(lambda: cli_main(argv))
        return seconds, f"{out.getvalue().count(chr(10))} lines"

    return run


def compact_case(pristine: Path, work: Path):
    def run():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        clock = MockClock(now_ms=T0 + 10**9)
        with LogManager(work, writable=True, clock=clock) as manager:
            log = manager.get_log(TopicPartition("c", 0))
            box = {}
            seconds = timed(lambda: box.setdefault("r", clean(log, force=True)))
        result = box["r"]
        total = result.records_kept + result.records_removed
        return seconds, f"{result.records_removed} of {total} records removed"

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    n = args.records
    rows = []
    with tempfile.TemporaryDirectory(prefix="kafkalog-tools-") as tmp:
        root = Path(tmp)
        lz4 = write_segment(root / "v", "lz4-0", make(n, 2, 1_048_576, "lz4", 2))
        rows.append(compare("verify, 1 MB lz4 batches, 2 headers", verify_case(lz4), args.repeat))
        plain = write_segment(root / "v", "plain-0", make(n, 2, 16_384, "none", 0))
        rows.append(compare("verify, 16 KB uncompressed batches", verify_case(plain), args.repeat))
        for label, part in (("1 MB lz4 batches, 2 headers", lz4), ("16 KB uncompressed", plain)):
            rows.append(compare(f"dump --deep-iteration, {label}", dump_case(part), args.repeat))
        for distinct in (False, True):
            pristine = compacted_log(root / f"data{int(distinct)}", n, distinct)
            label = "all keys distinct" if distinct else "half the keys superseded"
            case = compact_case(pristine, root / "work")
            rows.append(compare(f"compact, 16 KB lz4 batches, {label}", case, args.repeat))
    if args.json:
        packages = ("pyarrow", "numpy", "cramjam", "lz4")
        out = {
            "records": n,
            "repeat": args.repeat,
            "python": platform.python_version(),
            "implementation": fast.IMPLEMENTATION,
            "versions": {p: version(p) for p in packages},
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "rows": rows,
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
