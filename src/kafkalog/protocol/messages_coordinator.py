"""Schema tables of the group and transaction coordinators' APIs (see
:mod:`kafkalog.format.message.schema` for the table syntax). Versions are the ranges this server
speaks: what librdkafka 2.16 and kafka-python 3.0 choose, from the oldest Kafka 4.0 accepts.
"""

from __future__ import annotations

from .wire import api_message

OFFSET_COMMIT_REQUEST = api_message(
    8,
    "OffsetCommitRequest",
    "2-9",
    "8+",
    """
group_id string
generation_id_or_member_epoch int32 =-1
member_id string
group_instance_id string 7+ ? =null
retention_time_ms int64 2-4 =-1
topics []
  name string
  partitions []
    partition_index int32
    committed_offset int64
    committed_leader_epoch int32 6+ =-1
    committed_metadata string ?
""",
)

OFFSET_COMMIT_RESPONSE = api_message(
    8,
    "OffsetCommitResponse",
    "2-9",
    "8+",
    """
throttle_time_ms int32 3+
topics []TopicPartitionErrors
""",
)

OFFSET_FETCH_REQUEST = api_message(
    9,
    "OffsetFetchRequest",
    "1-9",
    "6+",
    """
group_id string 1-7
topics [] 1-7 ?2-7
  name string 1-7
  partition_indexes [int32] 1-7
groups [] 8+
  group_id string 8+
  member_id string 9+ ? =null
  member_epoch int32 9+ =-1
  topics [] 8+ ?
    name string 8+
    partition_indexes [int32] 8+
require_stable bool 7+
""",
)

OFFSET_FETCH_RESPONSE = api_message(
    9,
    "OffsetFetchResponse",
    "1-9",
    "6+",
    """
throttle_time_ms int32 3+
topics [] 1-7
  name string 1-7
  partitions [] 1-7
    partition_index int32 1-7
    committed_offset int64 1-7
    committed_leader_epoch int32 5-7 =-1
    metadata string 1-7 ?
    error_code int16 1-7
error_code int16 2-7
groups [] 8+
  group_id string 8+
  topics [] 8+
    name string 8+
    partitions [] 8+
      partition_index int32 8+
      committed_offset int64 8+
      committed_leader_epoch int32 8+ =-1
      metadata string 8+ ?
      error_code int16 8+
  error_code int16 8+
""",
)

JOIN_GROUP_REQUEST = api_message(
    11,
    "JoinGroupRequest",
    "0-7",
    "6+",
    """
group_id string
session_timeout_ms int32
rebalance_timeout_ms int32 1+ =-1
member_id string
group_instance_id string 5+ ? =null
protocol_type string
protocols []
  name string
  metadata bytes
""",
)

JOIN_GROUP_RESPONSE = api_message(
    11,
    "JoinGroupResponse",
    "0-7",
    "6+",
    """
throttle_time_ms int32 2+
error_code int16
generation_id int32 =-1
protocol_type string 7+ ? =null
protocol_name string ?7+
leader string
member_id string
members []
  member_id string
  group_instance_id string 5+ ? =null
  metadata bytes
""",
)

HEARTBEAT_REQUEST = api_message(
    12,
    "HeartbeatRequest",
    "0-4",
    "4+",
    """
group_id string
generation_id int32
member_id string
group_instance_id string 3+ ? =null
""",
)

HEARTBEAT_RESPONSE = api_message(
    12,
    "HeartbeatResponse",
    "0-4",
    "4+",
    """
throttle_time_ms int32 1+
error_code int16
""",
)

LEAVE_GROUP_REQUEST = api_message(
    13,
    "LeaveGroupRequest",
    "0-5",
    "4+",
    """
group_id string
member_id string 0-2
members [] 3+
  member_id string 3+
  group_instance_id string 3+ ? =null
  reason string 5+ ? =null
""",
)

LEAVE_GROUP_RESPONSE = api_message(
    13,
    "LeaveGroupResponse",
    "0-5",
    "4+",
    """
throttle_time_ms int32 1+
error_code int16
members [] 3+
  member_id string 3+
  group_instance_id string 3+ ?
  error_code int16 3+
""",
)

SYNC_GROUP_REQUEST = api_message(
    14,
    "SyncGroupRequest",
    "0-5",
    "4+",
    """
group_id string
generation_id int32
member_id string
group_instance_id string 3+ ? =null
protocol_type string 5+ ? =null
protocol_name string 5+ ? =null
assignments []
  member_id string
  assignment bytes
""",
)

SYNC_GROUP_RESPONSE = api_message(
    14,
    "SyncGroupResponse",
    "0-5",
    "4+",
    """
throttle_time_ms int32 1+
error_code int16
protocol_type string 5+ ? =null
protocol_name string 5+ ? =null
assignment bytes
""",
)

DESCRIBE_GROUPS_REQUEST = api_message(
    15,
    "DescribeGroupsRequest",
    "0-6",
    "5+",
    """
groups [string]
include_authorized_operations bool 3+
""",
)

DESCRIBE_GROUPS_RESPONSE = api_message(
    15,
    "DescribeGroupsResponse",
    "0-6",
    "5+",
    """
throttle_time_ms int32 1+
groups []
  error_code int16
  error_message string 6+ ? =null
  group_id string
  group_state string
  protocol_type string
  protocol_data string
  members []
    member_id string
    group_instance_id string 4+ ? =null
    client_id string
    client_host string
    member_metadata bytes
    member_assignment bytes
  authorized_operations int32 3+ =-2147483648
""",
)

LIST_GROUPS_REQUEST = api_message(
    16,
    "ListGroupsRequest",
    "0-5",
    "3+",
    """
states_filter [string] 4+
types_filter [string] 5+
""",
)

