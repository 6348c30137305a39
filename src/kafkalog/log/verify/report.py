"""What ``kafkalog.log.verify.data_dir`` reports: findings, per-partition summaries and the whole
report.

A finding names one problem or notable fact where it is: the file, and the byte position and
offset when known, with a short stable ``code`` (for scripts and tests) and a message for people.
Severities say what a reader of a dead broker's disk should do about it:

- ``error``: data is damaged or missing, or a file breaks Kafka's format (a CRC mismatch, a corrupt
  batch, an index pointing at the wrong bytes, a recovery point past the end of the log).
- ``warning``: not damage, but not what a cleanly stopped broker leaves behind; Kafka repairs or
  ignores it on startup (a torn tail of the active segment, a leftover ``.swap``, a missing index).
- ``info``: normal facts worth knowing (offset gaps left by compaction, stray producer snapshots
  Kafka's loader deletes, no clean-shutdown marker).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..json_fields import json_fields

__all__ = [
    "ERROR",
    "INFO",
    "SEVERITIES",
    "WARNING",
    "Finding",
    "FindingSink",
    "PartitionSummary",
    "VerifyReport",
]

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One problem or fact, located as precisely as the check knows."""

    severity: str
    code: str
    path: str
    message: str
    position: int | None = None  # byte position in ``path``
    offset: int | None = None  # Kafka offset the finding is about

    def to_dict(self) -> dict:
        return json_fields(self, ("severity", "code", "path", "position", "offset", "message"))

    def __str__(self) -> str:
        where = [self.path]
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.severity.upper()} {self.code} {', '.join(where)}: {self.message}"


@dataclass(slots=True, kw_only=True)
class PartitionSummary:
    """One partition directory as verified; offsets are None when the log has no segment."""

    path: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    errors: int = 0
    warnings: int = 0

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def to_dict(self) -> dict:
        return json_fields(
            self,
            (
                "path",
                "segments",
                "batches",
                "records",
                "log_start_offset",
                "log_end_offset",
                "errors",
                "warnings",
            ),
        )


@dataclass(slots=True)
class VerifyReport:
    """Everything one :func:`kafkalog.log.verify.data_dir.verify` call found. ``ok`` means no
    error."""

    path: str
    deep: bool
    findings: list[Finding] = field(default_factory=list)
    partitions: list[PartitionSummary] = field(default_factory=list)
    files_checked: int = 0

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(f.severity for f in self.findings)
        return {severity: found.get(severity, 0) for severity in SEVERITIES}

    @property
    def ok(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    def codes(self, severity: str | None = None) -> Counter:
        """How often each code was found (of one severity, or all)."""
        return Counter(f.code for f in self.findings if severity in (None, f.severity))

    def summary_dict(self) -> dict:
        return {
            "path": self.path,
            "deep": self.deep,
            "ok": self.ok,
            "filesChecked": self.files_checked,
            "partitions": len(self.partitions),
            "segments": sum(p.segments for p in self.partitions),
            "batches": sum(p.batches for p in self.partitions),
            "records": sum(p.records for p in self.partitions),
            **{f"{severity}s": n for severity, n in self.counts.items()},
        }


class FindingSink:
    """Where the checks put their findings (one per verify call)."""

    def __init__(self, on_bytes: Callable[[int], None] | None = None) -> None:
        self.findings: list[Finding] = []
        self.files_checked = 0
        self.on_bytes = on_bytes  # told the size of each file of batches walked (progress)

    def scanned(self, size: int) -> None:
        if self.on_bytes is not None:
            self.on_bytes(size)

    def add(
        self,
        severity: str,
        code: str,
        path: str | os.PathLike,
        message: str,
        *,
        position: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.findings.append(
            Finding(
                severity=severity,
                code=code,
                path=os.fspath(path),
                message=message,
                position=position,
                offset=offset,
            )
        )

    def error(self, code: str, path: str | os.PathLike, message: str, **where: int | None) -> None:
        self.add(ERROR, code, path, message, **where)

    def io_error(self, path: str | os.PathLike, error: OSError, doing: str = "cannot read") -> None:
        """An ``io-error``: what the system (or object storage, with the byte position of the
        failed read) said."""
        position = getattr(error, "position", None)
        detail = getattr(error, "message", None) if position is not None else None
        self.error("io-error", path, f"{doing}: {detail or error.strerror or error}",
                   position=position)  # fmt: skip

    def warning(
        self, code: str, path: str | os.PathLike, message: str, **where: int | None
    ) -> None:
        self.add(WARNING, code, path, message, **where)

    def info(self, code: str, path: str | os.PathLike, message: str, **where: int | None) -> None:
        self.add(INFO, code, path, message, **where)

    def count_since(self, start: int) -> tuple[int, int]:
        """(errors, warnings) among the findings added since ``len(findings)`` was ``start``."""
        added = self.findings[start:]
        return (
            sum(f.severity == ERROR for f in added),
            sum(f.severity == WARNING for f in added),
        )
