"""Schemas of the KRaft ``__cluster_metadata`` records, one per apiKey.

Transcribed from Kafka's metadata/src/main/resources/common/metadata/*Record.json (trunk, 2026)
into the notation of :mod:`.schema`; every version Kafka defines is readable with these (newer
fields are version-gated or tagged). Not described, as Kafka 4 no longer defines them: apiKey 6
(AccessControlRecord, removed in 3.5) and 16 (RemoveFeatureLevelRecord, removed in
3.3); 13 was never assigned.
"""

from __future__ import annotations

from .schema import message

REGISTER_BROKER_RECORD = message(
    "RegisterBrokerRecord",
    "0-4",
    flexible="0+",
    fields=(
        "brokerId int32 0+",
        "isMigratingZkBroker bool 2+ =false",
        "incarnationId uuid 0+",
        "brokerEpoch int64 0+",
        (
            "endPoints []BrokerEndpoint 0+",
            (
                "name string 0+",
                "host string 0+",
                "port uint16 0+",
                "securityProtocol int16 0+",
            ),
        ),
        (
            "features []BrokerFeature 0+",
            (
                "name string 0+",
                "minSupportedVersion int16 0+",
                "maxSupportedVersion int16 0+",
            ),
        ),
        "rack string 0+ ?0+",
        "fenced bool 0+ =true",
        "inControlledShutdown bool 1+ =false",
        "logDirs []uuid 3+ #0@3+",
        "cordonedLogDirs []uuid 4+ ?4+ #1@4+ =null",
    ),
)

UNREGISTER_BROKER_RECORD = message(
    "UnregisterBrokerRecord",
    "0",
    flexible="0+",
    fields=(
        "brokerId int32 0+",
        "brokerEpoch int64 0+",
    ),
)

TOPIC_RECORD = message(
    "TopicRecord",
    "0",
    flexible="0+",
    fields=(
        "name string 0+",
        "topicId uuid 0+",
    ),
)

PARTITION_RECORD = message(
    "PartitionRecord",
    "0-2",
    flexible="0+",
    fields=(
        "partitionId int32 0+ =-1",
        "topicId uuid 0+",
        "replicas []int32 0+",
        "isr []int32 0+",
        "removingReplicas []int32 0+",
        "addingReplicas []int32 0+",
        "leader int32 0+ =-1",
        "leaderRecoveryState int8 0+ #0@0+ =0",
        "leaderEpoch int32 0+ =-1",
        "partitionEpoch int32 0+ =-1",
        "directories []uuid 1+",
        "eligibleLeaderReplicas []int32 2+ ?2+ #1@2+ =null",
        "lastKnownElr []int32 2+ ?2+ #2@2+ =null",
    ),
)

CONFIG_RECORD = message(
    "ConfigRecord",
    "0",
    flexible="0+",
    fields=(
        "resourceType int8 0+",
        "resourceName string 0+",
        "name string 0+",
        "value string 0+ ?0+",
    ),
)

PARTITION_CHANGE_RECORD = message(
    "PartitionChangeRecord",
    "0-2",
    flexible="0+",
    fields=(
        "partitionId int32 0+ =-1",
        "topicId uuid 0+",
        "isr []int32 0+ ?0+ #0@0+ =null",
        "leader int32 0+ #1@0+ =-2",
        "replicas []int32 0+ ?0+ #2@0+ =null",
        "removingReplicas []int32 0+ ?0+ #3@0+ =null",
        "addingReplicas []int32 0+ ?0+ #4@0+ =null",
        "leaderRecoveryState int8 0+ #5@0+ =-1",
        "directories []uuid 1+ ?1+ #8@1+ =null",
        "eligibleLeaderReplicas []int32 2+ ?2+ #6@2+ =null",
        "lastKnownElr []int32 2+ ?2+ #7@2+ =null",
    ),
)

FENCE_BROKER_RECORD = message(
    "FenceBrokerRecord",
    "0",
    flexible="0+",
    fields=(
        "id int32 0+",
        "epoch int64 0+",
    ),
)

UNFENCE_BROKER_RECORD = message(
    "UnfenceBrokerRecord",
    "0",
    flexible="0+",
    fields=(
        "id int32 0+",
        "epoch int64 0+",
    ),
)

REMOVE_TOPIC_RECORD = message(
    "RemoveTopicRecord",
    "0",
    flexible="0+",
    fields=("topicId uuid 0+",),
)

DELEGATION_TOKEN_RECORD = message(
    "DelegationTokenRecord",
    "0",
    flexible="0+",
    fields=(
        "owner string 0+",
        "requester string 0+",
        "renewers []string 0+",
        "issueTimestamp int64 0+",
        "maxTimestamp int64 0+",
        "expirationTimestamp int64 0+",
        "tokenId string 0+",
    ),
)