LIST_GROUPS_RESPONSE = api_message(
    16,
    "ListGroupsResponse",
    "0-5",
    "3+",
    """
throttle_time_ms int32 1+
error_code int16
groups []
  group_id string
  protocol_type string
  group_state string 4+
  group_type string 5+
""",
)

INIT_PRODUCER_ID_REQUEST = api_message(
    22,
    "InitProducerIdRequest",
    "0-4",
    "2+",
    """
transactional_id string ?
transaction_timeout_ms int32
producer_id int64 3+ =-1
producer_epoch int16 3+ =-1
""",
)

INIT_PRODUCER_ID_RESPONSE = api_message(
    22,
    "InitProducerIdResponse",
    "0-4",
    "2+",
    """
throttle_time_ms int32
error_code int16
producer_id int64 =-1
producer_epoch int16
""",
)

ADD_PARTITIONS_TO_TXN_REQUEST = api_message(
    24,
    "AddPartitionsToTxnRequest",
    "0-3",
    "3+",
    """
v3_and_below_transactional_id string
v3_and_below_producer_id int64
v3_and_below_producer_epoch int16
v3_and_below_topics []
  name string
  partitions [int32]
""",
)

ADD_PARTITIONS_TO_TXN_RESPONSE = api_message(
    24,
    "AddPartitionsToTxnResponse",
    "0-3",
    "3+",
    """
throttle_time_ms int32
results_by_topic_v3_and_below []
  name string
  results_by_partition []
    partition_index int32
    partition_error_code int16
""",
)

ADD_OFFSETS_TO_TXN_REQUEST = api_message(
    25,
    "AddOffsetsToTxnRequest",
    "0-3",
    "3+",
    """
transactional_id string
producer_id int64
producer_epoch int16
group_id string
""",
)

ADD_OFFSETS_TO_TXN_RESPONSE = api_message(
    25,
    "AddOffsetsToTxnResponse",
    "0-3",
    "3+",
    """
throttle_time_ms int32
error_code int16
""",
)

END_TXN_REQUEST = api_message(
    26,
    "EndTxnRequest",
    "0-3",
    "3+",
    """
transactional_id string
producer_id int64
producer_epoch int16
committed bool
""",
)

END_TXN_RESPONSE = api_message(
    26,
    "EndTxnResponse",
    "0-3",
    "3+",
    """
throttle_time_ms int32
error_code int16
""",
)

TXN_OFFSET_COMMIT_REQUEST = api_message(
    28,
    "TxnOffsetCommitRequest",
    "0-3",
    "3+",
    """
transactional_id string
group_id string
producer_id int64
producer_epoch int16
generation_id int32 3+ =-1
member_id string 3+
group_instance_id string 3+ ? =null
topics []
  name string
  partitions []
    partition_index int32
    committed_offset int64
    committed_leader_epoch int32 2+ =-1
    committed_metadata string ?
""",
)

TXN_OFFSET_COMMIT_RESPONSE = api_message(
    28,
    "TxnOffsetCommitResponse",
    "0-3",
    "3+",
    """
throttle_time_ms int32
topics []TopicPartitionErrors
""",
)

DESCRIBE_TRANSACTIONS_REQUEST = api_message(
    65,
    "DescribeTransactionsRequest",
    "0",
    "0+",
    """
transactional_ids [string]
""",
)

DESCRIBE_TRANSACTIONS_RESPONSE = api_message(
    65,
    "DescribeTransactionsResponse",
    "0",
    "0+",
    """
throttle_time_ms int32
transaction_states []
  error_code int16
  transactional_id string
  transaction_state string
  transaction_timeout_ms int32
  transaction_start_time_ms int64
  producer_id int64
  producer_epoch int16
  topics []
    topic string
    partitions [int32]
""",
)

LIST_TRANSACTIONS_REQUEST = api_message(
    66,
    "ListTransactionsRequest",
    "0-2",
    "0+",
    """
state_filters [string]
producer_id_filters [int64]
duration_filter int64 1+ =-1
transactional_id_pattern string 2+ ? =null
""",
)

LIST_TRANSACTIONS_RESPONSE = api_message(
    66,
    "ListTransactionsResponse",
    "0-2",
    "0+",
    """
throttle_time_ms int32
error_code int16
unknown_state_filters [string]
transaction_states []
  transactional_id string
  producer_id int64
  transaction_state string
""",
)

WRITE_TXN_MARKERS_REQUEST = api_message(
    27,
    "WriteTxnMarkersRequest",
    "1-2",
    "1+",
    """
markers []
  producer_id int64
  producer_epoch int16
  transaction_result bool
  topics []
    name string
    partition_indexes [int32]
  coordinator_epoch int32
  transaction_version int8 2+
""",
)

WRITE_TXN_MARKERS_RESPONSE = api_message(
    27,
    "WriteTxnMarkersResponse",
    "1-2",
    "1+",
    """
markers []
  producer_id int64
  topics []TopicPartitionErrors
""",
)

DESCRIBE_PRODUCERS_REQUEST = api_message(
    61,
    "DescribeProducersRequest",
    "0",
    "0+",
    """
topics []
  name string
  partition_indexes [int32]
""",
)

DESCRIBE_PRODUCERS_RESPONSE = api_message(
    61,
    "DescribeProducersResponse",
    "0",
    "0+",
    """
throttle_time_ms int32
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
    error_message string ? =null
    active_producers []
      producer_id int64
      producer_epoch int32
      last_sequence int32 =-1
      last_timestamp int64 =-1
      coordinator_epoch int32
      current_txn_start_offset int64 =-1
""",
)
