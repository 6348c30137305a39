"""Value schemas of the classic and consumer-group (KIP-848) records of ``__consumer_offsets``.

Transcribed from Kafka's group-coordinator/src/main/resources/common/message/*Value.json (trunk,
2026) into the notation of :mod:`.schema`. Every field Kafka added since is a tagged field, so
the latest schema reads every version ever written. Record type 0 (the pre-0.9 offset key) takes
OffsetCommitValue too: Kafka 3.x did so, and Kafka 4's LegacyOffsetCommitValue is byte-identical
to OffsetCommitValue v0.

Also here: the consumer protocol's Subscription and Assignment (clients/.../common/message/
ConsumerProtocol*.json), the bytes a classic "consumer" group stores per member.
"""

from __future__ import annotations

from .schema import message

OFFSET_COMMIT_VALUE = message(
    "OffsetCommitValue",
    "0-4",
    flexible="4+",
    fields=(
        "offset int64 0+",
        "leaderEpoch int32 3+ =-1",
        "metadata string 0+",
        "commitTimestamp int64 0+",
        "expireTimestamp int64 1 =-1",
        "topicId uuid 4+ #0@4+",
    ),
)

_GROUP_METADATA_VALUE_MEMBER_METADATA = (
    "memberId string 0+",
    "groupInstanceId string 3+ ?3+ =null",
    "clientId string 0+",
    "clientHost string 0+",
    "rebalanceTimeout int32 1+ =-1",
    "sessionTimeout int32 0+",
    "subscription bytes 0+",
    "assignment bytes 0+",
)
GROUP_METADATA_VALUE = message(
    "GroupMetadataValue",
    "0-4",
    flexible="4+",
    fields=(
        "protocolType string 0+",
        "generation int32 0+",
        "protocol string 0+ ?0+",
        "leader string 0+ ?0+",
        "currentStateTimestamp int64 2+ =-1",
        ("members []MemberMetadata 0+", _GROUP_METADATA_VALUE_MEMBER_METADATA),
    ),
)

CONSUMER_GROUP_METADATA_VALUE = message(
    "ConsumerGroupMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "epoch int32 0+",
        "metadataHash int64 0+ #0@0+ =0",
    ),
)

CONSUMER_GROUP_PARTITION_METADATA_VALUE = message(
    "ConsumerGroupPartitionMetadataValue",
    "0",
    flexible="0+",
    fields=(
        (
            "topics []TopicMetadata 0+",
            (
                "topicId uuid 0+",
                "topicName string 0+",
                "numPartitions int32 0+",
                (
                    "partitionMetadata []PartitionMetadata 0+",
                    (
                        "partition int32 0+",
                        "racks []string 0+",
                    ),
                ),
            ),
        ),
    ),
)

CONSUMER_GROUP_MEMBER_METADATA_VALUE = message(
    "ConsumerGroupMemberMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "instanceId string 0+ ?0+",
        "rackId string 0+ ?0+",
        "clientId string 0+",
        "clientHost string 0+",
        "subscribedTopicNames []string 0+",
        "subscribedTopicRegex string 0+ ?0+",
        "rebalanceTimeoutMs int32 0+ =-1",
        "serverAssignor string 0+ ?0+",
        (
            "classicMemberMetadata ClassicMemberMetadata 0+ ?0+ #0@0+",
            (
                "sessionTimeoutMs int32 0+",
                (
                    "supportedProtocols []ClassicProtocol 0+",
                    (
                        "name string 0+",
                        "metadata bytes 0+",
                    ),
                ),
            ),
        ),
    ),
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message(
    "ConsumerGroupTargetAssignmentMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "assignmentEpoch int32 0+",
        "assignmentTimestamp int64 0+ #0@0+ =0",
    ),
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message(
    "ConsumerGroupTargetAssignmentMemberValue",
    "0",
    flexible="0+",
    fields=(
        (
            "topicPartitions []TopicPartition 0+",
            (
                "topicId uuid 0+",
                "partitions []int32 0+",
            ),
        ),
    ),
)

_CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS = (
    "topicId uuid 0+",
    "partitions []int32 0+",
    "assignmentEpochs []int32 0+ ?0+ #0@0+",
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message(
    "ConsumerGroupCurrentMemberAssignmentValue",
    "0",
    flexible="0+",
    fields=(
        "memberEpoch int32 0+",
        "previousMemberEpoch int32 0+",
        "state int8 0+",
        (
            "assignedPartitions []TopicPartitions 0+",
            _CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS,
        ),
        (
            "partitionsPendingRevocation []TopicPartitions 0+",
            _CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS,
        ),
    ),
)

CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = message(
    "ConsumerGroupRegularExpressionValue",
    "0",
    flexible="0+",
    fields=(
        "topics []string 0+",
        "version int64 0+",
        "timestamp int64 0+",
    ),
)

CONSUMER_PROTOCOL_SUBSCRIPTION = message(
    "ConsumerProtocolSubscription",
    "0-3",
    flexible="none",
    fields=(
        "topics []string 0+",
        "userData bytes 0+ ?0+ =null",
        (
            "ownedPartitions []TopicPartition 1+",
            (
                "topic string 1+",
                "partitions []int32 1+",
            ),
        ),
        "generationId int32 2+ =-1",
        "rackId string 3+ ?3+ =null",
    ),
)

CONSUMER_PROTOCOL_ASSIGNMENT = message(
    "ConsumerProtocolAssignment",
    "0-3",
    flexible="none",
    fields=(
        (
            "assignedPartitions []TopicPartition 0+",
            (
                "topic string 0+",
                "partitions []int32 0+",
            ),
        ),
        "userData bytes 0+ ?0+ =null",
    ),
)
