"""Schemas of the KRaft ``__cluster_metadata`` records, one per apiKey.

Transcribed from Kafka's metadata/src/main/resources/common/metadata/*Record.json (trunk, 2026) into
the table notation of :mod:`..message.schema`; every version Kafka defines is readable with these
(newer fields are version-gated or tagged). Not described, as Kafka 4 no longer defines them: apiKey
6 (AccessControlRecord, removed in 3.5) and 16 (RemoveFeatureLevelRecord, removed in 3.3); 13 was
never assigned.
"""

from __future__ import annotations

from ..message import Message

# The listeners and supported features a broker or controller registers with.
_STRUCTS = {
    "Endpoint": """
name string
host string
port uint16
securityProtocol int16
""",
    "Feature": """
name string
minSupportedVersion int16
maxSupportedVersion int16
""",
}

REGISTER_BROKER_RECORD = Message(
    "RegisterBrokerRecord",
    "0-4",
    "0+",
    """
brokerId int32
isMigratingZkBroker bool 2+ =false
incarnationId uuid
brokerEpoch int64
endPoints []Endpoint
features []Feature
rack string ? =""
fenced bool =true
inControlledShutdown bool 1+ =false
logDirs [uuid] 3+ tag=0
cordonedLogDirs [uuid] 4+ ? tag=1 =null
""",
    structs=_STRUCTS,
)

UNREGISTER_BROKER_RECORD = Message(
    "UnregisterBrokerRecord",
    "0",
    "0+",
    """
brokerId int32
brokerEpoch int64
""",
)

TOPIC_RECORD = Message(
    "TopicRecord",
    "0",
    "0+",
    """
name string
topicId uuid
""",
)

PARTITION_RECORD = Message(
    "PartitionRecord",
    "0-2",
    "0+",
    """
partitionId int32 =-1
topicId uuid
replicas [int32]
isr [int32]
removingReplicas [int32]
addingReplicas [int32]
leader int32 =-1
leaderRecoveryState int8 tag=0 =0
leaderEpoch int32 =-1
partitionEpoch int32 =-1
directories [uuid] 1+
eligibleLeaderReplicas [int32] 2+ ? tag=1 =null
lastKnownElr [int32] 2+ ? tag=2 =null
""",
)

CONFIG_RECORD = Message(
    "ConfigRecord",
    "0",
    "0+",
    """
resourceType int8
resourceName string
name string
value string ? =""
""",
)

PARTITION_CHANGE_RECORD = Message(
    "PartitionChangeRecord",
    "0-2",
    "0+",
    """
partitionId int32 =-1
topicId uuid
isr [int32] ? tag=0 =null
leader int32 tag=1 =-2
replicas [int32] ? tag=2 =null
removingReplicas [int32] ? tag=3 =null
addingReplicas [int32] ? tag=4 =null
leaderRecoveryState int8 tag=5 =-1
directories [uuid] 1+ ? tag=8 =null
eligibleLeaderReplicas [int32] 2+ ? tag=6 =null
lastKnownElr [int32] 2+ ? tag=7 =null
""",
)

# A broker fenced or unfenced, by id and epoch.
_BROKER_AND_EPOCH = """
id int32
epoch int64
"""
FENCE_BROKER_RECORD = Message("FenceBrokerRecord", "0", "0+", _BROKER_AND_EPOCH)
UNFENCE_BROKER_RECORD = Message("UnfenceBrokerRecord", "0", "0+", _BROKER_AND_EPOCH)

REMOVE_TOPIC_RECORD = Message(
    "RemoveTopicRecord",
    "0",
    "0+",
    """
topicId uuid
""",
)

DELEGATION_TOKEN_RECORD = Message(
    "DelegationTokenRecord",
    "0",
    "0+",
    """
owner string
requester string
renewers [string]
issueTimestamp int64
maxTimestamp int64
expirationTimestamp int64
tokenId string
""",
)

USER_SCRAM_CREDENTIAL_RECORD = Message(
    "UserScramCredentialRecord",
    "0",
    "0+",
    """
name string
mechanism int8
salt bytes
storedKey bytes
serverKey bytes
iterations int32
""",
)

FEATURE_LEVEL_RECORD = Message(
    "FeatureLevelRecord",
    "0",
    "0+",
    """
name string
featureLevel int16
""",
)

CLIENT_QUOTA_RECORD = Message(
    "ClientQuotaRecord",
    "0",
    "0+",
    """
entity []
  entityType string
  entityName string ? =""
key string
value float64
remove bool
""",
)

PRODUCER_IDS_RECORD = Message(
    "ProducerIdsRecord",
    "0",
    "0+",
    """
brokerId int32
brokerEpoch int64 =-1
nextProducerId int64
""",
)

BROKER_REGISTRATION_CHANGE_RECORD = Message(
    "BrokerRegistrationChangeRecord",
    "0-3",
    "0+",
    """
brokerId int32
brokerEpoch int64
fenced int8 tag=0
inControlledShutdown int8 1+ tag=1
logDirs [uuid] 2+ tag=2
cordonedLogDirs [uuid] 3+ ? tag=3 =null
""",
)

ACCESS_CONTROL_ENTRY_RECORD = Message(
    "AccessControlEntryRecord",
    "0",
    "0+",
    """
id uuid
resourceType int8
resourceName string
patternType int8
principal string
host string
operation int8
permissionType int8
""",
)

REMOVE_ACCESS_CONTROL_ENTRY_RECORD = Message(
    "RemoveAccessControlEntryRecord",
    "0",
    "0+",
    """
id uuid
""",
)

NO_OP_RECORD = Message(
    "NoOpRecord",
    "0",
    "0+",
    """

""",
)

ZK_MIGRATION_STATE_RECORD = Message(
    "ZkMigrationStateRecord",
    "0",
    "0+",
    """
zkMigrationState int8
""",
)

REMOVE_USER_SCRAM_CREDENTIAL_RECORD = Message(
    "RemoveUserScramCredentialRecord",
    "0",
    "0+",
    """
name string
mechanism int8
""",
)

BEGIN_TRANSACTION_RECORD = Message(
    "BeginTransactionRecord",
    "0",
    "0+",
    """
name string ? tag=0 =null
""",
)

END_TRANSACTION_RECORD = Message(
    "EndTransactionRecord",
    "0",
    "0+",
    """

""",
)

ABORT_TRANSACTION_RECORD = Message(
    "AbortTransactionRecord",
    "0",
    "0+",
    """
reason string ? tag=0 =null
""",
)

REMOVE_DELEGATION_TOKEN_RECORD = Message(
    "RemoveDelegationTokenRecord",
    "0",
    "0+",
    """
tokenId string
""",
)

REGISTER_CONTROLLER_RECORD = Message(
    "RegisterControllerRecord",
    "0",
    "0+",
    """
controllerId int32
incarnationId uuid
zkMigrationReady bool
endPoints []Endpoint
features []Feature
""",
    structs=_STRUCTS,
)

CLEAR_ELR_RECORD = Message(
    "ClearElrRecord",
    "0",
    "0+",
    """
topicName string
""",
)

UNREGISTER_CONTROLLER_RECORD = Message(
    "UnregisterControllerRecord",
    "0",
    "0+",
    """
controllerId int32
""",
)
