"""Value schemas of the share-group (KIP-932) and streams-group (KIP-1071) records.

Transcribed from Kafka's group-coordinator/src/main/resources/common/message/*Value.json (trunk,
2026) into the table notation of :mod:`..message.schema`, except ShareGroupPartitionMetadataValue
(record type 9), which Kafka 4.0 wrote and 4.1 removed: that one is from the 4.0 branch. Share
groups were early access in 4.0 and their records changed incompatibly in 4.1
(ShareGroupStatePartition MetadataValue gained a non-tagged field), so 4.0 share-group values may
fail to decode here.
"""

from __future__ import annotations

from ..message import Message
from ._group_schemas import PARTITION_METADATA, TARGET_ASSIGNMENT_MEMBER, TARGET_ASSIGNMENT_METADATA

SHARE_GROUP_PARTITION_METADATA_VALUE = Message(
    "ShareGroupPartitionMetadataValue", "0", "0+", PARTITION_METADATA
)

SHARE_GROUP_MEMBER_METADATA_VALUE = Message(
    "ShareGroupMemberMetadataValue",
    "0",
    "0+",
    """
rackId string ? =""
clientId string
clientHost string
subscribedTopicNames [string]
""",
)

SHARE_GROUP_METADATA_VALUE = Message(
    "ShareGroupMetadataValue",
    "0",
    "0+",
    """
epoch int32
metadataHash int64
""",
)

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ShareGroupTargetAssignmentMetadataValue", "0", "0+", TARGET_ASSIGNMENT_METADATA
)

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ShareGroupTargetAssignmentMemberValue", "0", "0+", TARGET_ASSIGNMENT_MEMBER
)

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ShareGroupCurrentMemberAssignmentValue",
    "0",
    "0+",
    """
memberEpoch int32
previousMemberEpoch int32
state int8
assignedPartitions []
  topicId uuid
  partitions [int32]
""",
)

SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = Message(
    "ShareGroupStatePartitionMetadataValue",
    "0",
    "0+",
    """
initializingTopics []
  topicId uuid
  topicName string
  partitions [int32]
initializedTopics []
  topicId uuid
  topicName string
  partitions [int32]
deletingTopics []
  topicId uuid
  topicName string
""",
)

STREAMS_GROUP_METADATA_VALUE = Message(
    "StreamsGroupMetadataValue",
    "0",
    "0+",
    """
epoch int32
metadataHash int64
validatedTopologyEpoch int32 tag=0 =-1
lastAssignmentConfigs [] ? tag=1 =[]
  key string
  value string
storedDescriptionTopologyEpoch int32 tag=2 =-1
failedDescriptionTopologyEpoch int32 tag=3 =-1
""",
)

STREAMS_GROUP_MEMBER_METADATA_VALUE = Message(
    "StreamsGroupMemberMetadataValue",
    "0",
    "0+",
    """
instanceId string ? =""
rackId string ? =""
clientId string
clientHost string
rebalanceTimeoutMs int32 =-1
topologyEpoch int32
processId string
userEndpoint {} ? =null
  host string
  port uint16
clientTags []
  key string
  value string
""",
)

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "StreamsGroupTargetAssignmentMetadataValue", "0", "0+", TARGET_ASSIGNMENT_METADATA
)

STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "StreamsGroupTargetAssignmentMemberValue",
    "0",
    "0+",
    """
activeTasks []TaskIds
standbyTasks []TaskIds
warmupTasks []TaskIds
""",
    structs={
        "TaskIds": """
subtopologyId string
partitions [int32]
""",
    },
)

STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "StreamsGroupCurrentMemberAssignmentValue",
    "0",
    "0+",
    """
memberEpoch int32
previousMemberEpoch int32
state int8
activeTasks []TaskIds
standbyTasks []TaskIds
warmupTasks []TaskIds
activeTasksPendingRevocation []TaskIds
standbyTasksPendingRevocation []TaskIds
warmupTasksPendingRevocation []TaskIds
""",
    structs={
        "TaskIds": """
subtopologyId string
partitions [int32]
assignmentEpochs [int32] ? tag=0 =[]
""",
    },
)

STREAMS_GROUP_TOPOLOGY_VALUE = Message(
    "StreamsGroupTopologyValue",
    "0",
    "0+",
    """
epoch int32
subtopologies []
  subtopologyId string
  sourceTopics [string]
  sourceTopicRegex [string]
  stateChangelogTopics []TopicInfo
  repartitionSinkTopics [string]
  repartitionSourceTopics []TopicInfo
  copartitionGroups []
    sourceTopics [int16]
    sourceTopicRegex [int16]
    repartitionSourceTopics [int16]
""",
    structs={
        "TopicInfo": """
name string
partitions int32
replicationFactor int16
topicConfigs []
  key string
  value string
""",
    },
)
