"""The read contract: what each reader must do with a damaged copy, given the independent
:class:`~.expected.Expected` (see expected.py for how the valid prefix is found).

- ``clean``: every record; success; no warning about damage.
- ``torn-tail``: exactly the prefix; success; a warning naming the file and the byte position.
- ``damage``, default: a typed error naming the file and the byte position (CLI: exit 1, the
  message on stderr, no traceback; API: a KafkalogError whose str has the file name and
  "position"); records emitted before it are a prefix of the valid prefix.
- ``damage``, opt-out: success; every record of the prefix first, in order; after it only records
  of batches that are valid on their own, offsets increasing; a warning naming file and position.
- never a traceback, a hang, an exception that is not a KafkalogError/OSError with a message.

A file that cannot be read at all (FIFO, symlink loop, directory, a ``.log`` that is gone) has no
byte position: there the file's name is enough, CLI exit 3 (I/O error) is accepted besides 1, and
OSError besides KafkalogError; the opt-out may refuse it too (it is no data to skip but a file to
fix), naming it. An error may name the start of an earlier batch of the same file
than the first one kafka-python refuses (a baseOffset moved up is seen where it is, before the
offsets go back), as long as no record from past its position was emitted.

``kafkalog dump`` is kafka-dump-log: it lists the file's batches as far as their framing goes,
invalid ones too (Kafka's tool prints ``isvalid: false`` and goes on), so records past the damage
are allowed there; it must list the valid prefix and report the damage (exit 1, naming file and
position), except where kafka-dump-log itself reports nothing (offsets that go back: its
"Non-consecutive offsets" report; a negative lastOffsetDelta) or fails (a zero-filled tail reads
as a record size 0, which Kafka's tool throws on: exit 1 is accepted there too).

:func:`run_case` copies a source, damages the copy, runs readers and returns :class:`Failure`s,
each self-explaining (reader, source, damage, expected, got, command).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .damage import Damage, Source
from .expected import Expected, FileScan, Rec, expected_for
from .readers import READERS, Outcome, Reader

__all__ = ["Failure", "check", "run_case"]

KEEP = 3  # damaged copies kept per work directory for a failure's command to be rerun
_POSITION = re.compile(r"position\D{0,24}?(\d+)", re.IGNORECASE)


@dataclass
class Failure:
    reader: str
    source: str
    damage: str
    family: str
    expected: str
    problems: list[str]
    got: str
    command: str

    def __str__(self) -> str:
        return (
            f"[{self.reader}] on {self.source} damaged by {self.damage}\n"
            f"  expected: {self.expected}\n"
            f"  problems: {'; '.join(self.problems)}\n"
            f"  got: {self.got}\n"
            f"  command: {self.command}"
        )


def names_position(
    text: str, start: int | None, end: int | None, earlier: tuple[int, ...] = ()
) -> bool:
    """Whether ``text`` names a position in ``[start, end]``, or one of the batch starts
    ``earlier`` (of the same file, before ``start``)."""
    if start is None:
        return True
    end = start if end is None else max(end, start)
    return any(start <= int(m) <= end or int(m) in earlier for m in _POSITION.findall(text))


def _earlier(exp: Expected) -> tuple[int, ...]:
    scan = exp.files.get(exp.file) if exp.file else None
    return tuple(b.position for b in scan.batches) if scan else ()


def _moved_before(exp: Expected, text: str) -> bool:
    """Offsets going back at a segment's first batch: the error may name the previous segment's
    last batch instead (its baseOffset moved up past the next segment's base)."""
    if not exp.reason.startswith("first offset") or exp.position != 0:
        return False
    earlier = sorted(n for n in exp.files if exp.file and n < exp.file)
    if not earlier or not exp.files[earlier[-1]].batches:
        return False
    last = exp.files[earlier[-1]].batches[-1].position
    return earlier[-1] in text and names_position(text, last, last)


def _lines_naming(text: str, names: list[str]) -> list[str]:
    return [line for line in text.splitlines() if any(n in line for n in names)]


def _key(r: Rec, sized: bool = False) -> tuple:
    if sized:  # text dump: offset, timestamp and the sizes of key and value
        return (
            r.offset,
            r.timestamp,
            None if r.key is None else len(r.key),
            None if r.value is None else len(r.value),
        )
    return (r.offset, r.timestamp, r.key, r.value, r.headers)


def _diff(got: list[Rec], want: list[Rec], sized: bool = False) -> str | None:
    g = [_key(r, sized) for r in got]
    w = [_key(r, sized) for r in want]
    if g == w:
        return None
    for i, (a, b) in enumerate(zip(g, w)):
        if a != b:
            return (
                f"record #{i} differs: got {got[i].short()} want {want[i].short()} "
                f"({len(got)} got, {len(want)} expected)"
            )
    return f"{len(got)} records, expected {len(want)}"


def _is_prefix(got: list[Rec], want: list[Rec], sized: bool = False) -> bool:
    return [_key(r, sized) for r in got] == [_key(r, sized) for r in want[: len(got)]]


def _error_ok(reader: Reader, out: Outcome, unreadable: bool) -> str | None:
    """Why the failure is not the typed error the contract asks for, or None."""
    if reader.api:
        from kafkalog.errors import KafkalogError

        if out.error_type is None:
            return "no exception"
        allowed = (KafkalogError, OSError) if unreadable else (KafkalogError,)
        if not issubclass(out.error_type, allowed):
            return f"{out.error_type.__name__} is not a {'/'.join(a.__name__ for a in allowed)}"
        return None
    allowed_codes = (1, 3) if unreadable else (1,)
    if out.code not in allowed_codes:
        return f"exit status {out.code}, expected {' or '.join(map(str, allowed_codes))}"
    return None


def check(reader: Reader, exp: Expected, out: Outcome, log_names: list[str]) -> list[str]:
    """The contract's violations by one reader's outcome (empty: it agrees)."""
    problems: list[str] = []
    if out.timed_out:
        return [f"timed out after {out.argv}"]
    if out.traceback:
        problems.append("a Python traceback")
    if reader.api and out.error_type is not None and out.error is not None:
        from kafkalog.errors import KafkalogError

        if not issubclass(out.error_type, KafkalogError | OSError):
            problems.append(f"raised {out.error_type.__name__}, not a KafkalogError/OSError")
        if out.error.endswith("(no message)"):
            problems.append("an exception without a message")
    if exp.kind == "undetermined":
        return problems  # bytes Kafka reads and kafka-python refuses: nothing to compare
    if reader.kind == "records":
        problems += _check_records(reader, exp, out, log_names)
    elif reader.kind == "verify":
        problems += _check_verify(exp, out, log_names)
    elif reader.kind == "stats":
        problems += _check_stats(exp, out, log_names)
    return problems


def _messages(reader: Reader, out: Outcome) -> str:
    """Where the reader's error and warnings are: stderr (CLI), warnings and the exception (API)."""
    return "\n".join(x for x in (out.stderr, out.error or "") if x)


def _check_records(reader: Reader, exp: Expected, out: Outcome, log_names: list[str]) -> list[str]:
    problems = []
    want = exp.records if reader.control else exp.data_records
    got = out.records or []
    text = _messages(reader, out)
    if exp.kind == "clean":
        if not out.ok:
            problems.append(f"failed on a log with no damage ({out.error or f'exit {out.code}'})")
        if d := _diff(got, want):
            problems.append(f"records: {d}")
        if talk := _lines_naming(out.stderr, log_names):
            problems.append(f"warned about a log with no damage: {talk[0][:200]!r}")
        return problems
    if exp.kind == "damage" and reader.opt_out and exp.unreadable and not out.ok:
        # A file that cannot be read is no data loss to skip: the opt-out may still refuse it.
        if why := _error_ok(reader, out, True):
            problems.append(why)
        if exp.file not in text:
            problems.append(f"the error does not name {exp.file}")
        return problems
    if exp.kind == "torn-tail" or (exp.kind == "damage" and reader.opt_out):
        if not out.ok:
            problems.append(f"did not succeed ({out.error or f'exit {out.code}'})")
        if exp.kind == "torn-tail":
            if d := _diff(got, want):
                problems.append(f"records: {d}")
        else:
            problems += _check_opt_out_records(got, want, exp, reader)
        if exp.kind == "damage" and _moved_before(exp, text):
            pass  # the previous segment's last batch is named: see _moved_before
        elif not _lines_naming(text, [exp.file]):
            problems.append(f"no warning naming {exp.file}")
        elif not exp.unreadable and not names_position(
            text, exp.position, exp.end, _earlier(exp) if exp.kind == "damage" else ()
        ):
            problems.append(f"the warning does not name position {_span(exp)}")
        return problems
    # damage, fail on data loss
    if out.ok:
        problems.append("succeeded on damage (expected a typed error)")
    elif why := _error_ok(reader, out, exp.unreadable):
        problems.append(why)
    if not out.ok and not _moved_before(exp, text):
        if exp.file not in text:
            problems.append(f"the error does not name {exp.file}")
        elif not exp.unreadable and not names_position(text, exp.position, exp.end, _earlier(exp)):
            problems.append(f"the error does not name position {_span(exp)}")
    if not _is_prefix(got, want):
        problems.append(
            f"emitted records that are not a prefix of the valid prefix: "
            f"{_diff(got[: len(want)], want[: len(got)]) or _past(got, want)}"
        )
    return problems


def _past(got: list[Rec], want: list[Rec]) -> str:
    extra = got[len(want) :]
    return f"{len(extra)} records past the damage, first {extra[0].short()}" if extra else ""


def _span(exp: Expected) -> str:
    if exp.end is None or exp.end <= (exp.position or 0):
        return str(exp.position)
    return f"{exp.position} (up to {exp.end})"


def _check_opt_out_records(
    got: list[Rec], want: list[Rec], exp: Expected, reader: Reader
) -> list[str]:
    problems = []
    head = got[: len(want)]
    if (d := _diff(head, want)) and exp.reason.startswith("first offset"):
        # Offsets going back: the batch before them may be the damaged one (a baseOffset moved
        # up), and skipping it is as right as skipping the batch after it.
        scan = exp.files.get(exp.file) if exp.file else None
        if exp.position == 0:  # at a segment's start: the previous segment's last batch
            earlier = sorted(n for n in exp.files if exp.file and n < exp.file)
            scan = exp.files[earlier[-1]] if earlier else None
        moved = {_key(r) for r in scan.batches[-1].records} if scan and scan.batches else set()
        want = [r for r in want if _key(r) not in moved]
        head = got[: len(want)]
        d = _diff(head, want)
    if d:
        problems.append(f"the valid prefix is not all there first: {d}")
        return problems
    later = {_key(r) for r in exp.later if reader.control or not r.control}
    prev = want[-1].offset if want else -1
    for r in got[len(want) :]:
        if _key(r) not in later:
            problems.append(f"record {r.short()} past the damage is not a valid record of the log")
            break
        if r.offset <= prev:
            problems.append(f"offset {r.offset} past the damage does not increase (after {prev})")
            break
        prev = r.offset
    return problems


def check_dump(reader: Reader, fs: FileScan, last_segment: bool, out: Outcome) -> list[str]:
    """``kafkalog dump --deep-iteration FILE`` of one ``.log`` (the file alone: its own prefix)."""
    problems: list[str] = []
    if out.timed_out:
        return ["timed out"]
    if out.traceback:
        problems.append("a Python traceback")
    sized = reader.name == "dump"
    got = out.records or []
    want = fs.records
    name = fs.name
    if fs.undetermined:
        return problems
    if fs.problem is None:
        errors = [f for f in out.findings if f.get("type") == "error"]
        if fs.odd_control and out.code == 1 and (name in out.stderr or errors):
            return problems  # kafka-dump-log throws on a control record key it cannot parse
        if out.code != 0:
            problems.append(f"exit status {out.code} on a file with no damage")
        if d := _diff(got, want, sized):
            problems.append(f"records: {d}")
        if talk := _dump_reports(out.stderr):
            problems.append(f"stderr on a file with no damage: {talk[:200]!r}")
        if errors := [f for f in out.findings if f.get("type") == "error"]:
            problems.append(f"an error object on a file with no damage: {errors[0]}")
        return problems
    if fs.unreadable:
        if out.code not in (1, 3):
            problems.append(f"exit status {out.code} on an unreadable file (expected 1 or 3)")
        if name not in out.stderr:
            problems.append(f"stderr does not name {name}")
        return problems
    if fs.tail:
        zeros = fs.zeros  # kafkalog dump reports a zero-filled tail as an error
        if out.code != 0 and not (zeros and out.code == 1):
            problems.append(f"exit status {out.code} on a torn tail (expected 0)")
        if d := _diff(got, want, sized):
            problems.append(f"records: {d}")
        summary = [f for f in out.findings if f.get("type") == "summary"]
        told = names_position(out.stderr, fs.position, fs.end) and name in out.stderr
        # kafka-dump-log's own line: "Found N invalid bytes at the end of NAME" (N from here)
        told = told or f"Found {fs.size - fs.position} invalid bytes at the end of {name}" in (
            out.stdout + out.stderr
        )
        if reader.name == "dump --json" and summary:
            told = told or summary[-1].get("validBytes") == fs.position
        if not told:
            problems.append(
                f"no warning naming {name} and position {fs.position} (the torn tail's start)"
            )
        return problems
    if fs.problem and _dump_silent(fs) and out.code == 0:
        if d := _diff(got[: len(want)], want, sized):
            problems.append(f"the file's valid prefix is not listed: {d}")
        return problems  # kafka-dump-log reports nothing here either
    if out.code != 1:
        problems.append(f"exit status {out.code} on damage (expected 1)")
    if reader.name == "dump --json":  # errors are objects of the file's output, with positions
        end = max(fs.end or 0, fs.position)
        errors = [f for f in out.findings if f.get("type") == "error"]
        if not any(
            f.get("position") is not None and fs.position <= f["position"] <= end for f in errors
        ):
            problems.append(
                f"no error object at position {fs.position} (up to {fs.end}): "
                f"{[f.get('position') for f in errors]}"
            )
    elif name not in out.stderr:
        problems.append(f"stderr does not name {name}")
    elif not names_position(out.stderr, fs.position, fs.end):
        problems.append(f"stderr does not name position {fs.position} (up to {fs.end})")
    if d := _diff(got[: len(want)], want, sized):
        problems.append(f"the file's valid prefix is not listed: {d}")
    return problems


def _dump_silent(fs: FileScan) -> bool:
    """Problems kafka-dump-log does not report as errors (scan_file's wording): offsets that go
    back (its "Non-consecutive offsets" lines), a negative lastOffsetDelta, record offsets out
    of their batch's range, an inner message's CRC (it prints "isvalid"), and a size that fits
    its --max-message-size (5 MiB by default, where max.message.bytes is 1 MiB): it prints
    such an entry as a partial tail."""
    problem = fs.problem or ""
    if problem.startswith(
        ("first offset", "negative lastOffsetDelta", "record offset", "inner message crc")
    ):
        return True
    m = re.match(r"size (\d+) past max.message.bytes", problem)
    return m is not None and int(m.group(1)) + 12 <= 5 * 1024 * 1024


def _dump_reports(stderr: str) -> str:
    """dump's stderr without kafka-dump-log's offset-gap report (gaps are not damage)."""
    lines = stderr.splitlines()
    keep = []
    skip_indented = False
    for line in lines:
        if line.startswith("Non-consecutive offsets in "):
            skip_indented = True
            continue
        if skip_indented and line.startswith("  "):
            continue
        skip_indented = False
        if line.strip():
            keep.append(line)
    return "\n".join(keep)


def _finding_names(f: dict, name: str) -> bool:
    path = Path(str(f.get("path")))
    return path.name == name or name in str(f.get("message", ""))


def _check_verify(exp: Expected, out: Outcome, log_names: list[str]) -> list[str]:
    problems = []
    errors_on_logs = [
        f
        for f in out.findings
        if f.get("severity") == "error" and str(f.get("path", "")).endswith(".log")
    ]
    if exp.kind == "clean":
        if any(fs.odd_control for fs in exp.files.values()):
            return problems  # a producer's control batch of data records: Kafka cannot load it
        if errors_on_logs:
            f = errors_on_logs[0]
            problems.append(
                f"an error finding on a log with no damage: {f.get('code')} "
                f"{Path(str(f.get('path'))).name}@{f.get('position')}: "
                f"{str(f.get('message'))[:160]}"
            )
        return problems
    if exp.kind == "torn-tail":
        hits = [
            f
            for f in out.findings
            if f.get("severity") == "warning"
            and _finding_names(f, exp.file)
            and (f.get("position") is not None and exp.position <= f["position"] <= exp.end)
        ]
        if not hits:
            problems.append(f"no warning finding naming {exp.file} at position {_span(exp)}")
        if errors_on_logs:
            f = errors_on_logs[0]
            problems.append(
                f"an error finding about the log's records on a torn tail: "
                f"{f.get('code')} {Path(str(f.get('path'))).name}@{f.get('position')}: "
                f"{str(f.get('message'))[:160]}"
            )
        return problems
    stem = exp.file[:20]
    hits = [
        f
        for f in out.findings
        if f.get("severity") == "error"
        and (_finding_names(f, exp.file) or (exp.unreadable and stem in str(f.get("path"))))
    ]
    if not exp.unreadable:
        earlier = _earlier(exp)
        hits = [
            f
            for f in hits
            if f.get("position") is not None
            and (
                exp.position <= f["position"] <= max(exp.end or 0, exp.position)
                or f["position"] in earlier
            )
        ]
    if not hits:
        problems.append(
            f"no error finding naming {exp.file}"
            + ("" if exp.unreadable else f" at position {_span(exp)}")
        )
    if out.code != 1:
        problems.append(f"exit status {out.code} on damage (expected 1)")
    return problems


def _check_stats(exp: Expected, out: Outcome, log_names: list[str]) -> list[str]:
    problems = []
    st = out.stats
    if st is None:
        if exp.kind != "damage":
            problems.append(f"no partition object (exit {out.code})")
            return problems
    text = (
        out.stderr
        + "\n"
        + (str(st.get("error")) if st else "")
        + "\n"
        + "\n".join(map(str, (st or {}).get("warnings") or []))
    )
    if exp.kind in ("clean", "torn-tail"):
        if out.code != 0:
            problems.append(f"exit status {out.code}")
        if st.get("records") != len(exp.records):
            problems.append(f"records = {st.get('records')}, expected {len(exp.records)}")
        if st.get("error"):
            problems.append(f"error {st.get('error')!r}")
        if exp.kind == "clean":
            if talk := _lines_naming(text, log_names):
                problems.append(f"warned about a log with no damage: {talk[0][:200]!r}")
        elif exp.file not in text or not names_position(text, exp.position, exp.end):
            problems.append(f"no warning naming {exp.file} and position {_span(exp)}")
        return problems
    if out.code != 1:
        problems.append(f"exit status {out.code} on damage (expected 1)")
        if st and st.get("records") != len(exp.records):
            problems.append(
                f"records = {st.get('records')} silently (valid prefix {len(exp.records)})"
            )
    if exp.file not in text:
        problems.append(f"the error does not name {exp.file}")
    elif not exp.unreadable and not names_position(text, exp.position, exp.end, _earlier(exp)):
        problems.append(f"the error does not name position {_span(exp)}")
    return problems


def run_case(
    source: Source,
    source_root: Path,
    damage: Damage | None,
    work: Path,
    readers: list[Reader] = READERS,
    *,
    subprocess_: bool = False,
) -> list[Failure]:
    """Copy ``source_root`` (a built data directory), apply ``damage``, run ``readers``.

    The copy is made in ``work``; it is deleted when every reader agrees, and kept (up to
    :data:`KEEP` per ``work`` directory) when one does not, so that the failure's command can be
    run again by hand."""
    kept = sorted(work.glob("case-*"))
    case = work / f"case-{len(kept)}"
    if case.exists() or case.is_symlink():
        shutil.rmtree(case)
    shutil.copytree(source_root, case, symlinks=True)
    part = case / source.dirname
    failures: list[Failure] = []
    try:
        if damage is not None:
            damage.apply(part)
        exp = expected_for(part)
        log_names = sorted(set(exp.files) | ({exp.file} if exp.file else set()))
        dname = damage.name if damage else "none"
        family = damage.family if damage else "none"
        for reader in readers:
            if reader.kind == "dump":
                for name, fs in exp.files.items():
                    if (part / name).is_dir() and not (part / name).is_symlink():
                        continue  # dump takes files (a directory is its usage error)
                    out = reader.run(case, source.topic, part / name, subprocess_=subprocess_)
                    last = name == max(exp.files)
                    problems = check_dump(reader, fs, last, out)
                    if problems:
                        kind = (
                            "clean"
                            if fs.problem is None
                            else "unreadable"
                            if fs.unreadable
                            else "torn-tail"
                            if fs.tail
                            else "damage"
                        )
                        failures.append(
                            Failure(
                                reader.name,
                                source.name,
                                dname,
                                family,
                                f"{name} alone: {kind}"
                                + (f" at {fs.position} ({fs.problem})" if fs.problem else "")
                                + f"; {len(fs.records)} records",
                                problems,
                                out.summary(),
                                " ".join(out.argv),
                            )
                        )
                continue
            out = reader.run(case, source.topic, part, subprocess_=subprocess_)
            problems = check(reader, exp, out, log_names)
            if problems:
                failures.append(
                    Failure(
                        reader.name,
                        source.name,
                        dname,
                        family,
                        exp.describe(),
                        problems,
                        out.summary(),
                        " ".join(out.argv),
                    )
                )
        return failures
    finally:
        if not failures or len(kept) >= KEEP:
            shutil.rmtree(case, ignore_errors=True)
