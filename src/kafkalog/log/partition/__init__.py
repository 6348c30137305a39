"""One partition's log: segments, loading and recovery, leader epochs, retention and recovery
plans."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .config import LOG_CONFIG_DEFS, LogConfig
    from .config_synonyms import (
        DEFAULT_SYNONYMS,
        broker_synonym_given,
        broker_synonyms,
        broker_synonyms_given,
        topic_defaults,
    )
    from .leader_epoch import end_offset_for
    from .leader_epoch_repair import describe_epochs, rebuild_leader_epoch_checkpoint
    from .loader import load_segments, open_remote_log
    from .log import (
        EARLIEST_TIMESTAMP,
        LATEST_TIMESTAMP,
        MAX_TIMESTAMP,
        READ_COMMITTED,
        READ_UNCOMMITTED,
        Log,
        LogAppendInfo,
        OffsetOutOfRangeError,
    )
    from .quarantine import QUARANTINE_DIR_NAME, Quarantine
    from .recovery_plan import (
        DROP_SEGMENT,
        REBUILD_INDEXES,
        REWRITE_CHECKPOINT,
        RecoveryAction,
        finish_recovery_plan,
        plan_recovery,
        records_from,
        segment_valid_prefix,
        zero_filled,
    )
    from .retention_plan import plan_retention

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "DEFAULT_SYNONYMS": "config_synonyms",
    "DROP_SEGMENT": "recovery_plan",
    "EARLIEST_TIMESTAMP": "log",
    "LATEST_TIMESTAMP": "log",
    "LOG_CONFIG_DEFS": "config",
    "Log": "log",
    "LogAppendInfo": "log",
    "LogConfig": "config",
    "MAX_TIMESTAMP": "log",
    "OffsetOutOfRangeError": "log",
    "QUARANTINE_DIR_NAME": "quarantine",
    "Quarantine": "quarantine",
    "READ_COMMITTED": "log",
    "READ_UNCOMMITTED": "log",
    "REBUILD_INDEXES": "recovery_plan",
    "REWRITE_CHECKPOINT": "recovery_plan",
    "RecoveryAction": "recovery_plan",
    "broker_synonym_given": "config_synonyms",
    "broker_synonyms": "config_synonyms",
    "broker_synonyms_given": "config_synonyms",
    "describe_epochs": "leader_epoch_repair",
    "end_offset_for": "leader_epoch",
    "finish_recovery_plan": "recovery_plan",
    "load_segments": "loader",
    "open_remote_log": "loader",
    "plan_recovery": "recovery_plan",
    "plan_retention": "retention_plan",
    "rebuild_leader_epoch_checkpoint": "leader_epoch_repair",
    "records_from": "recovery_plan",
    "segment_valid_prefix": "recovery_plan",
    "topic_defaults": "config_synonyms",
    "zero_filled": "recovery_plan",
}
__all__ = [
    "DEFAULT_SYNONYMS",
    "DROP_SEGMENT",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LOG_CONFIG_DEFS",
    "MAX_TIMESTAMP",
    "QUARANTINE_DIR_NAME",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "REBUILD_INDEXES",
    "REWRITE_CHECKPOINT",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "OffsetOutOfRangeError",
    "Quarantine",
    "RecoveryAction",
    "broker_synonym_given",
    "broker_synonyms",
    "broker_synonyms_given",
    "describe_epochs",
    "end_offset_for",
    "finish_recovery_plan",
    "load_segments",
    "open_remote_log",
    "plan_recovery",
    "plan_retention",
    "rebuild_leader_epoch_checkpoint",
    "records_from",
    "segment_valid_prefix",
    "topic_defaults",
    "zero_filled",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
