"""Where topic configs come from when a data directory does not record them: Kafka's internal
topics are compacted (Kafka creates them so), other topics get Kafka's defaults, flagged as
assumed, and ``retention --apply`` deletes nothing by assumed configs unless told to. Which
segments are old is worked out here from file names and kafka-python's timestamps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.log.datadir.manager import TOPICS_FILE_NAME
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

from .operate_support import (
    T0,
    build,
    copy,
    digest,
    json_lines,
    kp_records,
    run_main,
)

WEEK_MS = 7 * 24 * 3600 * 1000  # Kafka's default retention.ms


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build(tmp_path_factory.mktemp("configs") / "data",
                 {"__consumer_offsets": (2, {}), "__transaction_state": (1, {}),
                  "orders": (1, {})})  # fmt: skip
    (root / TOPICS_FILE_NAME).unlink()  # a disk copied without its cluster's metadata
    return root


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return copy(valid_dir, tmp_path)


def newest_timestamp(part: Path) -> int:
    return max(ts for log in part.glob("*.log") for _, _, ts in kp_records(log))


def test_internal_topics_are_compacted_and_other_topics_flagged(data_dir: Path) -> None:
    now = newest_timestamp(data_dir / "orders-0") + WEEK_MS + 1  # every record past 7 days
    out, _ = run_main("retention", "--json", "--now-ms", now, data_dir, status=0)
    partitions = {o["partition"]: o for o in json_lines(out) if o["type"] == "partition"}
    for name in ("__consumer_offsets-0", "__consumer_offsets-1", "__transaction_state-0"):
        assert partitions[name]["cleanupPolicy"] == "compact"
        assert partitions[name]["segments"] == [] and not partitions[name]["configsAssumed"]
    orders = partitions["orders-0"]
    assert orders["configsAssumed"] and orders["cleanupPolicy"] == "delete"
    assert [Path(s["path"]).name for s in orders["segments"]] == sorted(
        p.name for p in (data_dir / "orders-0").glob("*.log")
    )
    stats = {o["path"]: o for o in json_lines(run_main("stats", "--json", data_dir, status=0)[0])
             if o["type"] == "partition"}  # fmt: skip
    assert stats[str(data_dir / "__consumer_offsets-0")]["cleanupPolicy"] == "compact"
    assert stats[str(data_dir / "orders-0")]["configsAssumed"] is True
    table, _ = run_main("stats", data_dir, status=0)
    assert "delete?" in table and "Kafka's defaults assumed" in table
    compacted, _ = run_main("compact", "--json", data_dir, status=0)
    assert json_lines(compacted)[-1]["partitions"] == 3  # the internal topics' partitions


def test_apply_refuses_to_delete_by_assumed_configs(data_dir: Path) -> None:
    now = newest_timestamp(data_dir / "orders-0") + WEEK_MS + 1
    before = digest(data_dir / "orders-0")
    out, err = run_main("retention", "--apply", "--json", "--now-ms", now, data_dir, status=1)
    assert "--assume-defaults" in err and "orders-0" in err
    assert digest(data_dir / "orders-0") == before
    summary = json_lines(out)[-1]
    assert (summary["segments"], summary["partitionsRefused"]) == (0, 1)
    run_main("retention", "--apply", "--assume-defaults", "--now-ms", now, data_dir, status=0)
    left = [p for p in (data_dir / "orders-0").glob("*.log") if p.stat().st_size]
    assert left == []  # every old segment went; only a new empty active one remains
    assert (data_dir / "__consumer_offsets-0").is_dir()
    assert sorted((data_dir / "__consumer_offsets-0").glob("*.log"))[0].stat().st_size > 0


@requires_shared_fixtures
def test_a_real_broker_copy_without_metadata_keeps_its_offsets_topic(tmp_path: Path) -> None:
    source = KAFKA_DATA / "xpxwo100+bullShit"
    if not source.is_dir():
        pytest.skip(f"{source} is not among the fixtures")
    root = Path(shutil.copytree(source, tmp_path / "data"))
    internal = sorted(p.name for p in root.iterdir() if p.name.startswith("__consumer_offsets-"))
    assert internal
    out, _ = run_main("retention", "--json", "--now-ms", T0, root, status=0)
    planned = {o["partition"]: o for o in json_lines(out) if o["type"] == "partition"}
    assert all(planned[name]["segments"] == [] for name in internal)
    out, _ = run_main("compact", "--json", root, status=0)
    assert json_lines(out)[-1]["partitions"] == len(internal)
