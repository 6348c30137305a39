"""Schema tables of the APIs the broker itself serves: produce, fetch, offsets, metadata (and
DescribeTopicPartitions, KIP-966's paged form of it), topics, configs, coordinator discovery and
ApiVersions (see :mod:`kafkalog.format.message.schema` for the
table syntax). Versions are the ranges this server speaks: at least what librdkafka 2.16 and
kafka-python 3.0 choose, from the oldest Kafka 4.0 still accepts.
"""

from __future__ import annotations

from .wire import api_message

PRODUCE_REQUEST = api_message(
    0,
    "ProduceRequest",
    "3-10",
    "9+",
    """
transactional_id string ? =null
acks int16
timeout_ms int32
topic_data []
  name string
  partition_data []
    index int32
    records records ?
""",
)

PRODUCE_RESPONSE = api_message(
    0,
    "ProduceResponse",
    "3-10",
    "9+",
    """
responses []
  name string
  partition_responses []
    index int32
    error_code int16
    base_offset int64
    log_append_time_ms int64 =-1
    log_start_offset int64 5+ =-1
    record_errors [] 8+
      batch_index int32 8+
      batch_index_error_message string 8+ ? =null
    error_message string 8+ ? =null
    current_leader {} 10+ tag=0
      leader_id int32 10+ =-1
      leader_epoch int32 10+ =-1
throttle_time_ms int32
node_endpoints []NodeEndpoint 10+ tag=0
""",
)

FETCH_REQUEST = api_message(
    1,
    "FetchRequest",
    "4-16",
    "12+",
    """
cluster_id string 12+ ? tag=0 =null
replica_id int32 4-14 =-1
replica_state {} 15+ tag=1
  replica_id int32 15+ =-1
  replica_epoch int64 15+ =-1
max_wait_ms int32
min_bytes int32
max_bytes int32 =0x7fffffff
isolation_level int8
session_id int32 7+
session_epoch int32 7+ =-1
topics []
  topic string 4-12
  topic_id uuid 13+
  partitions []
    partition int32
    current_leader_epoch int32 9+ =-1
    fetch_offset int64
    last_fetched_epoch int32 12+ =-1
    log_start_offset int64 5+ =-1
    partition_max_bytes int32
forgotten_topics_data [] 7+
  topic string 7-12
  topic_id uuid 13+
  partitions [int32] 7+
rack_id string 11+
""",
)

FETCH_RESPONSE = api_message(
    1,
    "FetchResponse",
    "4-16",
    "12+",
    """
throttle_time_ms int32
error_code int16 7+
session_id int32 7+
responses []
  topic string 4-12
  topic_id uuid 13+
  partitions []
    partition_index int32
    error_code int16
    high_watermark int64
    last_stable_offset int64 =-1
    log_start_offset int64 5+ =-1
    diverging_epoch {} 12+ tag=0
      epoch int32 12+ =-1
      end_offset int64 12+ =-1
    current_leader {} 12+ tag=1
      leader_id int32 12+ =-1
      leader_epoch int32 12+ =-1
    snapshot_id {} 12+ tag=2
      end_offset int64 12+ =-1
      epoch int32 12+ =-1
    aborted_transactions [] ?
      producer_id int64
      first_offset int64
    preferred_read_replica int32 11+ =-1
    records records ?
node_endpoints []NodeEndpoint 16+ tag=0
""",
)

LIST_OFFSETS_REQUEST = api_message(
    2,
    "ListOffsetsRequest",
    "1-7",
    "6+",
    """
replica_id int32
isolation_level int8 2+
topics []
  name string
  partitions []
    partition_index int32
    current_leader_epoch int32 4+ =-1
    timestamp int64
""",
)

LIST_OFFSETS_RESPONSE = api_message(
    2,
    "ListOffsetsResponse",
    "1-7",
    "6+",
    """
throttle_time_ms int32 2+
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
    timestamp int64 =-1
    offset int64 =-1
    leader_epoch int32 4+ =-1
""",
)

METADATA_REQUEST = api_message(
    3,
    "MetadataRequest",
    "0-12",
    "9+",
    """
topics [] ?1+
  topic_id uuid 10+
  name string ?10+
allow_auto_topic_creation bool 4+ =true
include_cluster_authorized_operations bool 8-10
include_topic_authorized_operations bool 8+
""",
)

METADATA_RESPONSE = api_message(
    3,
    "MetadataResponse",
    "0-12",
    "9+",
    """
throttle_time_ms int32 3+
brokers []
  node_id int32
  host string
  port int32
  rack string 1+ ? =null
cluster_id string 2+ ? =null
controller_id int32 1+ =-1
topics []
  error_code int16
  name string ?12+
  topic_id uuid 10+
  is_internal bool 1+
  partitions []
    error_code int16
    partition_index int32
    leader_id int32
    leader_epoch int32 7+ =-1
    replica_nodes [int32]
    isr_nodes [int32]
    offline_replicas [int32] 5+
  topic_authorized_operations int32 8+ =-2147483648
cluster_authorized_operations int32 8-10 =-2147483648
""",
)

