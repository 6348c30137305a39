"""LogSegment (kafkalog.log.segment.log_segment): append, lookups, roll rules, recovery,
truncation; and real brokers' ``.index``/``.timeindex`` files against the ones kafkalog rebuilds
from the same ``.log``.

Batches are built with kafka-python 3.0.12 and segments read back with its
``kafka.record.MemoryRecords``; index files are parsed with ``struct``. The fixture part reads
../shared/fixtures (real broker data directories) and only ever writes to copies.
"""

from __future__ import annotations

import shutil
import struct
from bisect import bisect_left
from pathlib import Path

import pytest
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.log.clock import MockClock
from kafkalog.log.errors import IndexOffsetOverflowError
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.segment.log_segment import LogSegment, RollParams
from shared_fixtures import EXPECTED, KAFKA_DATA, requires_shared_fixtures

T0 = 1_700_000_000_000
INT_MAX = 2**31 - 1


def batch(offset: int, n: int, ts: int | list[int], size: int = 50, codec: int = 0) -> bytes:
    builder = KpBuilder(2, codec, 1 << 30)
    stamps = ts if isinstance(ts, list) else [ts + i for i in range(n)]
    for i in range(n):
        builder.append(stamps[i], b"k%d" % i, b"v" * size, [])
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, offset)
    return bytes(data)


def kp_batches(data: bytes) -> list[dict]:
    """position, size, last offset, max timestamp and record (offset, timestamp) per batch."""
    out, pos = [], 0
    records = KpRecords(data)
    while records.has_next():
        b = records.next_batch()
        assert b.validate_crc()
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        recs = [(r.offset, r.timestamp) for r in b]
        out.append(
            {"position": pos, "size": size, "last": recs[-1][0] if recs else b.base_offset,
             "max_ts": max(ts for _, ts in recs) if recs else -1, "records": recs}
        )  # fmt: skip
        pos += size
    assert pos == len(data)
    return out


