"""``kafkalog retention``: the dry run changes no byte and names the segments --apply deletes;
which ones is worked out here from file sizes and kafka-python's decoded timestamps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .operate_support import T0, build, copy, digest, json_lines, kp_records, run_main, run_script

RETENTION_MS = 20


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    topics = {
        "bytes": (1, {"retention.bytes": "5000"}),
        "aged": (1, {"retention.ms": str(RETENTION_MS)}),
        "kept": (1, {"cleanup.policy": "compact", "retention.ms": "1"}),
    }
    return build(tmp_path_factory.mktemp("retention") / "data", topics)


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return copy(valid_dir, tmp_path)


def by_size(part: Path, limit: int) -> list[str]:
    """Oldest segments while the log stays at or over ``limit`` bytes without them."""
    logs = sorted(part.glob("*.log"))
    excess = sum(p.stat().st_size for p in logs) - limit
    doomed = []
    for log in logs:
        if excess - log.stat().st_size < 0:
            break
        excess -= log.stat().st_size
        doomed.append(log.name)
    return doomed


def by_time(part: Path, now: int) -> list[str]:
    """Oldest segments whose newest record is older than retention.ms at ``now``."""
    doomed = []
    for log in sorted(part.glob("*.log")):
        if now - max(ts for _, _, ts in kp_records(log)) <= RETENTION_MS:
            break
        doomed.append(log.name)
    return doomed


def test_dry_run_then_apply(data_dir: Path) -> None:
    now = T0 + 40
    expected = {"bytes-0": by_size(data_dir / "bytes-0", 5000),
                "aged-0": by_time(data_dir / "aged-0", now), "kept-0": []}  # fmt: skip
    assert expected["bytes-0"] and expected["aged-0"]
    before = digest(data_dir)
    objects = json_lines(run_main("retention", "--json", "--now-ms", now, data_dir, status=0)[0])
    assert digest(data_dir) == before
    planned = {o["partition"]: [Path(s["path"]).name for s in o["segments"]]
               for o in objects if o["type"] == "partition"}  # fmt: skip
    assert planned == expected
    summary = objects[-1]
    assert summary["segments"] == sum(map(len, expected.values())) and summary["dryRun"]

    run_script("retention", "--apply", "--now-ms", str(now), data_dir, status=0)
    for partition, names in expected.items():
        remaining = sorted(p.name for p in (data_dir / partition).glob("*.log"))
        assert not set(names) & set(remaining) and remaining
    lines = (data_dir / "log-start-offset-checkpoint").read_text().splitlines()[2:]
    starts = dict(line.rsplit(" ", 1) for line in lines)
    first = min((data_dir / "aged-0").glob("*.log")).name
    assert int(starts["aged 0"]) == int(first[:20])
    run_main("verify", data_dir, status=0)
    out, _ = run_main("retention", "--now-ms", now, data_dir, status=0)
    assert out.startswith("dry run: would delete 0 segments")


def test_every_segment_old_rolls_a_new_active_one(data_dir: Path) -> None:
    part = data_dir / "aged-0"
    end = max(o for log in part.glob("*.log") for o, _, _ in kp_records(log)) + 1
    run_main("retention", "--apply", "--topic", "aged", "--now-ms", T0 + 10**9, part,
             status=0)  # fmt: skip
    assert [p.name for p in part.glob("*.log")] == [f"{end:020d}.log"]
    out, _ = run_main("stats", "--json", part, status=0)
    stats = json_lines(out)[0]
    assert (stats["logStartOffset"], stats["logEndOffset"], stats["records"]) == (end, end, 0)


def test_topic_configs_from_the_topics_file(data_dir: Path) -> None:
    doc = json.loads((data_dir / "kafkalog-topics.json").read_text())
    assert doc["topics"]["bytes"]["configs"]["retention.bytes"] == "5000"
    out, _ = run_main("retention", "--topic", "bytes", data_dir, status=0)
    assert "cleanup.policy=delete retention.ms=604800000 retention.bytes=5000" in out
