"""The broker's own APIs, registered on start (the coordinators register theirs separately)."""

from __future__ import annotations

from . import configs, delete_records, fetch, metadata, offsets, produce, topics
from .broker import Broker

__all__ = ["install"]


def install(broker: Broker) -> None:
    for module in (metadata, produce, fetch, offsets, topics, configs, delete_records):
        for api_key, handler in module.handlers(broker).items():
            broker.register(api_key, handler)
