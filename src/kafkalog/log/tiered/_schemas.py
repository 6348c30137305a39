"""Schemas of the ``__remote_log_metadata`` records, one per apiKey.

Transcribed from Kafka's storage/src/main/resources/message/Remote*Record.json (in the
kafka-storage jar, 3.9 to 4.3: all version 0, flexible) into the table notation of
:mod:`kafkalog.format.message.schema`. apiKey 3 (RemoteLogSegmentMetadataSnapshotRecord) is only
written to the metadata manager's own snapshot files, never to the topic, and is not described.
"""

from __future__ import annotations

from ...format.message import Message

# Both segment records begin with the segment's id: its partition (topic name, topic id,
# partition) and the segment's own uuid.
_SEGMENT_ID = """\
remoteLogSegmentId {}
  topicIdPartition {}
    name string
    id uuid
    partition int32
  id uuid
"""

REMOTE_LOG_SEGMENT_METADATA_RECORD = Message(
    "RemoteLogSegmentMetadataRecord",
    "0",
    "0+",
    _SEGMENT_ID
    + """\
startOffset int64
endOffset int64
brokerId int32
maxTimestampMs int64
eventTimestampMs int64
segmentLeaderEpochs []
  leaderEpoch int32
  offset int64
segmentSizeInBytes int32
customMetadata bytes ? =null
remoteLogSegmentState int8
txnIndexEmpty bool ? tag=0 =null
""",
)

REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD = Message(
    "RemoteLogSegmentMetadataUpdateRecord",
    "0",
    "0+",
    _SEGMENT_ID
    + """\
brokerId int32
eventTimestampMs int64
customMetadata bytes ? =null
remoteLogSegmentState int8
""",
)

REMOTE_PARTITION_DELETE_METADATA_RECORD = Message(
    "RemotePartitionDeleteMetadataRecord",
    "0",
    "0+",
    """\
topicIdPartition {}
  name string
  id uuid
  partition int32
brokerId int32
eventTimestampMs int64
remotePartitionDeleteState int8
""",
)
