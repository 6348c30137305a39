"""One adapter per reader of a data directory, each returning a uniform :class:`Outcome`.

CLI readers run in-process (``kafkalog.cli.main.main``) with stdout/stderr captured and a SIGALRM
timeout, or, with ``subprocess=True``, as the real console script under a timeout. The Python API
runs with ``warnings`` recorded. Nothing here decides what is right: see test_agreement.py.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import signal
import subprocess
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .expected import Rec

__all__ = ["READERS", "Outcome", "Reader", "run_cli"]

TIMEOUT = 10.0


class HarnessTimeout(BaseException):
    """Raised by SIGALRM inside an in-process reader (a BaseException: readers' ``except
    Exception`` must not swallow it)."""


@dataclass
class Outcome:
    reader: str
    records: list[Rec] | None = None  # what the reader returned or printed (None: not a lister)
    ok: bool = False  # exit 0 / returned normally
    code: int | None = None  # CLI exit status
    error: str | None = None  # the exception (type: message) of an API reader
    error_type: type | None = None
    stderr: str = ""  # CLI stderr, or the API's warnings, one per line
    stdout: str = ""
    traceback: str | None = None  # a Python traceback seen (uncaught exception or on stderr)
    timed_out: bool = False
    findings: list[dict] = field(default_factory=list)  # verify
    stats: dict | None = None  # stats: the partition object
    argv: list[str] = field(default_factory=list)  # to reproduce by hand

    def summary(self, limit: int = 600) -> str:
        parts = [f"ok={self.ok}"]
        if self.code is not None:
            parts.append(f"exit={self.code}")
        if self.timed_out:
            parts.append("TIMED OUT")
        if self.error:
            parts.append(f"raised {self.error[:limit]!r}")
        if self.records is not None:
            offs = [r.offset for r in self.records]
            parts.append(f"{len(offs)} records (offsets {_ranges(offs)})")
        if self.stderr.strip():
            parts.append(f"stderr/warnings {self.stderr.strip()[-limit:]!r}")
        if self.traceback:
            parts.append(f"TRACEBACK {self.traceback[-limit:]!r}")
        if self.stats is not None:
            parts.append(
                f"stats records={self.stats.get('records')} error={self.stats.get('error')!r}"
                f" warnings={self.stats.get('warnings')!r}"
            )
        if self.findings:
            parts.append(
                "findings "
                + "; ".join(
                    f"{f.get('severity')} {f.get('code')} {Path(str(f.get('path'))).name}"
                    f"@{f.get('position')}"
                    for f in self.findings
                )[:limit]
            )
        return ", ".join(parts)


def _ranges(offs: list[int]) -> str:
    if not offs:
        return "none"
    out, start, prev = [], offs[0], offs[0]
    for o in [*offs[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    text = ",".join(out)
    return text if len(text) < 200 else text[:200] + "..."


@contextlib.contextmanager
def _alarm(seconds: float):
    def fire(signum, frame):
        raise HarnessTimeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str], timeout: float = TIMEOUT, *, subprocess_: bool = False) -> Outcome:
    """``kafkalog ARGV``: in-process, or the console script in a subprocess."""
    out = Outcome("cli", argv=["kafkalog", *argv])
    if subprocess_:
        exe = str(Path(sys.executable).with_name("kafkalog"))
        try:
            proc = subprocess.run([exe, *argv], capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            out.timed_out = True
            out.stdout = (e.stdout or b"").decode(errors="replace")
            out.stderr = (e.stderr or b"").decode(errors="replace")
            return out
        out.code = proc.returncode
        out.stdout = proc.stdout.decode(errors="replace")
        out.stderr = proc.stderr.decode(errors="replace")
    else:
        from kafkalog.cli.main import main

        stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
        stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                with _alarm(timeout):
                    out.code = main(argv)
        except HarnessTimeout:
            out.timed_out = True
        except SystemExit as e:  # argparse
            out.code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # an uncaught exception: the console script's traceback
            out.traceback = "".join(traceback.format_exception(e))
            out.error = f"{type(e).__name__}: {e}"
        finally:
            sys.stdout, sys.stderr = old
            with contextlib.suppress(Exception):
                stdout.flush()
                stderr.flush()
        out.stdout = stdout.buffer.getvalue().decode(errors="replace")
        out.stderr = stderr.buffer.getvalue().decode(errors="replace")
    if "Traceback (most recent call last)" in out.stderr:
        out.traceback = out.traceback or out.stderr
    out.ok = out.code == 0 and not out.timed_out
    return out


# ---------------------------------------------------------------------------------------------
# record parsing


def _blob(value, encoding) -> bytes | None:
    if value is None:
        return None
    if encoding == "base64":
        return base64.b64decode(value)
    if encoding in ("utf8", None):
        return value.encode()
    if encoding == "hex":
        return bytes.fromhex(value)
    raise ValueError(f"encoding {encoding}")


def _json_records(stdout: str) -> list[Rec]:
    out = []
    for line in stdout.split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict) or "offset" not in obj:
            continue
        headers = tuple(
            (h["key"], _blob(h.get("value"), h.get("valueEncoding", "base64")))
            for h in obj.get("headers") or []
        )
        ts = obj.get("timestamp")
        out.append(
            Rec(
                obj["offset"],
                -1 if ts is None else ts,
                _blob(obj.get("key"), obj.get("keyEncoding", "base64")),
                _blob(obj.get("value"), obj.get("valueEncoding", "base64")),
                headers,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# the readers


@dataclass(frozen=True)
class Reader:
    name: str
    kind: str  # records | dump | verify | stats
    opt_out: bool = False  # failOnDataLoss off
    control: bool = False  # lists control records too
    api: bool = False  # Python API (exceptions and warnings) rather than a CLI

    def run(self, data: Path, topic: str, partition_dir: Path, *, subprocess_: bool = False):
        return RUNNERS[self.name](self, data, topic, partition_dir, subprocess_)


def _consume(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    argv = ["consume", str(data), "--topic", topic, "--json", "--quiet"]
    if reader.opt_out:
        argv.append("--no-fail-on-data-loss")
    out = run_cli(argv, subprocess_=sub)
    out.reader = reader.name
    out.records = _json_records(out.stdout)
    return out


def _export(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    argv = [
        "export",
        str(data),
        "--topic",
        topic,
        "--to",
        "jsonl",
        "-",
        "--include-headers",
        "--key-decoder",
        "base64",
        "--value-decoder",
        "base64",
        "--quiet",
    ]
    if reader.opt_out:
        argv.append("--no-fail-on-data-loss")
    out = run_cli(argv, subprocess_=sub)
    out.reader = reader.name
    out.records = _json_records(out.stdout)
    return out


def _arrow(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    import pyarrow as pa

    import kafkalog.arrow

    out = Outcome(
        reader.name,
        argv=[
            f"kafkalog.arrow.open_data_dir({str(data)!r}, topics=[{topic!r}], include_headers=True"
            + (", fail_on_data_loss=False" if reader.opt_out else "")
            + ").read_all()"
        ],
    )
    rows: list[Rec] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            with _alarm(TIMEOUT):
                reader_ = kafkalog.arrow.open_data_dir(
                    data, topics=[topic], include_headers=True, fail_on_data_loss=not reader.opt_out
                )
                for batch in reader_:
                    ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
                    for i, row in enumerate(batch.to_pylist()):
                        t = ts[i]
                        rows.append(
                            Rec(
                                row["offset"],
                                -1 if t is None else t // 1000,
                                row["key"],
                                row["value"],
                                tuple((h["key"], h["value"]) for h in row["headers"] or ()),
                            )
                        )
            out.ok = True
        except HarnessTimeout:
            out.timed_out = True
        except Exception as e:
            out.error = f"{type(e).__name__}: {e}"
            out.error_type = type(e)
            if not str(e).strip():
                out.error += " (no message)"
            from kafkalog.errors import KafkalogError

            if not isinstance(e, KafkalogError | OSError):
                out.traceback = "".join(traceback.format_exception(e))
    out.stderr = "\n".join(str(w.message) for w in seen)
    out.records = rows
    return out


_DUMP_RECORD = re.compile(
    r"^\| offset: (\d+)(?: (CreateTime|LogAppendTime|NoTimestampType): (-?\d+))?"
)
_KV = re.compile(r"keySize: (-?\d+) valueSize: (-?\d+)")


def _dump(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    """Per ``.log`` file (the caller passes the file as ``part``): text records."""
    out = run_cli(["dump", "--deep-iteration", "--quiet", str(part)], subprocess_=sub)
    out.reader = reader.name
    recs = []
    for line in out.stdout.split("\n"):
        m = _DUMP_RECORD.match(line)
        if not m:
            continue
        kv = _KV.search(line)
        ts = int(m.group(3)) if m.group(3) else -1
        ks, vs = (int(kv.group(1)), int(kv.group(2))) if kv else (None, None)
        # text dump shows sizes only: keys and values stand in as sized placeholders
        recs.append(Rec(int(m.group(1)), ts, _sized(ks), _sized(vs), ()))
    out.records = recs
    return out


def _sized(n: int | None) -> bytes | None:
    return None if n is None or n < 0 else bytes(n)


def _dump_json(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    out = run_cli(["dump", "--json", "--deep-iteration", "--quiet", str(part)], subprocess_=sub)
    out.reader = reader.name
    recs = []
    for line in out.stdout.split("\n"):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "record":
            ts = obj.get("timestamp")
            recs.append(
                Rec(
                    obj["offset"],
                    -1 if ts is None else ts,
                    _blob(obj["key"], "base64"),
                    _blob(obj["value"], "base64"),
                    tuple((k, _blob(v, "base64")) for k, v in obj.get("headers") or []),
                )
            )
        elif obj.get("type") in ("error", "summary"):
            out.findings.append(obj)
    out.records = recs
    return out


def _verify(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    out = run_cli(["verify", "--json", str(data)], subprocess_=sub)
    out.reader = reader.name
    for line in out.stdout.split("\n"):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "finding":
            out.findings.append(obj)
    return out


def _stats(reader: Reader, data: Path, topic: str, part: Path, sub: bool) -> Outcome:
    out = run_cli(["stats", "--json", "--quiet", str(data)], subprocess_=sub)
    out.reader = reader.name
    for line in out.stdout.split("\n"):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "partition":
            out.stats = obj
    return out


RUNNERS = {
    "consume": _consume,
    "consume --no-fail-on-data-loss": _consume,
    "export": _export,
    "export --no-fail-on-data-loss": _export,
    "arrow": _arrow,
    "arrow fail_on_data_loss=False": _arrow,
    "dump": _dump,
    "dump --json": _dump_json,
    "verify": _verify,
    "stats": _stats,
}

READERS: list[Reader] = [
    Reader("consume", "records"),
    Reader("consume --no-fail-on-data-loss", "records", opt_out=True),
    Reader("export", "records"),
    Reader("export --no-fail-on-data-loss", "records", opt_out=True),
    Reader("arrow", "records", api=True),
    Reader("arrow fail_on_data_loss=False", "records", opt_out=True, api=True),
    Reader("dump", "dump", control=True),
    Reader("dump --json", "dump", control=True),
    Reader("verify", "verify"),
    Reader("stats", "stats", control=True),
]


# ---------------------------------------------------------------------------------------------
# slow readers: Spark and the server


def read_spark(spark, data: Path, topic: str, *, opt_out: bool) -> Outcome:
    """``spark.read.format("kafkalog")`` of one topic, every row collected (driver-side)."""
    name = "spark failOnDataLoss=false" if opt_out else "spark"
    out = Outcome(
        name,
        argv=[
            f'spark.read.format("kafkalog").option("subscribe", {topic!r})'
            f'.option("includeHeaders", "true").option("failOnDataLoss", '
            f'"{"false" if opt_out else "true"}").load({str(data)!r}).collect()'
        ],
    )
    import threading

    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        spark.sparkContext.cancelAllJobs()

    timer = threading.Timer(180, cancel)
    timer.start()
    try:
        df = (
            spark.read.format("kafkalog")
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .option("failOnDataLoss", "false" if opt_out else "true")
            .load(str(data))
        )
        rows = df.orderBy("offset").collect()
        recs = []
        for row in rows:
            ts = row["timestamp"]
            millis = -1 if ts is None else round(ts.timestamp() * 1000)
            recs.append(
                Rec(
                    row["offset"],
                    millis,
                    None if row["key"] is None else bytes(row["key"]),
                    None if row["value"] is None else bytes(row["value"]),
                    tuple(
                        (h["key"], None if h["value"] is None else bytes(h["value"]))
                        for h in row["headers"] or ()
                    ),
                )
            )
        out.records = recs
        out.ok = True
    except Exception as e:
        out.error = f"{type(e).__name__}: {e}"
        out.error_type = type(e)
        out.records = []
        out.timed_out = fired.is_set()
    finally:
        timer.cancel()
    return out


def read_served(data: Path, topic: str, partition: int, *, want: int, timeout: float = 60.0):
    """Start ``kafkalog serve`` on ``data``, fetch the partition from offset 0 with kafka-python's
    KafkaConsumer until ``want`` records came or nothing more comes. Returns (Outcome, server log,
    whether the server was still alive after the fetches)."""
    import kafka

    from server.server_process import ServerProcess

    out = Outcome("serve", argv=[f"kafkalog serve {data}", "then KafkaConsumer fetch from 0"])
    server = ServerProcess(data)
    try:
        server.start(timeout=60)
        if "kafkalog serving" not in server.log():  # it ended before listening
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(10)
            raise RuntimeError(server.log())
    except (TimeoutError, RuntimeError) as e:
        out.error = f"server did not start: {e}"
        out.stderr = server.log()
        out.traceback = server.log() if "Traceback" in server.log() else None
        return out, server.log(), False
    alive = True
    try:
        recs: list[Rec] = []
        consumer = None
        try:
            with _alarm(timeout):
                consumer = kafka.KafkaConsumer(
                    bootstrap_servers=server.bootstrap,
                    enable_auto_commit=False,
                    consumer_timeout_ms=4000,
                )
                tp = kafka.TopicPartition(topic, partition)
                consumer.assign([tp])
                consumer.seek(tp, 0)
                for m in consumer:
                    recs.append(
                        Rec(
                            m.offset,
                            -1 if m.timestamp is None else m.timestamp,
                            m.key,
                            m.value,
                            tuple((k, v) for k, v in m.headers),
                        )
                    )
                    if len(recs) >= want:
                        break
            out.ok = True
        except HarnessTimeout:
            out.timed_out = True
        except Exception as e:  # a Kafka error from the fetch: a refusal, if the server lives
            out.error = f"{type(e).__name__}: {e}"
            out.error_type = type(e)
        finally:
            if consumer is not None:
                with contextlib.suppress(Exception):
                    consumer.close()
        out.records = recs
        alive = server.proc.poll() is None
    finally:
        if server.proc.poll() is None:
            try:
                server.stop(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                out.error = (out.error or "") + " (the server did not stop on SIGTERM)"
    out.stderr = server.log()
    if "Traceback (most recent call last)" in out.stderr:
        out.traceback = out.stderr
    return out, server.log(), alive
