"""Dump parity: Kafka's own DumpLogSegments (kafka-dump-log) and ``kafkalog dump`` on every
``.log``, ``.index``, ``.timeindex``, ``.txnindex``, producer ``.snapshot`` and KRaft
``.checkpoint`` file of a data directory a real broker wrote (tests/apache_kafka/conftest.py's
``kafka_written``) print the same stdout, line for line, but for what docs/cli.md's list of
deliberate differences names.

Each test runs Kafka's tool once over all the files (``--files a,b,...``, given to the JVM in an
argument file: one argument may not exceed 128 KiB on Linux) and kafkalog once, at the same time,
splits both outputs at their ``Dumping FILE`` lines and lists every differing line with its file.
test_dump_parity_more.py does the same over the real brokers' fixtures and kafkalog-written
directories."""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint")
FLAG_SETS = {
    "plain": (),
    "deep": ("--deep-iteration",),
    "deep-data": ("--deep-iteration", "--print-data-log"),
    "skip-metadata": ("--deep-iteration", "--print-data-log", "--skip-record-metadata"),
    "verify-index-only": ("--verify-index-only",),
    "index-sanity-check": ("--index-sanity-check",),
}
DECODERS = {
    "__consumer_offsets": "--offsets-decoder",
    "__transaction_state": "--transaction-log-decoder",
    "__cluster_metadata": "--cluster-metadata-decoder",
}


def _kafkalog_bin() -> list[str]:
    exe = Path(sys.executable).with_name("kafkalog")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkalog.cli.main"]


def _files(data_dir: Path, topic_prefix: str | None = None) -> list[str]:
    """The dumpable files, relative to ``data_dir`` (both tools then print the same names)."""
    out = []
    for part in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        if topic_prefix is not None and not part.name.startswith(topic_prefix + "-"):
            continue
        for f in sorted(part.iterdir()):
            if f.is_file() and f.name.endswith(SUFFIXES) and f.name != "leader-epoch-checkpoint":
                out.append(f"{part.name}/{f.name}")
    return out


def _split(stdout: str) -> dict[str, list[str]]:
    """Each file's lines, keyed by the name on its ``Dumping NAME`` line."""
    per_file: dict[str, list[str]] = {}
    current = None
    for line in stdout.removesuffix("\n").split("\n"):
        if line.startswith("Dumping "):
            current = line[len("Dumping ") :]
            per_file[current] = []
        if current is not None:
            per_file[current].append(line)
    return per_file


# docs/cli.md, "Deliberate differences from kafka-dump-log": the ones a clean directory written
# by Kafka 3.9-4.x can show. Each takes a pair (kafka line, kafkalog line) and returns it with
# that difference taken out; a pair that is equal after all of them differs only as documented.
def _leader_change(kafka: str, ours: str) -> tuple[str, str]:
    """Item 8: 3.9/4.0 print ``controlType: LEADER_CHANGE(2)``, 4.1+ ``LeaderChange: {...}``."""
    if "controlType: LEADER_CHANGE(2)" in kafka and "LeaderChange: " in ours:
        return ours, ours
    return kafka, ours


TXN_STATES = {
    "Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4,
    "CompleteAbort": 5, "Dead": 6, "PrepareEpochFence": 7,
}  # fmt: skip


def _transaction_status_name(kafka: str, ours: str) -> tuple[str, str]:
    """Item 8: kafkalog prints transactionStatus by its name (as 4.4), 4.1-4.3 its number."""

    def number(m: re.Match) -> str:
        return f'"transactionStatus":{TXN_STATES.get(m.group(1), m.group(0))}'

    def numbers(text: str) -> str:
        return re.sub(r'"transactionStatus":"(\w+)"', number, text)

    return numbers(kafka), numbers(ours)


def _transaction_log_text(kafka: str, ours: str) -> tuple[str, str]:
    """Item 8: 3.9/4.0's --transaction-log-decoder prints ``transaction_metadata::...`` and
    ``producerId:...,state=...``; kafkalog prints 4.1+'s JSON."""
    if " key: transaction_metadata::transactionalId=" in kafka and ' key: {"type":' in ours:
        return kafka.split(" key: ")[0], ours.split(" key: ")[0]
    return kafka, ours


def _replacement_runs(kafka: str, ours: str) -> tuple[str, str]:
    """Item 10: lenient UTF-8 gives another number of U+FFFD than Java's decoder."""
    return re.sub("\ufffd+", "\ufffd", kafka), re.sub("\ufffd+", "\ufffd", ours)


_LEGACY_CRC_BRACE = re.compile(r"^(\| offset: .* crc: \d+)\}(?= key: | payload: |$)")


_ERROR_MESSAGE = re.compile(r"(Error at (?:offset )?-?\d+, skipping\. ).*?(?= payload: |$)")


def _error_message_text(kafka: str, ours: str) -> tuple[str, str]:
    """Item 9: the message after ``Error at offset O, skipping.`` (``Error at O, skipping.`` for
    KRaft records) is kafkalog's own, not a Java exception's text."""
    return _ERROR_MESSAGE.sub(r"\1", kafka), _ERROR_MESSAGE.sub(r"\1", ours)


