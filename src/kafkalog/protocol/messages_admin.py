"""Schema tables of the admin APIs a development broker is asked for in test setup and teardown:
DeleteRecords, AlterConfigs (the legacy, non-incremental one), CreatePartitions, DeleteGroups
and OffsetDelete (table syntax: :mod:`kafkalog.format.message.schema`). Versions are Kafka 4.0's
ranges for them, which KIP-896 left whole (DeleteGroups v0 was put back for Sarama, KAFKA-18352).
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
