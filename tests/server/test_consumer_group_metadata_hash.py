"""The metadata hash of consumer groups (KIP-1101) against the one a Kafka 4.4 broker wrote in
its ConsumerGroupMetadataValue."""

from __future__ import annotations

import base64
import uuid

from kafkalog.server.groups.metadata_hash import group_hash


def test_group_hash_is_what_kafka_wrote():
    # Kafka 4.4's record for a group subscribed to topic t1 (3 partitions, no racks):
    # {"type":"3",...} {"version":"0","data":{"epoch":2,"metadataHash":7763637577368036358}}
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode("Z0cDLvmGSDK5a1Qi_JFITg=="))
    assert group_hash({"t1": (topic_id, 3)}) == 7763637577368036358
    assert group_hash({}) == 0