def _legacy_crc_brace(kafka: str, ours: str) -> tuple[str, str]:
    """Item 15: up to 4.2 a legacy (magic 0/1) record line has a stray ``}`` after its crc, at
    the end of the line or before ``key:``/``payload:`` (kafkalog and 4.3+ without it)."""
    return _LEGACY_CRC_BRACE.sub(r"\1", kafka), ours


def _time_index_not_found(kafka: str, ours: str) -> tuple[str, str]:
    """Item 15: up to 4.2 ``... not found in the log.``, kafkalog and 4.3+ ``... in :FILE``."""
    old = "The following indexed offsets are not found in the log."
    if kafka == old and ours.startswith("The following indexed offsets are not found in :"):
        return ours, ours
    return kafka, ours


def _snapshot_trailing_space(kafka: str, ours: str) -> tuple[str, str]:
    """Item 15: up to 4.2 a producer snapshot's lines end with a space (kafkalog and 4.3+
    without it)."""
    if kafka.startswith("producerId: ") and kafka == ours + " ":
        return ours, ours
    return kafka, ours


def _skipped_metadata_bar(kafka: str, ours: str) -> tuple[str, str]:
    """Item 15: under --skip-record-metadata up to 4.2 print `` payload:`` where kafkalog and
    4.3+ print ``| payload:``."""
    if kafka.startswith(" payload: ") and ours == "|" + kafka:
        return ours, ours
    return kafka, ours


DOCUMENTED = (
    _leader_change,
    _snapshot_trailing_space,
    _skipped_metadata_bar,
    _transaction_status_name,
    _transaction_log_text,
    _replacement_runs,
    _error_message_text,
    _legacy_crc_brace,
    _time_index_not_found,
)


# Differences found by these tests that docs/cli.md does not list (yet): reported to the owners of
# kafkalog's dump to be fixed or documented. While only these remain the tests xfail (naming
# them); any other difference fails. Add a normalizer here for a difference found, and remove it
# once it is fixed or documented. (Kafka 4.3+'s producer-snapshot lines without a trailing
# space and its "| payload:" under --skip-record-metadata were fixed in kafkalog's dump.)
REPORTED: tuple = ()


def _equal_after(kafka: str, ours: str, normalizers) -> bool:
    for normalize in normalizers:
        kafka, ours = normalize(kafka, ours)
    return kafka == ours


