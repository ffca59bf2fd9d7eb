"""Offsets as Spark stores them: JSON `{topic: {partition: offset}}` in canonical order.

Spark compares offsets as JSON text, so the same offsets must always serialize the same
way: topics and partitions are emitted in sorted order of their string form (which is
also what `json.dumps(sort_keys=True)` would produce, so either serialization agrees).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

TopicPartition = tuple[str, int]


def encode(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} -> canonical nested dict."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        nested.setdefault(str(topic), {})[str(int(partition))] = int(offset)
    return {t: {p: nested[t][p] for p in sorted(nested[t])} for t in sorted(nested)}


def decode(offset: Mapping | str | None) -> dict[TopicPartition, int]:
    """Canonical nested dict (or its JSON text) -> {(topic, partition): offset}."""
    if offset is None:
        return {}
    if isinstance(offset, str):
        offset = json.loads(offset)
    return {(str(t), int(p)): int(o) for t, parts in offset.items() for p, o in parts.items()}


def to_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(encode(offsets), separators=(",", ":"))
