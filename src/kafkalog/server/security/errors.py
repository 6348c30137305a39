"""The one error of an authentication exchange (defined in :mod:`kafkalog.errors`)."""

from __future__ import annotations

from ...errors import SaslFailed

__all__ = ["SaslFailed"]