USER_SCRAM_CREDENTIAL_RECORD = message(
    "UserScramCredentialRecord",
    "0",
    flexible="0+",
    fields=(
        "name string 0+",
        "mechanism int8 0+",
        "salt bytes 0+",
        "storedKey bytes 0+",
        "serverKey bytes 0+",
        "iterations int32 0+",
    ),
)

FEATURE_LEVEL_RECORD = message(
    "FeatureLevelRecord",
    "0",
    flexible="0+",
    fields=(
        "name string 0+",
        "featureLevel int16 0+",
    ),
)

CLIENT_QUOTA_RECORD = message(
    "ClientQuotaRecord",
    "0",
    flexible="0+",
    fields=(
        (
            "entity []EntityData 0+",
            (
                "entityType string 0+",
                "entityName string 0+ ?0+",
            ),
        ),
        "key string 0+",
        "value float64 0+",
        "remove bool 0+",
    ),
)

PRODUCER_IDS_RECORD = message(
    "ProducerIdsRecord",
    "0",
    flexible="0+",
    fields=(
        "brokerId int32 0+",
        "brokerEpoch int64 0+ =-1",
        "nextProducerId int64 0+",
    ),
)

BROKER_REGISTRATION_CHANGE_RECORD = message(
    "BrokerRegistrationChangeRecord",
    "0-3",
    flexible="0+",
    fields=(
        "brokerId int32 0+",
        "brokerEpoch int64 0+",
        "fenced int8 0+ #0@0+",
        "inControlledShutdown int8 1+ #1@1+",
        "logDirs []uuid 2+ #2@2+",
        "cordonedLogDirs []uuid 3+ ?3+ #3@3+ =null",
    ),
)

ACCESS_CONTROL_ENTRY_RECORD = message(
    "AccessControlEntryRecord",
    "0",
    flexible="0+",
    fields=(
        "id uuid 0+",
        "resourceType int8 0+",
        "resourceName string 0+",
        "patternType int8 0+",
        "principal string 0+",
        "host string 0+",
        "operation int8 0+",
        "permissionType int8 0+",
    ),
)

REMOVE_ACCESS_CONTROL_ENTRY_RECORD = message(
    "RemoveAccessControlEntryRecord",
    "0",
    flexible="0+",
    fields=("id uuid 0+",),
)

NO_OP_RECORD = message(
    "NoOpRecord",
    "0",
    flexible="0+",
    fields=(),
)

ZK_MIGRATION_STATE_RECORD = message(
    "ZkMigrationStateRecord",
    "0",
    flexible="0+",
    fields=("zkMigrationState int8 0+",),
)

REMOVE_USER_SCRAM_CREDENTIAL_RECORD = message(
    "RemoveUserScramCredentialRecord",
    "0",
    flexible="0+",
    fields=(
        "name string 0+",
        "mechanism int8 0+",
    ),
)

BEGIN_TRANSACTION_RECORD = message(
    "BeginTransactionRecord",
    "0",
    flexible="0+",
    fields=("name string 0+ ?0+ #0@0+ =null",),
)

END_TRANSACTION_RECORD = message(
    "EndTransactionRecord",
    "0",
    flexible="0+",
    fields=(),
)

ABORT_TRANSACTION_RECORD = message(
    "AbortTransactionRecord",
    "0",
    flexible="0+",
    fields=("reason string 0+ ?0+ #0@0+ =null",),
)

REMOVE_DELEGATION_TOKEN_RECORD = message(
    "RemoveDelegationTokenRecord",
    "0",
    flexible="0+",
    fields=("tokenId string 0+",),
)

REGISTER_CONTROLLER_RECORD = message(
    "RegisterControllerRecord",
    "0",
    flexible="0+",
    fields=(
        "controllerId int32 0+",
        "incarnationId uuid 0+",
        "zkMigrationReady bool 0+",
        (
            "endPoints []ControllerEndpoint 0+",
            (
                "name string 0+",
                "host string 0+",
                "port uint16 0+",
                "securityProtocol int16 0+",
            ),
        ),
        (
            "features []ControllerFeature 0+",
            (
                "name string 0+",
                "minSupportedVersion int16 0+",
                "maxSupportedVersion int16 0+",
            ),
        ),
    ),
)

CLEAR_ELR_RECORD = message(
    "ClearElrRecord",
    "0",
    flexible="0+",
    fields=("topicName string 0+",),
)

UNREGISTER_CONTROLLER_RECORD = message(
    "UnregisterControllerRecord",
    "0",
    flexible="0+",
    fields=("controllerId int32 0+",),
)
