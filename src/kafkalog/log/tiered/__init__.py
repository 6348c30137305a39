"""Tiered storage (KIP-405): a partition read from its remote segments and its local ones.

:func:`open_tiered_partition` opens one (:mod:`.plan` chooses the segments, :mod:`.partition`
reads them); :mod:`.metadata` reads the remote log metadata Kafka keeps in
``__remote_log_metadata``, and where a remote store keeps a segment's files is a
:class:`RemoteStorageLayout` (:mod:`.layout`; Kafka's LocalTieredStorage's is built in).
docs/tiered-storage.md says what is supported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .errors import (
        RemoteSegmentMissingError,
        RemoteSegmentTruncatedError,
        TieredOffsetGapError,
        TieredStorageError,
    )
    from .layout import LocalTieredStorageLayout, RemoteFileType, RemoteStorageLayout
    from .metadata import (
        REMOTE_LOG_METADATA_TOPIC,
        RemoteLogSegmentMetadata,
        RemoteLogSegmentState,
        RemotePartitionDeleteState,
        RemotePartitionMetadata,
        TopicIdPartition,
        decode_remote_log_metadata,
        fold_remote_log_metadata,
        read_remote_log_metadata,
    )
    from .partition import TieredPartition, TieredSegment
    from .plan import copied_remote_offsets, open_tiered_partition

_EXPORTS = {
    "LocalTieredStorageLayout": "layout",
    "REMOTE_LOG_METADATA_TOPIC": "metadata",
    "RemoteFileType": "layout",
    "RemoteLogSegmentMetadata": "metadata",
    "RemoteLogSegmentState": "metadata",
    "RemotePartitionDeleteState": "metadata",
    "RemotePartitionMetadata": "metadata",
    "RemoteSegmentMissingError": "errors",
    "RemoteSegmentTruncatedError": "errors",
    "RemoteStorageLayout": "layout",
    "TieredOffsetGapError": "errors",
    "TieredPartition": "partition",
    "TieredSegment": "partition",
    "TieredStorageError": "errors",
    "TopicIdPartition": "metadata",
    "copied_remote_offsets": "plan",
    "decode_remote_log_metadata": "metadata",
    "fold_remote_log_metadata": "metadata",
    "open_tiered_partition": "plan",
    "read_remote_log_metadata": "metadata",
}
__all__ = [
    "REMOTE_LOG_METADATA_TOPIC",
    "LocalTieredStorageLayout",
    "RemoteFileType",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteState",
    "RemotePartitionMetadata",
    "RemoteSegmentMissingError",
    "RemoteSegmentTruncatedError",
    "RemoteStorageLayout",
    "TieredOffsetGapError",
    "TieredPartition",
    "TieredSegment",
    "TieredStorageError",
    "TopicIdPartition",
    "copied_remote_offsets",
    "decode_remote_log_metadata",
    "fold_remote_log_metadata",
    "open_tiered_partition",
    "read_remote_log_metadata",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
