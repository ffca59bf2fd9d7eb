"""kraftlog's Python client: Producer, Consumer and Admin over the brokers' gRPC service.

    from data_plane.client import Producer, Consumer, Admin

See producer.py, consumer.py and admin.py for what each does and why.

The names load on first use (PEP 562): a program that needs one part (the CLI's `topics
create` needs the admin side, a Spark task the consumer) does not pay for importing the rest
on every start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from data_plane.client.admin import Admin
    from data_plane.client.consumer import Consumer
    from data_plane.client.errors import KraftlogError
    from data_plane.client.producer import Producer
    from data_plane.client.records import ConsumerRecord, RecordMetadata
    from data_plane.client.transactions import ProducerFencedError
    from server_common.client_security import ClientSecurity

_HOMES = {
    "Admin": "data_plane.client.admin",
    "ClientSecurity": "server_common.client_security",
    "Consumer": "data_plane.client.consumer",
    "ConsumerRecord": "data_plane.client.records",
    "KraftlogError": "data_plane.client.errors",
    "Producer": "data_plane.client.producer",
    "ProducerFencedError": "data_plane.client.transactions",
    "RecordMetadata": "data_plane.client.records",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value
