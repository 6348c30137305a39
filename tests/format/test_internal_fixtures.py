"""Real broker data: internal records of ../shared/fixtures decode, counted as EXPECTED.json says.

Records are read out of the files with kafka-python's record reader (independent of kafkalog's
batch code); only the key and value bytes go through kafkalog's internal-record decoders. The
expected counts come from EXPECTED.json alone:

- ``kraft_record_types``: KRaft record type names over the non-control records of
  ``__cluster_metadata`` logs and ``*.checkpoint`` snapshots;
- ``internal_key_versions``: ``"<kind>(v<key version>)"`` over the records of
  ``__consumer_offsets`` logs, tombstones included (established by counting key i16 prefixes);
- ``control_record_types``: control record type names in every file.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from kafka.record import MemoryRecords

from kafkalog.format.internal import (
    DecodedMessage,
    decode_consumer_offsets_key,
    decode_consumer_offsets_value,
    decode_control_key,
    decode_control_value,
    decode_metadata_record,
    to_json_safe,
)
from shared_fixtures import EXPECTED, KAFKA_DATA, requires_shared_fixtures

pytestmark = requires_shared_fixtures

EXPECTED_LOGS: dict[str, dict] = EXPECTED.get("logs", {})


def is_kraft(path: str) -> bool:
    return "/__cluster_metadata-" in path or path.endswith(".checkpoint")


def is_offsets(path: str) -> bool:
    return "/__consumer_offsets-" in path


FILES = sorted(
    p
    for p, v in EXPECTED_LOGS.items()
    if v.get("records")
    and (KAFKA_DATA / p).is_file()
    and (is_kraft(p) or is_offsets(p) or v.get("control_record_types"))
)


def records(path: str):
    """(is_control, key, value) of every record of a file, by kafka-python."""
    batches = MemoryRecords((KAFKA_DATA / path).read_bytes())
    while (batch := batches.next_batch()) is not None:
        control = getattr(batch, "is_control_batch", False)
        for record in batch:
            yield control, record.key, record.value


def check_clean(decoded: DecodedMessage, path: str) -> None:
    assert decoded.raw is None and decoded.error is None, (path, decoded)
    json.dumps(to_json_safe(decoded))


def check_sane_value(decoded: DecodedMessage) -> None:
    data = decoded.data
    if decoded.kind == "Topic":
        assert data["name"] and isinstance(data["name"], str)
        assert isinstance(data["topicId"], uuid.UUID) and len(data["topicId"].bytes) == 16
        assert data["topicId"].int != 0
    elif decoded.kind == "Partition":
        assert data["partitionId"] >= 0 and data["replicas"] and data["topicId"].int != 0
        assert set(data["isr"]) <= set(data["replicas"])
    elif decoded.kind == "RegisterBroker":
        assert data["brokerId"] >= 0 and data["endPoints"] and data["brokerEpoch"] >= 0
    elif decoded.kind == "FeatureLevel":
        assert data["name"] and data["featureLevel"] >= 0
    elif decoded.kind == "offset_commit" and data is not None:
        assert data["offset"] >= -1 and data["commitTimestamp"] > 1_000_000_000_000
    elif decoded.kind == "group_metadata" and data is not None:
        assert isinstance(data["protocolType"], str) and data["generation"] >= 0
        for member in data["members"]:
            assert member["memberId"] and member["sessionTimeout"] > 0
            if data["protocolType"] == "consumer":
                assert member["subscription"]["topics"]
                assert isinstance(member["assignment"]["assignedPartitions"], list)
    elif decoded.kind in ("COMMIT", "ABORT"):
        assert data["coordinatorEpoch"] >= 0
    elif decoded.kind == "LEADER_CHANGE":
        assert data["leaderId"] >= 0 and data["voters"]
    elif decoded.kind == "SNAPSHOT_HEADER":
        assert data["lastContainedLogTimestamp"] >= 0  # 0 in bootstrap.checkpoint


@pytest.mark.parametrize("path", FILES)
def test_internal_records_decode_as_expected(path):
    expected = EXPECTED_LOGS[path]
    kraft, key_versions, controls = Counter(), Counter(), Counter()
    for control, key, value in records(path):
        if control:
            decoded_key = decode_control_key(key)
            decoded_value = decode_control_value(decoded_key.api_key, value)
            controls[decoded_key.kind] += 1
            pair = (decoded_key, decoded_value)
        elif is_kraft(path):
            decoded_value = decode_metadata_record(value)
            kraft[decoded_value.kind] += 1
            pair = (decoded_value,)
        elif is_offsets(path):
            decoded_key = decode_consumer_offsets_key(key)
            decoded_value = decode_consumer_offsets_value(decoded_key, value)
            key_versions[f"{decoded_key.kind}(v{decoded_key.version})"] += 1
            pair = (decoded_key, decoded_value)
        else:
            continue
        for decoded in pair:
            check_clean(decoded, path)
        check_sane_value(pair[-1])
    assert dict(controls) == expected["control_record_types"]
    if is_kraft(path):
        assert dict(kraft) == expected["kraft_record_types"]
    if is_offsets(path):
        assert dict(key_versions) == expected["internal_key_versions"]


def test_fixtures_cover_the_record_types_we_claim():
    kinds = Counter()
    for path in FILES:
        kinds.update(EXPECTED_LOGS[path].get("kraft_record_types") or {})
        kinds.update(EXPECTED_LOGS[path].get("control_record_types") or {})
        kinds.update(EXPECTED_LOGS[path].get("internal_key_versions") or {})
    for kind in ("Topic", "Partition", "PartitionChange", "RegisterBroker", "NoOp",
                 "LEADER_CHANGE", "SNAPSHOT_HEADER", "KRAFT_VOTERS", "COMMIT",
                 "offset_commit(v1)", "group_metadata(v2)"):  # fmt: skip
        assert kinds[kind] > 0, kind