def raw_entries(path: Path, entry: str) -> list[tuple[int, int]]:
    """Entries of an index file as stored: ``>ii`` (relative offset, position) for .index,
    ``>qi`` (timestamp, relative offset) for .timeindex; unwritten (zero) slots left out."""
    size = struct.calcsize(entry)
    data = path.read_bytes() if path.exists() else b""
    out = []
    for i in range(len(data) // size):
        a, b = struct.unpack_from(entry, data, i * size)
        relative = a if entry == ">ii" else b
        if (i > 0 and relative == 0) or (a, b) == (0, 0):
            break
        out.append((a, b))
    return out


def new_segment(directory: Path, base: int = 0, overrides: dict | None = None) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    return LogSegment.open(
        directory, base, LogConfig(overrides or {}), MockClock(now_ms=T0),
        writable=True, file_already_exists=False,
    )  # fmt: skip


def filled_segment(directory: Path, n: int = 30, interval: int = 200) -> tuple[LogSegment, bytes]:
    segment = new_segment(directory, 100, {"index.interval.bytes": interval})
    data = bytearray()
    offset = 100
    for i in range(n):
        b = batch(offset, 1 + i % 3, T0 + (i * 71) % 500, size=20 + (i * 13) % 90)
        segment.append(offset + i % 3, b)
        data += b
        offset += 1 + i % 3
    return segment, bytes(data)


# -- append and lookups ---------------------------------------------------------------------------
def test_a_multi_batch_append_indexes_each_batch_at_its_own_position(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, 0, {"index.interval.bytes": 0})
    chunk = batch(0, 2, T0) + batch(2, 2, T0 + 5) + batch(4, 1, T0 + 2)
    segment.append(4, chunk)
    segment.close()
    scan = kp_batches(chunk)
    # Kafka 4.x indexes per batch: the second and third batches, not the whole append.
    assert raw_entries(tmp_path / f"{0:020d}.index", ">ii") == [
        (3, scan[1]["position"]),
        (4, scan[2]["position"]),
    ]
    assert raw_entries(tmp_path / f"{0:020d}.timeindex", ">qi") == [(T0 + 6, 3)]


def test_translate_offset_and_timestamp_search_agree_with_a_scan(tmp_path: Path) -> None:
    segment, data = filled_segment(tmp_path)
    scan = kp_batches(data)
    last = scan[-1]["last"]
    assert segment.read_next_offset() == last + 1
    for target in range(90, last + 3):
        found = segment.translate_offset(target)
        want = next((b for b in scan if b["last"] >= target), None)
        if want is None:
            assert found is None
        else:
            assert (found.position, found.size, found.offset) == (
                want["position"], want["size"], want["last"],
            )  # fmt: skip
    records = [r for b in scan for r in b["records"]]
    for target in range(T0 - 1, T0 + 502):
        for start in (100, 130):
            found = segment.find_offset_by_timestamp(target, start)
            want = next(((ts, o) for o, ts in records if ts >= target and o >= start), None)
            assert (None if found is None else (found.timestamp, found.offset)) == want


def test_read_is_a_window_from_the_batch_holding_the_offset(tmp_path: Path) -> None:
    segment, data = filled_segment(tmp_path)
    scan = kp_batches(data)
    holder = next(b for b in scan if b["last"] >= 120)
    info = segment.read(120, 100, min_one_message=True)
    assert (info.records.start, info.records.end) == (
        holder["position"], holder["position"] + max(100, holder["size"]),
    )  # fmt: skip
    info = segment.read(120, 1000, max_position=holder["position"] + 10)
    assert info.records.size_in_bytes() == 10
    assert segment.read(scan[-1]["last"] + 1, 100) is None
    with pytest.raises(ValueError):
        segment.read(120, -1)


def test_append_refuses_offsets_that_do_not_fit_the_index(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, 0)
    with pytest.raises(IndexOffsetOverflowError):
        segment.append(INT_MAX + 1, batch(INT_MAX + 1, 1, T0))
    assert segment.size() == 0


def test_should_roll_follows_kafkas_conditions(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, 0, {"segment.index.bytes": 48, "index.interval.bytes": 0})

    def params(**kw) -> RollParams:
        base = {"max_segment_ms": 1000, "max_segment_bytes": 1000,
                "max_timestamp_in_messages": T0, "max_offset_in_messages": 0,
                "messages_size": 10, "now": T0}  # fmt: skip
        return RollParams(**{**base, **kw})

    assert not segment.should_roll(params())
    assert not segment.should_roll(params(now=T0 + 10**6))  # empty: age does not count
    first = batch(0, 1, T0, size=100)
    segment.append(0, first)
    size = len(first)
    assert not segment.should_roll(params(messages_size=1000 - size))
    assert segment.should_roll(params(messages_size=1000 - size + 1))
    assert not segment.should_roll(params(max_timestamp_in_messages=T0 + 1000))
    assert segment.should_roll(params(max_timestamp_in_messages=T0 + 1001))
    assert segment.should_roll(params(max_offset_in_messages=INT_MAX + 1))
    for i in range(1, 7):  # 6 offset-index slots
        assert not segment.should_roll(params())
        segment.append(i, batch(i, 1, T0))
    assert segment.offset_index.is_full() and segment.should_roll(params())


# -- recovery -------------------------------------------------------------------------------------
def test_recovery_rebuilds_exactly_the_indexes_that_appending_wrote(tmp_path: Path) -> None:
    segment, _ = filled_segment(tmp_path / "a")
    segment.close()
    files = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    for suffix in (".index", ".timeindex"):
        (tmp_path / "a" / f"{100:020d}{suffix}").unlink()
    again = LogSegment.open(
        tmp_path / "a", 100, LogConfig({"index.interval.bytes": 200}), MockClock(), writable=True
    )
    assert again.recover() == 0
    again.close()
    assert {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()} == files


@pytest.mark.parametrize(
    "damage",
    ["flip a CRC byte", "zero-filled tail", "partial batch", "garbage tail", "older batches again"],
)
def test_recovery_cuts_the_log_at_the_first_bad_batch(tmp_path: Path, damage: str) -> None:
    segment, data = filled_segment(tmp_path)
    segment.close()
    scan = kp_batches(data)
    bad = scan[17]
    path = tmp_path / f"{100:020d}.log"
    if damage == "flip a CRC byte":
        broken = bytearray(data)
        broken[bad["position"] + bad["size"] - 1] ^= 0x55
        path.write_bytes(bytes(broken))
        keep = bad["position"]
    else:
        keep = len(data)
        following = batch(scan[-1]["last"] + 1, 3, T0, size=200)
        tail = {"zero-filled tail": bytes(4096), "partial batch": following[:-3],
                "garbage tail": b"\x07" * 999,
                "older batches again": data[: bad["position"] + 9]}[damage]  # fmt: skip
        path.write_bytes(data + tail)
    original = path.stat().st_size
    cut_at = []
    segment = LogSegment.open(
        tmp_path, 100, LogConfig({"index.interval.bytes": 200}), MockClock(), writable=True
    )
    cut = segment.recover(before_truncate=cut_at.append)
    assert cut == original - keep
    assert cut_at == [keep]
    assert segment.size() == keep and segment.read_next_offset() == (
        bad["records"][0][0] if keep == bad["position"] else scan[-1]["last"] + 1
    )
    assert all(p < keep for _, p in raw_entries(tmp_path / f"{100:020d}.index", ">ii"))
    segment.close()
    assert path.read_bytes() == data[:keep]
    kp_batches(path.read_bytes())  # decodes to the end


def test_truncate_to_cuts_at_the_batch_and_trims_the_indexes(tmp_path: Path) -> None:
    segment, data = filled_segment(tmp_path)
    scan = kp_batches(data)
    target = scan[20]["records"][1][0] if len(scan[20]["records"]) > 1 else scan[20]["last"]
    removed = segment.truncate_to(target)
    assert removed == len(data) - scan[20]["position"]
    assert segment.read_next_offset() == scan[20]["records"][0][0]
    assert all(e.offset < target for e in segment.offset_index)
    assert all(e.offset < target for e in segment.time_index)
    segment.append(scan[20]["records"][0][0], batch(scan[20]["records"][0][0], 1, T0))
    segment.close()
    kp_batches((tmp_path / f"{100:020d}.log").read_bytes())


# -- real brokers' indexes ------------------------------------------------------------------------
def _fixture_segments() -> list[str]:
    picked = set()
    for rel, facts in EXPECTED.get("indexes", {}).items():
        if (
            facts["kind"] in ("index", "timeindex")
            and facts.get("entries")
            and facts["log_present"]
        ):
            picked.add(rel.rsplit(".", 1)[0])
    return sorted(picked)


@requires_shared_fixtures
@pytest.mark.parametrize("stem", _fixture_segments())
def test_kafkas_indexes_agree_with_the_ones_kafkalog_rebuilds(tmp_path: Path, stem: str) -> None:
    source = KAFKA_DATA / stem
    base = int(source.name)
    copy = tmp_path / source.parent.name
    shutil.copytree(source.parent, copy)
    for suffix in (".index", ".timeindex"):
        (copy / f"{source.name}{suffix}").unlink(missing_ok=True)
    ours = LogSegment.open(copy, base, LogConfig(), MockClock(), writable=True)
    assert ours.recover() == 0
    ours.close()

    data = Path(f"{source}.log").read_bytes()
    scan = kp_batches(data)
    by_position = {b["position"]: b for b in scan}

    lasts = [b["last"] for b in scan]

    def holder(offset: int) -> dict:
        return scan[bisect_left(lasts, offset)]

    kafka_off = [(base + r, p) for r, p in raw_entries(Path(f"{source}.index"), ">ii")]
    ours_off = [(base + r, p) for r, p in raw_entries(copy / f"{source.name}.index", ">ii")]
    kafka_time = [(t, base + r) for t, r in raw_entries(Path(f"{source}.timeindex"), ">qi")]
    ours_time = [(t, base + r) for t, r in raw_entries(copy / f"{source.name}.timeindex", ">qi")]

    # Every Kafka offset-index entry names the last offset of the batch at its position.
    for offset, position in kafka_off:
        assert by_position[position]["last"] == offset
    # Every Kafka time-index entry names an offset of a batch with that max timestamp (older
    # brokers: the record holding it; Kafka 4.x: the batch's last offset), the same batch as ours.
    ours_by_ts = dict(ours_time)
    for ts, offset in kafka_time:
        assert holder(offset)["max_ts"] == ts
        if ts in ours_by_ts:
            assert holder(ours_by_ts[ts]) is holder(offset)
    # Kafka adds one time entry at roll or clean shutdown beyond the interval entries; more mean
    # the broker restarted while writing this segment, which resets its bytes-since-last-entry
    # counter (so later entries come later than in one session, as kafkalog rebuilds it).
    restarts = len(kafka_time) - len(kafka_off) - 1
    if restarts <= 0:
        assert kafka_off == ours_off
        assert [t for t, _ in kafka_time] == [t for t, _ in ours_time]
    else:
        previous = 0
        for _, position in kafka_off:
            assert position - previous > 4096  # index.interval.bytes passed since the last
            previous = position
        assert kafka_off[:1] == ours_off[:1]
    # Lookups through either index find the same batch, and the same record by time.
    kafka_view = LogSegment.open(source.parent, base, LogConfig(), MockClock())
    ours_view = LogSegment.open(copy, base, LogConfig(), MockClock())
    try:
        # Every offset of small segments; of big ones, every entry's neighbourhood and a sample.
        step = max(1, (lasts[-1] - base) // 400)
        targets = set(range(base, lasts[-1] + 2, step)) | {lasts[-1] + 1}
        targets |= {o + d for o, _ in kafka_off + ours_off for d in (-1, 0, 1)}
        for target in sorted(targets):
            assert kafka_view.translate_offset(target) == ours_view.translate_offset(target)
        stamps = sorted({ts for b in scan for _, ts in b["records"]} | {t for t, _ in kafka_time})
        for target in stamps[:: max(1, len(stamps) // 300)] + [t for t, _ in kafka_time]:
            assert kafka_view.find_offset_by_timestamp(
                target, base
            ) == ours_view.find_offset_by_timestamp(target, base)
    finally:
        kafka_view.close()
        ours_view.close()


@requires_shared_fixtures
@pytest.mark.parametrize("stem", _fixture_segments())
def test_kafkas_own_indexes_pass_the_checks_made_before_trusting_them(stem: str) -> None:
    """Real brokers' indexes (Kafka 0.10 to 4.x) are never taken for damaged: their entries
    order and range pass the loader's checks, and every position a lookup uses passes the read
    path's check, so lookups keep using them (and agree with a scan of the log)."""
    source = KAFKA_DATA / stem
    base = int(source.name)
    segment = LogSegment.open(source.parent, base, LogConfig(), MockClock())
    try:
        segment.offset_index.check_entries(segment.log.size_in_bytes())
        segment.time_index.check_entries()
        scan = kp_batches(Path(f"{source}.log").read_bytes())
        lasts = [b["last"] for b in scan]
        offsets = sorted({o for b in scan for o, _ in b["records"]} | set(lasts))
        for offset in offsets:
            found = segment.translate_offset(offset)
            want = scan[bisect_left(lasts, offset)]
            assert (found.position, found.offset) == (want["position"], want["last"]), offset
        assert segment.index_trusted
    finally:
        segment.close()


# -- indexes are hints ----------------------------------------------------------------------------
def test_a_position_no_batch_starts_at_is_never_used_and_a_writable_index_is_rebuilt(
    tmp_path: Path,
) -> None:
    segment, data = filled_segment(tmp_path)
    segment.close()
    scan = kp_batches(data)
    good = raw_entries(tmp_path / f"{100:020d}.index", ">ii")
    good_time = raw_entries(tmp_path / f"{100:020d}.timeindex", ">qi")
    assert len(good) > 4
    # Plausible entries (increasing, inside the log), each position one batch too late.
    later = {b["position"]: scan[i + 1]["position"] for i, b in enumerate(scan[:-1])}
    shifted = [(r, later[p]) for r, p in good if p in later]
    (tmp_path / f"{100:020d}.index").write_bytes(
        b"".join(struct.pack(">ii", r, p) for r, p in shifted)
    )
    lasts = [b["last"] for b in scan]
    for writable in (False, True):
        segment = LogSegment.open(tmp_path, 100, LogConfig({"index.interval.bytes": 200}),
                                  MockClock(now_ms=T0), writable=writable)  # fmt: skip
        for offset in range(100, lasts[-1] + 1):
            found = segment.translate_offset(offset)
            assert found.position == scan[bisect_left(lasts, offset)]["position"], offset
        assert segment.index_trusted == writable  # rebuilt, or set aside (read-only)
        segment.close()
        assert (raw_entries(tmp_path / f"{100:020d}.index", ">ii") == good) == writable
    assert raw_entries(tmp_path / f"{100:020d}.timeindex", ">qi") == good_time
    assert (tmp_path / f"{100:020d}.log").read_bytes() == data
