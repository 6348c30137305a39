"""Kafka's LogValidator: the checks and offset assignment of an append as leader, pure over
bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .log_validator import validate_records
    from .scan import V2Header, scan_v2_batches
    from .types import AppendOrigin, LogValidatorConfig, RecordValidationError

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "AppendOrigin": "types",
    "LogValidatorConfig": "types",
    "RecordValidationError": "types",
    "V2Header": "scan",
    "scan_v2_batches": "scan",
    "validate_records": "log_validator",
}
__all__ = [
    "AppendOrigin",
    "LogValidatorConfig",
    "RecordValidationError",
    "V2Header",
    "scan_v2_batches",
    "validate_records",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
