"""Value schemas of the classic and consumer-group (KIP-848) records of ``__consumer_offsets``.

Transcribed from Kafka's group-coordinator/src/main/resources/common/message/*Value.json (trunk,
2026) into the table notation of :mod:`..message.schema`. Every field Kafka added since is tagged,
so the latest schema reads every version ever written. Record type 0 (the pre-0.9 offset key) takes
OffsetCommitValue too: Kafka 3.x did so, and Kafka 4's LegacyOffsetCommitValue is byte-identical to
OffsetCommitValue v0.

Also here: the consumer protocol's Subscription and Assignment (clients/.../common/message/
ConsumerProtocol*.json), the bytes a classic "consumer" group stores per member.
"""

from __future__ import annotations

from ..message import Message

# What the records of several group types hold alike (Kafka declares it anew in each record's
# JSON, with the same fields).
PARTITION_METADATA = """
topics []
  topicId uuid
  topicName string
  numPartitions int32
  partitionMetadata []
    partition int32
    racks [string]
"""
TARGET_ASSIGNMENT_METADATA = """
assignmentEpoch int32
assignmentTimestamp int64 tag=0 =0
"""
TARGET_ASSIGNMENT_MEMBER = """
topicPartitions []
  topicId uuid
  partitions [int32]
"""

OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    "0-4",
    "4+",
    """
offset int64
leaderEpoch int32 3+ =-1
metadata string
commitTimestamp int64
expireTimestamp int64 1 =-1
topicId uuid 4+ tag=0
""",
)

GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    "0-4",
    "4+",
    """
protocolType string
generation int32
protocol string ? =""
leader string ? =""
currentStateTimestamp int64 2+ =-1
members []
  memberId string
  groupInstanceId string 3+ ? =null
  clientId string
  clientHost string
  rebalanceTimeout int32 1+ =-1
  sessionTimeout int32
  subscription bytes
  assignment bytes
""",
)

CONSUMER_GROUP_METADATA_VALUE = Message(
    "ConsumerGroupMetadataValue",
    "0",
    "0+",
    """
epoch int32
metadataHash int64 tag=0 =0
""",
)

CONSUMER_GROUP_PARTITION_METADATA_VALUE = Message(
    "ConsumerGroupPartitionMetadataValue", "0", "0+", PARTITION_METADATA
)

CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message(
    "ConsumerGroupMemberMetadataValue",
    "0",
    "0+",
    """
instanceId string ? =""
rackId string ? =""
clientId string
clientHost string
subscribedTopicNames [string]
subscribedTopicRegex string ? =""
rebalanceTimeoutMs int32 =-1
serverAssignor string ? =""
classicMemberMetadata {} ? tag=0 ={}
  sessionTimeoutMs int32
  supportedProtocols []
    name string
    metadata bytes
""",
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", TARGET_ASSIGNMENT_METADATA
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ConsumerGroupTargetAssignmentMemberValue", "0", "0+", TARGET_ASSIGNMENT_MEMBER
)

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ConsumerGroupCurrentMemberAssignmentValue",
    "0",
    "0+",
    """
memberEpoch int32
previousMemberEpoch int32
state int8
assignedPartitions []TopicPartitions
partitionsPendingRevocation []TopicPartitions
""",
    structs={
        "TopicPartitions": """
topicId uuid
partitions [int32]
assignmentEpochs [int32] ? tag=0 =[]
""",
    },
)

CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = Message(
    "ConsumerGroupRegularExpressionValue",
    "0",
    "0+",
    """
topics [string]
version int64
timestamp int64
""",
)

CONSUMER_PROTOCOL_SUBSCRIPTION = Message(
    "ConsumerProtocolSubscription",
    "0-3",
    "none",
    """
topics [string]
userData bytes ? =null
ownedPartitions [] 1+
  topic string
  partitions [int32]
generationId int32 2+ =-1
rackId string 3+ ? =null
""",
)

CONSUMER_PROTOCOL_ASSIGNMENT = Message(
    "ConsumerProtocolAssignment",
    "0-3",
    "none",
    """
assignedPartitions []
  topic string
  partitions [int32]
userData bytes ? =null
""",
)
