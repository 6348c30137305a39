"""Log compaction: Kafka's LogCleaner, its filter, its manager and its offset map."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .cleaner import clean
    from .manager import LogToClean, filthiest_log, log_to_clean, read_cleaner_checkpoint

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "clean": "cleaner",
    "LogToClean": "manager",
    "filthiest_log": "manager",
    "log_to_clean": "manager",
    "read_cleaner_checkpoint": "manager",
}
__all__ = [
    "LogToClean",
    "clean",
    "filthiest_log",
    "log_to_clean",
    "read_cleaner_checkpoint",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
