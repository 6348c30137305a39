"""Kafka's Uuid text form (org.apache.kafka.common.Uuid): URL-safe base64, no padding.

Topic ids (partition.metadata) and directory ids (meta.properties) are written this way, e.g.
``XHhkr4tkSsD900pOQ8pPfg``. Values are :class:`uuid.UUID`; the all-zero id means "none" and is
never a valid topic id.
"""

from __future__ import annotations

import base64
import re
import uuid

from ...format.internal.result import uuid_to_kafka_string

__all__ = [
    "METADATA_TOPIC_ID",
    "ONE_UUID",
    "ZERO_UUID",
    "uuid_from_kafka_string",
    "uuid_to_kafka_string",
]

ZERO_UUID = uuid.UUID(int=0)
ONE_UUID = uuid.UUID(int=1)
METADATA_TOPIC_ID = ONE_UUID  # the __cluster_metadata topic's id

# 16 bytes are 22 base64 characters (the last carries 4 unused bits); Java's decoder also takes
# the padded form.
_KAFKA_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")


def uuid_from_kafka_string(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString(); ``ValueError`` saying why for anything else."""
    if len(text) > 24:
        raise ValueError(
            f"{text[:24]!r}... is too long to be a base64 UUID (more than 24 characters)"
        )
    if not _KAFKA_UUID.fullmatch(text):
        raise ValueError(
            f"{text!r} is not a base64 UUID: expected 22 URL-safe base64 characters [A-Za-z0-9_-]"
        )
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))
