"""Building kio entities for any version served: one set of fields per handler, not one
handler per version. Pure."""

from __future__ import annotations

import datetime
import functools
import sys

from kio.index import load_response_schema

NO_THROTTLE = datetime.timedelta(0)


def build(entity_type: type | None, **fields):
    """An entity of ``entity_type`` from those of ``fields`` its version has; None for a
    nested type the version does not have (`sibling`), whose field ``build`` then drops."""
    if entity_type is None:
        return None
    names = entity_type.__dataclass_fields__
    return entity_type(**{name: value for name, value in fields.items() if name in names})


def sibling(entity_type: type, name: str) -> type | None:
    """The entity ``name`` of the same API version as ``entity_type`` (its nested types), or
    None when that version has none (Fetch's LeaderIdAndEpoch exists from v12 on)."""
    return getattr(sys.modules[entity_type.__module__], name, None)


def response_type(request) -> type:
    """The response entity of ``request``'s API version."""
    return _response_schema(type(request).__api_key__, type(request).__version__)


_response_schema = functools.cache(load_response_schema)  # kio resolves it by module path on every call


def version(request) -> int:
    return type(request).__version__


def millis(delta: datetime.timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def group_by_topic(entries) -> dict[str, list]:
    """(topic, entity) pairs as topic -> entities, in first-seen order (responses nest partitions under topics)."""
    by_topic: dict[str, list] = {}
    for topic, entity in entries:
        by_topic.setdefault(topic, []).append(entity)
    return by_topic
