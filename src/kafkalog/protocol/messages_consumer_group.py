"""Schema tables of the consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, as Kafka 4 declares them (see :mod:`kafkalog.format.message.schema` for the
table syntax). Version 1 of the heartbeat adds the server-side regex and has the member choose its
own id (KIP-1082); version 1 of the describe answer adds each member's type (KIP-1099).
"""

from __future__ import annotations

from .wire import api_message

CONSUMER_GROUP_HEARTBEAT_REQUEST = api_message(
    68,
    "ConsumerGroupHeartbeatRequest",
    "0-1",
    "0+",
    """
group_id string
member_id string
member_epoch int32
instance_id string ? =null
rack_id string ? =null
rebalance_timeout_ms int32 =-1
subscribed_topic_names [string] ? =null
subscribed_topic_regex string 1+ ? =null
server_assignor string ? =null
topic_partitions [] ? =null
  topic_id uuid
  partitions [int32]
""",
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = api_message(
    68,
    "ConsumerGroupHeartbeatResponse",
    "0-1",
    "0+",
    """
throttle_time_ms int32
error_code int16
error_message string ? =null
member_id string ? =null
member_epoch int32
heartbeat_interval_ms int32
assignment {} ? =null
  topic_partitions []
    topic_id uuid
    partitions [int32]
""",
)

CONSUMER_GROUP_DESCRIBE_REQUEST = api_message(
    69,
    "ConsumerGroupDescribeRequest",
    "0-1",
    "0+",
    """
group_ids [string]
include_authorized_operations bool
""",
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = api_message(
    69,
    "ConsumerGroupDescribeResponse",
    "0-1",
    "0+",
    """
throttle_time_ms int32
groups []
  error_code int16
  error_message string ? =null
  group_id string
  group_state string
  group_epoch int32
  assignment_epoch int32
  assignor_name string
  members []
    member_id string
    instance_id string ? =null
    rack_id string ? =null
    member_epoch int32
    client_id string
    client_host string
    subscribed_topic_names [string]
    subscribed_topic_regex string ? =null
    assignment {}
      topic_partitions []
        topic_id uuid
        topic_name string
        partitions [int32]
    target_assignment {}
      topic_partitions []
        topic_id uuid
        topic_name string
        partitions [int32]
    member_type int8 1+ =-1
  authorized_operations int32 =-2147483648
""",
)
