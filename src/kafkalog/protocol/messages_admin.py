"""Schema tables of the admin APIs a development broker is asked for in test setup and teardown:
DeleteRecords, AlterConfigs (the legacy, non-incremental one), CreatePartitions, DeleteGroups
and OffsetDelete, and of the cluster's and log directories' descriptions (DescribeCluster,
DescribeLogDirs) that admin tools ask for (table syntax: :mod:`kafkalog.format.message.schema`).
Versions are Kafka 4.0's ranges for them, which KIP-896 left whole (DeleteGroups v0 was put back
for Sarama, KAFKA-18352); DescribeLogDirs goes to Kafka 4.4's v5 (a directory's cordoned flag).
"""

from __future__ import annotations

from .wire import api_message

DELETE_RECORDS_REQUEST = api_message(
    21,
    "DeleteRecordsRequest",
    "0-2",
    "2+",
    """
topics []
  name string
  partitions []
    partition_index int32
    offset int64
timeout_ms int32
""",
)

DELETE_RECORDS_RESPONSE = api_message(
    21,
    "DeleteRecordsResponse",
    "0-2",
    "2+",
    """
throttle_time_ms int32
topics []
  name string
  partitions []
    partition_index int32
    low_watermark int64 =-1
    error_code int16
""",
)

ALTER_CONFIGS_REQUEST = api_message(
    33,
    "AlterConfigsRequest",
    "0-2",
    "2+",
    """
resources []
  resource_type int8
  resource_name string
  configs []
    name string
    value string ?
validate_only bool
""",
)

ALTER_CONFIGS_RESPONSE = api_message(
    33,
    "AlterConfigsResponse",
    "0-2",
    "2+",
    """
throttle_time_ms int32
responses []
  error_code int16
  error_message string ? =null
  resource_type int8
  resource_name string
""",
)

CREATE_PARTITIONS_REQUEST = api_message(
    37,
    "CreatePartitionsRequest",
    "0-3",
    "2+",
    """
topics []
  name string
  count int32
  assignments [] ?
    broker_ids [int32]
timeout_ms int32
validate_only bool
""",
)

CREATE_PARTITIONS_RESPONSE = api_message(
    37,
    "CreatePartitionsResponse",
    "0-3",
    "2+",
    """
throttle_time_ms int32
results []
  name string
  error_code int16
  error_message string ? =null
""",
)

DELETE_GROUPS_REQUEST = api_message(
    42,
    "DeleteGroupsRequest",
    "0-2",
    "2+",
    """
groups_names [string]
""",
)

DELETE_GROUPS_RESPONSE = api_message(
    42,
    "DeleteGroupsResponse",
    "0-2",
    "2+",
    """
throttle_time_ms int32
results []
  group_id string
  error_code int16
""",
)

OFFSET_DELETE_REQUEST = api_message(
    47,
    "OffsetDeleteRequest",
    "0",
    "none",
    """
group_id string
topics []
  name string
  partitions []
    partition_index int32
""",
)

OFFSET_DELETE_RESPONSE = api_message(
    47,
    "OffsetDeleteResponse",
    "0",
    "none",
    """
error_code int16
throttle_time_ms int32
topics []TopicPartitionErrors
""",
)

DESCRIBE_LOG_DIRS_REQUEST = api_message(
    35,
    "DescribeLogDirsRequest",
    "1-5",
    "2+",
    """
topics [] ?
  topic string
  partitions [int32]
""",
)

DESCRIBE_LOG_DIRS_RESPONSE = api_message(
    35,
    "DescribeLogDirsResponse",
    "1-5",
    "2+",
    """
throttle_time_ms int32
error_code int16 3+
results []
  error_code int16
  log_dir string
  topics []
    name string
    partitions []
      partition_index int32
      partition_size int64
      offset_lag int64
      is_future_key bool
  total_bytes int64 4+ =-1
  usable_bytes int64 4+ =-1
  is_cordoned bool 5+
""",
)

DESCRIBE_CLUSTER_REQUEST = api_message(
    60,
    "DescribeClusterRequest",
    "0-2",
    "0+",
    """
include_cluster_authorized_operations bool
endpoint_type int8 1+ =1
include_fenced_brokers bool 2+
""",
)

DESCRIBE_CLUSTER_RESPONSE = api_message(
    60,
    "DescribeClusterResponse",
    "0-2",
    "0+",
    """
throttle_time_ms int32
error_code int16
error_message string ? =null
endpoint_type int8 1+ =1
cluster_id string
controller_id int32 =-1
brokers []
  broker_id int32
  host string
  port int32
  rack string ? =null
  is_fenced bool 2+
cluster_authorized_operations int32 =-2147483648
""",
)
