"""Plans and reports as JSON objects: Kafka's camelCase keys, in the order a reader expects."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["camel_case", "json_fields"]


def camel_case(name: str) -> str:
    """``log_start_offset`` -> ``logStartOffset``, as Kafka's tools name JSON fields."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def json_fields(record: object, names: Iterable[str]) -> dict:
    """``{camelCase name: value}`` of ``record``'s attributes ``names``, in that order."""
    return {camel_case(name): getattr(record, name) for name in names}