DESCRIBE_TOPIC_PARTITIONS_REQUEST = api_message(
    75,
    "DescribeTopicPartitionsRequest",
    "0",
    "0+",
    """
topics []
  name string
response_partition_limit int32 =2000
cursor {} ? =null
  topic_name string
  partition_index int32
""",
)

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = api_message(
    75,
    "DescribeTopicPartitionsResponse",
    "0",
    "0+",
    """
throttle_time_ms int32
topics []
  error_code int16
  name string ?
  topic_id uuid
  is_internal bool
  partitions []
    error_code int16
    partition_index int32
    leader_id int32
    leader_epoch int32 =-1
    replica_nodes [int32]
    isr_nodes [int32]
    eligible_leader_replicas [int32] ? =null
    last_known_elr [int32] ? =null
    offline_replicas [int32]
  topic_authorized_operations int32 =-2147483648
next_cursor {} ? =null
  topic_name string
  partition_index int32
""",
)

FIND_COORDINATOR_REQUEST = api_message(
    10,
    "FindCoordinatorRequest",
    "0-4",
    "3+",
    """
key string 0-3
key_type int8 1+
coordinator_keys [string] 4+
""",
)

FIND_COORDINATOR_RESPONSE = api_message(
    10,
    "FindCoordinatorResponse",
    "0-4",
    "3+",
    """
throttle_time_ms int32 1+
error_code int16 0-3
error_message string 1-3 ?
node_id int32 0-3
host string 0-3
port int32 0-3
coordinators [] 4+
  key string 4+
  node_id int32 4+
  host string 4+
  port int32 4+
  error_code int16 4+
  error_message string 4+ ?
""",
)

API_VERSIONS_REQUEST = api_message(
    18,
    "ApiVersionsRequest",
    "0-3",
    "3+",
    """
client_software_name string 3+
client_software_version string 3+
""",
)

API_VERSIONS_RESPONSE = api_message(
    18,
    "ApiVersionsResponse",
    "0-3",
    "3+",
    """
error_code int16
api_keys []
  api_key int16
  min_version int16
  max_version int16
throttle_time_ms int32 1+
supported_features [] 3+ tag=0
  name string 3+
  min_version int16 3+
  max_version int16 3+
finalized_features_epoch int64 3+ tag=1 =-1
finalized_features [] 3+ tag=2
  name string 3+
  max_version_level int16 3+
  min_version_level int16 3+
zk_migration_ready bool 3+ tag=3
""",
)

CREATE_TOPICS_REQUEST = api_message(
    19,
    "CreateTopicsRequest",
    "2-7",
    "5+",
    """
topics []
  name string
  num_partitions int32
  replication_factor int16
  assignments []
    partition_index int32
    broker_ids [int32]
  configs []
    name string
    value string ?
timeout_ms int32 =60000
validate_only bool
""",
)

CREATE_TOPICS_RESPONSE = api_message(
    19,
    "CreateTopicsResponse",
    "2-7",
    "5+",
    """
throttle_time_ms int32
topics []
  name string
  topic_id uuid 7+
  error_code int16
  error_message string ?
  topic_config_error_code int16 5+ tag=0
  num_partitions int32 5+ =-1
  replication_factor int16 5+ =-1
  configs [] 5+ ?
    name string 5+
    value string 5+ ?
    read_only bool 5+
    config_source int8 5+ =-1
    is_sensitive bool 5+
""",
)

DELETE_TOPICS_REQUEST = api_message(
    20,
    "DeleteTopicsRequest",
    "1-6",
    "4+",
    """
topics [] 6+
  name string 6+ ? =null
  topic_id uuid 6+
topic_names [string] 1-5
timeout_ms int32
""",
)

DELETE_TOPICS_RESPONSE = api_message(
    20,
    "DeleteTopicsResponse",
    "1-6",
    "4+",
    """
throttle_time_ms int32
responses []
  name string ?6+
  topic_id uuid 6+
  error_code int16
  error_message string 5+ ? =null
""",
)

OFFSET_FOR_LEADER_EPOCH_REQUEST = api_message(
    23,
    "OffsetForLeaderEpochRequest",
    "2-4",
    "4+",
    """
replica_id int32 3+ =-2
topics []
  topic string
  partitions []
    partition int32
    current_leader_epoch int32 =-1
    leader_epoch int32
""",
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = api_message(
    23,
    "OffsetForLeaderEpochResponse",
    "2-4",
    "4+",
    """
throttle_time_ms int32
topics []
  topic string
  partitions []
    error_code int16
    partition int32
    leader_epoch int32 =-1
    end_offset int64 =-1
""",
)

DESCRIBE_CONFIGS_REQUEST = api_message(
    32,
    "DescribeConfigsRequest",
    "1-4",
    "4+",
    """
resources []
  resource_type int8
  resource_name string
  configuration_keys [string] ?
include_synonyms bool
include_documentation bool 3+
""",
)

DESCRIBE_CONFIGS_RESPONSE = api_message(
    32,
    "DescribeConfigsResponse",
    "1-4",
    "4+",
    """
throttle_time_ms int32
results []
  error_code int16
  error_message string ?
  resource_type int8
  resource_name string
  configs []
    name string
    value string ?
    read_only bool
    config_source int8 =-1
    is_sensitive bool
    synonyms []
      name string
      value string ?
      source int8
    config_type int8 3+
    documentation string 3+ ?
""",
)

INCREMENTAL_ALTER_CONFIGS_REQUEST = api_message(
    44,
    "IncrementalAlterConfigsRequest",
    "0-1",
    "1+",
    """
resources []
  resource_type int8
  resource_name string
  configs []
    name string
    config_operation int8
    value string ?
validate_only bool
""",
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = api_message(
    44,
    "IncrementalAlterConfigsResponse",
    "0-1",
    "1+",
    """
throttle_time_ms int32
responses []
  error_code int16
  error_message string ?
  resource_type int8
  resource_name string
""",
)
