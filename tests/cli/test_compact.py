"""``kafkalog compact``: the dry run changes no byte and announces what --apply removes; the
expected survivors are worked out here from kafka-python's decoding of the segments."""

from __future__ import annotations

from pathlib import Path

import pytest

from .operate_support import build, copy, digest, json_lines, kp_records, run_main, run_script


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    topics = {"users": (1, {"cleanup.policy": "compact"}), "events": (1, {})}
    return build(tmp_path_factory.mktemp("compact") / "data", topics)


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return copy(valid_dir, tmp_path)


def expected_survivors(part: Path) -> tuple[list[tuple], int]:
    """The records of the rolled segments whose key has no later record in them (the cleaner's
    dirty range ends at the active segment here: no transactions, no compaction lag)."""
    rolled = sorted(part.glob("*.log"))[:-1]
    records = [r for log in rolled for r in kp_records(log)]
    latest = {key: offset for offset, key, _ in records}
    kept = [(offset, key) for offset, key, _ in records if latest[key] == offset]
    return kept, len(records) - len(kept)


def test_dry_run_then_apply(data_dir: Path) -> None:
    part = data_dir / "users-0"
    kept, removed = expected_survivors(part)
    active = sorted(part.glob("*.log"))[-1]
    active_records = kp_records(active)
    before = digest(data_dir)

    objects = json_lines(run_main("compact", "--json", data_dir, status=0)[0])
    assert digest(data_dir) == before
    (users,) = [o for o in objects if o["type"] == "partition"]
    assert (users["partition"], users["cleaned"], users["applied"]) == ("users-0", True, False)
    assert users["recordsRemoved"] == removed and users["recordsKept"] == len(kept)
    assert users["firstUncleanableOffset"] == int(active.name[:20])
    assert objects[-1]["partitionsSkipped"] == 1  # events: cleanup.policy=delete

    proc = run_script("compact", "--apply", data_dir, status=0)
    assert f"{removed} of {removed + len(kept)} records removed" in proc.stdout
    rolled = sorted(part.glob("*.log"))[:-1]
    assert [(o, k) for log in rolled for o, k, _ in kp_records(log)] == kept
    assert kp_records(sorted(part.glob("*.log"))[-1]) == active_records
    checkpoint = (data_dir / "cleaner-offset-checkpoint").read_text().split("\n")
    assert f"users 0 {int(active.name[:20])}" in checkpoint
    assert digest(data_dir)["events-0/" + active.name] == before["events-0/" + active.name]
    run_main("verify", data_dir, status=0)
    out, _ = run_main("compact", data_dir / "users-0", status=0)
    assert "not cleaned: nothing cleanable" in out


def test_dirty_ratio_decides_unless_forced(data_dir: Path) -> None:
    topics = data_dir / "kafkalog-topics.json"
    topics.write_text(topics.read_text().replace('"compact"', '"compact", '
                      '"min.cleanable.dirty.ratio": "1"'))  # fmt: skip
    out, _ = run_main("compact", "--topic", "users", data_dir, status=0)
    assert "not cleaned: dirty ratio" in out and "min.cleanable.dirty.ratio 1.0" in out
    objects = json_lines(run_main("compact", "--force", "--json", data_dir, status=0)[0])
    assert objects[0]["cleaned"] is True and objects[0]["recordsRemoved"] > 0


def test_a_partition_of_another_policy_is_a_usage_error(data_dir: Path) -> None:
    _, err = run_main("compact", data_dir / "events-0", status=2)
    assert "not a compacted topic (cleanup.policy=delete)" in err
    run_main("compact", "--topic", "nope", data_dir, status=2)