def _differences(kafka: dict[str, list[str]], ours: dict[str, list[str]], flags: str) -> list:
    """(file, flags, kafka line, kafkalog line, reported) for each line that differs other than
    as documented; ``reported`` names the REPORTED difference when it is the only other one."""
    found = []
    for name in sorted(set(kafka) | set(ours)):
        k, o = kafka.get(name), ours.get(name)
        if k is None or o is None:
            missing = "(not dumped)"
            found.append((name, flags, missing if k is None else "", missing, False))
            continue
        if len(k) == len(o) and all(a == b or _equal_after(a, b, DOCUMENTED) for a, b in zip(k, o)):
            continue  # (difflib takes minutes on 50,000 lines that differ as documented)
        sm = difflib.SequenceMatcher(a=k, b=o, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                continue
            ks, os_ = k[i1:i2], o[j1:j2]
            for n in range(max(len(ks), len(os_))):
                kl = ks[n] if n < len(ks) else "(no line)"
                ol = os_[n] if n < len(os_) else "(no line)"
                if _equal_after(kl, ol, DOCUMENTED):
                    continue
                reported = next(
                    (r.__name__ for r in REPORTED if _equal_after(kl, ol, (r, *DOCUMENTED))),
                    None,
                )
                found.append((name, flags, kl, ol, reported))
    return found


def _report(found: list, kafka_version: str, limit: int = 60) -> str:
    lines = [f"{len(found)} line(s) differ from Kafka {kafka_version}'s DumpLogSegments:"]
    for name, flags, kl, ol, _ in found[:limit]:
        lines.append(f"{name} [{flags}]\n  kafka:    {kl!r}\n  kafkalog: {ol!r}")
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more")
    return "\n".join(lines)


def _brief(line: str) -> str:
    return line if len(line) <= 100 else f"{line[:45]} [...] {line[-45:]}"


def _run_argfile(dist, cwd: Path, flags: tuple[str, ...], files: list[str]):
    """Kafka's tool on ``files``: its main class and arguments in a Java argument file, as
    ``--files`` takes one argument (joptsimple refuses it twice) and Linux limits one argument
    of a command line to 128 KiB (2,000 files of a data dir take 160 KiB)."""
    args = [dist.dump_class, *flags, "--files", ",".join(files)]
    with tempfile.NamedTemporaryFile("w", suffix=".args", encoding="utf-8") as argfile:
        for arg in args:  # quoted: in an argument file, whitespace separates arguments
            argfile.write('"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"\n')
        argfile.flush()
        cmd = dist.command(dist.dump_class)
        cmd[-1] = f"@{argfile.name}"
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    return subprocess.CompletedProcess(cmd, proc.returncode, _text(proc.stdout), _text(proc.stderr))


def _text(output: bytes) -> str:
    """Output as text, ``\r`` kept (text mode would make it a line break: payloads hold it)."""
    return output.decode("utf-8", "surrogateescape")


def _kafka_dump(kafka_written, files: list[str], flags: tuple[str, ...]):
    """Kafka's output per file, and the files it stopped on with a stack trace (each error
    ends kafka-dump-log: it is then run again on the files after the one it stopped on)."""
    dist = kafka_written.dist
    per_file: dict[str, list[str]] = {}
    crashed: dict[str, str] = {}
    todo = list(files)
    while todo:
        proc = _run_argfile(dist, kafka_written.data_dir, flags, todo)
        done = _split(proc.stdout)
        per_file.update(done)
        if proc.returncode == 0:
            break
        last = list(done)[-1] if done else None
        assert last in todo, f"kafka-dump-log failed before any file:\n{proc.stderr[-3000:]}"
        crashed[last] = next(
            (line for line in proc.stderr.splitlines() if "Exception" in line), proc.stderr[-300:]
        )
        todo = todo[todo.index(last) + 1 :]
    return per_file, crashed


def _dump_both(where, files: list[str], flags: tuple[str, ...], kafka_files: list[str]):
    """Kafka's output per file of ``kafka_files`` with the files it stopped on, and kafkalog's
    run on ``files`` (files given positionally: no one argument of 128 KiB), at the same time."""
    cmd = [*_kafkalog_bin(), "dump", "--quiet", *flags, "--", *files]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        ours = subprocess.Popen(cmd, cwd=where.data_dir, stdout=out, stderr=err)
        try:
            kafka, crashed = _kafka_dump(where, kafka_files, flags) if kafka_files else ({}, {})
        finally:
            ours.wait()
        out.seek(0)
        err.seek(0)
        result = subprocess.CompletedProcess(
            cmd, ours.returncode, _text(out.read()), _text(err.read())
        )
    return kafka, crashed, result


def _check(kafka_written, files, flags, label, *, kafka_skips=(), problems=False) -> int:
    """Compare both tools' stdout on ``files`` (kafkalog alone on ``kafka_skips``: the files
    Kafka's tool cannot open, docs/cli.md item 4, each of which kafkalog must report on stderr);
    ``problems``: kafkalog may exit 1 for data problems it reports. Returns the lines compared."""
    kafka_files = [f for f in files if f not in set(kafka_skips)]
    kafka, crashed, ours = _dump_both(kafka_written, files, flags, kafka_files)
    mine = _split(ours.stdout)
    for name in kafka_skips:  # (--index-sanity-check does not read the .log: no error then)
        reported = f"Error in {name}" in ours.stderr or "--index-sanity-check" in flags
        assert name in mine and reported, (name, ours.stderr[-2000:])
        del mine[name]
    # docs/cli.md item 1: where kafka-dump-log stops with a stack trace, kafkalog reports the
    # error on stderr (status 1) and goes on; what Kafka printed before it stopped must match.
    for name, exception in crashed.items():
        assert f"Error in {name}" in ours.stderr, (name, exception, ours.stderr[-2000:])
        mine[name] = mine.get(name, [])[: len(kafka[name])]
    statuses = {1} if crashed else {0, 1} if problems else {0}
    assert ours.returncode in statuses, (ours.returncode, ours.stderr[-3000:])
    assert "Traceback" not in ours.stderr, ours.stderr[-3000:]
    found = _differences(kafka, mine, label)
    new = [d for d in found if not d[4]]
    assert not new, _report(new, kafka_written.dist.version)
    if found:
        kinds: dict[str, list] = {}
        for d in found:
            kinds.setdefault(d[4], []).append(d)
        pytest.xfail(
            f"differs from Kafka {kafka_written.dist.version} only as reported (not yet fixed or "
            "documented): "
            + "; ".join(
                f"{kind} x{len(ds)}, e.g. {ds[0][0]}: kafka {_brief(ds[0][2])!r}, "
                f"kafkalog {_brief(ds[0][3])!r}"
                for kind, ds in kinds.items()
            )
        )
    return sum(len(lines) for lines in kafka.values())


@pytest.mark.parametrize("flags", list(FLAG_SETS), ids=list(FLAG_SETS))
def test_dump_matches_kafka(kafka_written, flags):
    files = _files(kafka_written.data_dir)
    kinds = {Path(f).suffix for f in files}
    assert {".log", ".index", ".timeindex", ".snapshot", ".txnindex"} <= kinds, kinds
    _check(kafka_written, files, FLAG_SETS[flags], " ".join(FLAG_SETS[flags]) or "(no flags)")


@pytest.mark.parametrize("topic", list(DECODERS), ids=list(DECODERS))
def test_dump_decoders_match_kafka(kafka_written, topic):
    files = [
        f for f in _files(kafka_written.data_dir, topic) if f.endswith((".log", ".checkpoint"))
    ]
    assert files, f"no {topic} segments"
    _check(kafka_written, files, (DECODERS[topic],), DECODERS[topic])
