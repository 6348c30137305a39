"""Value schemas of the share-group (KIP-932) and streams-group (KIP-1071) records.

Transcribed from Kafka's group-coordinator/src/main/resources/common/message/*Value.json (trunk,
2026) into the notation of :mod:`.schema`, except ShareGroupPartitionMetadataValue (record type
9), which Kafka 4.0 wrote and 4.1 removed: that one is from the 4.0 branch. Share groups were
early access in 4.0 and their records changed incompatibly in 4.1 (ShareGroupStatePartition
MetadataValue gained a non-tagged field), so 4.0 share-group values may fail to decode here.
"""

from __future__ import annotations

from .schema import message

SHARE_GROUP_PARTITION_METADATA_VALUE = message(
    "ShareGroupPartitionMetadataValue",
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

SHARE_GROUP_MEMBER_METADATA_VALUE = message(
    "ShareGroupMemberMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "rackId string 0+ ?0+",
        "clientId string 0+",
        "clientHost string 0+",
        "subscribedTopicNames []string 0+",
    ),
)

SHARE_GROUP_METADATA_VALUE = message(
    "ShareGroupMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "epoch int32 0+",
        "metadataHash int64 0+",
    ),
)

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message(
    "ShareGroupTargetAssignmentMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "assignmentEpoch int32 0+",
        "assignmentTimestamp int64 0+ #0@0+ =0",
    ),
)

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message(
    "ShareGroupTargetAssignmentMemberValue",
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

_SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS = (
    "topicId uuid 0+",
    "partitions []int32 0+",
)
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message(
    "ShareGroupCurrentMemberAssignmentValue",
    "0",
    flexible="0+",
    fields=(
        "memberEpoch int32 0+",
        "previousMemberEpoch int32 0+",
        "state int8 0+",
        (
            "assignedPartitions []TopicPartitions 0+",
            _SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS,
        ),
    ),
)

_SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO = (
    "topicId uuid 0+",
    "topicName string 0+",
    "partitions []int32 0+",
)
_SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_INFO = (
    "topicId uuid 0+",
    "topicName string 0+",
)
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = message(
    "ShareGroupStatePartitionMetadataValue",
    "0",
    flexible="0+",
    fields=(
        (
            "initializingTopics []TopicPartitionsInfo 0+",
            _SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO,
        ),
        (
            "initializedTopics []TopicPartitionsInfo 0+",
            _SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO,
        ),
        ("deletingTopics []TopicInfo 0+", _SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_INFO),
    ),
)

_STREAMS_GROUP_METADATA_VALUE_LAST_ASSIGNMENT_CONFIG = (
    "key string 0+",
    "value string 0+",
)
STREAMS_GROUP_METADATA_VALUE = message(
    "StreamsGroupMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "epoch int32 0+",
        "metadataHash int64 0+",
        "validatedTopologyEpoch int32 0+ #0@0+ =-1",
        (
            "lastAssignmentConfigs []LastAssignmentConfig 0+ ?0+ #1@0+",
            _STREAMS_GROUP_METADATA_VALUE_LAST_ASSIGNMENT_CONFIG,
        ),
        "storedDescriptionTopologyEpoch int32 0+ #2@0+ =-1",
        "failedDescriptionTopologyEpoch int32 0+ #3@0+ =-1",
    ),
)

_STREAMS_GROUP_MEMBER_METADATA_VALUE_ENDPOINT = (
    "host string 0+",
    "port uint16 0+",
)
_STREAMS_GROUP_MEMBER_METADATA_VALUE_KEY_VALUE = (
    "key string 0+",
    "value string 0+",
)
STREAMS_GROUP_MEMBER_METADATA_VALUE = message(
    "StreamsGroupMemberMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "instanceId string 0+ ?0+",
        "rackId string 0+ ?0+",
        "clientId string 0+",
        "clientHost string 0+",
        "rebalanceTimeoutMs int32 0+ =-1",
        "topologyEpoch int32 0+",
        "processId string 0+",
        ("userEndpoint Endpoint 0+ ?0+ =null", _STREAMS_GROUP_MEMBER_METADATA_VALUE_ENDPOINT),
        ("clientTags []KeyValue 0+", _STREAMS_GROUP_MEMBER_METADATA_VALUE_KEY_VALUE),
    ),
)

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message(
    "StreamsGroupTargetAssignmentMetadataValue",
    "0",
    flexible="0+",
    fields=(
        "assignmentEpoch int32 0+",
        "assignmentTimestamp int64 0+ #0@0+ =0",
    ),
)

_STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS = (
    "subtopologyId string 0+",
    "partitions []int32 0+",
)
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message(
    "StreamsGroupTargetAssignmentMemberValue",
    "0",
    flexible="0+",
    fields=(
        ("activeTasks []TaskIds 0+", _STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS),
        ("standbyTasks []TaskIds 0+", _STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS),
        ("warmupTasks []TaskIds 0+", _STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS),
    ),
)

_STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS = (
    "subtopologyId string 0+",
    "partitions []int32 0+",
    "assignmentEpochs []int32 0+ ?0+ #0@0+",
)
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message(
    "StreamsGroupCurrentMemberAssignmentValue",
    "0",
    flexible="0+",
    fields=(
        "memberEpoch int32 0+",
        "previousMemberEpoch int32 0+",
        "state int8 0+",
        ("activeTasks []TaskIds 0+", _STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS),
        ("standbyTasks []TaskIds 0+", _STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS),
        ("warmupTasks []TaskIds 0+", _STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS),
        (
            "activeTasksPendingRevocation []TaskIds 0+",
            _STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS,
        ),
        (
            "standbyTasksPendingRevocation []TaskIds 0+",
            _STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS,
        ),
        (
            "warmupTasksPendingRevocation []TaskIds 0+",
            _STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS,
        ),
    ),
)

_STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_CONFIG = (
    "key string 0+",
    "value string 0+",
)
_STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_INFO = (
    "name string 0+",
    "partitions int32 0+",
    "replicationFactor int16 0+",
    ("topicConfigs []TopicConfig 0+", _STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_CONFIG),
)
STREAMS_GROUP_TOPOLOGY_VALUE = message(
    "StreamsGroupTopologyValue",
    "0",
    flexible="0+",
    fields=(
        "epoch int32 0+",
        (
            "subtopologies []Subtopology 0+",
            (
                "subtopologyId string 0+",
                "sourceTopics []string 0+",
                "sourceTopicRegex []string 0+",
                ("stateChangelogTopics []TopicInfo 0+", _STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_INFO),
                "repartitionSinkTopics []string 0+",
                (
                    "repartitionSourceTopics []TopicInfo 0+",
                    _STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_INFO,
                ),
                (
                    "copartitionGroups []CopartitionGroup 0+",
                    (
                        "sourceTopics []int16 0+",
                        "sourceTopicRegex []int16 0+",
                        "repartitionSourceTopics []int16 0+",
                    ),
                ),
            ),
        ),
    ),
)
