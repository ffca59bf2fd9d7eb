"""`kafka.`-prefixed options of Spark's Kafka source and sink, mapped onto kraftlog's client.

Spark hands every `kafka.*` option to the Kafka consumer or producer it creates. A job moved
from `format("kafka")` keeps the ones kraftlog's Consumer/Producer have an equivalent for
(the value is checked and passed on under kraftlog's name); every other one is refused
with the reason and what to set instead, so no setting is silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "kafka."

# kafka.<name> -> (kraftlog keyword argument, kind) for the Consumer a task reads with.
CONSUMER = {
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "client.id": ("client_id", str),
    "isolation.level": ("isolation_level", "isolation"),
}
# ... and for the Producer a writing task uses.
PRODUCER = {
    "acks": ("acks", "acks"),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_size", int),
    "compression.type": ("compression", str),
    "retries": ("retries", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", int),
    "max.in.flight.requests.per.connection": ("max_in_flight_per_broker", int),
    "buffer.memory": ("buffer_memory", int),
    "max.block.ms": ("max_block_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "max.request.size": ("max_request_size", int),
    "enable.idempotence": ("enable_idempotence", bool),
    "client.id": ("client_id", str),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
}

# kafka.<name> (or a prefix ending in ".") -> why it is refused and what to do instead.
_REFUSED = {
    "group.id": "the kraftlog source joins no consumer group and commits no offsets (the checkpoint holds them): remove it",
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "the source commits no offsets (the checkpoint holds them): remove it",
    "key.deserializer": "keys and values are always binary: CAST them in the query",
    "value.deserializer": "keys and values are always binary: CAST them in the query",
    "key.serializer": "write binary or string key/value columns: CAST them in the query",
    "value.serializer": "write binary or string key/value columns: CAST them in the query",
    "interceptor.classes": "kraftlog's clients have no interceptors: remove it",
    "partitioner.class": "write a 'partition' column to choose partitions",
    "transactional.id": "the exactly-once sink gives each task the transactional id <transactionalIdPrefix>-<task partition>: "
    "set the sink option 'transactionalIdPrefix' instead",
    "security.protocol": "kraftlog brokers speak plaintext gRPC and have no authentication to configure: remove it",
    "sasl.": "kraftlog brokers speak plaintext gRPC and have no authentication to configure: remove it",
    "ssl.": "kraftlog brokers speak plaintext gRPC and have no authentication to configure: remove it",
}


class KafkaOptionError(ValueError):
    """A `kafka.*` option kraftlog cannot honour; the message names it and what to do."""


def _refusal(name: str) -> str | None:
    for key, why in _REFUSED.items():
        if name == key or (key.endswith(".") and name.startswith(key)):
            return why
    return None


def _convert(option: str, raw: str, kind) -> object:
    value = str(raw).strip()
    if kind is str:
        if not value:
            raise KafkaOptionError(f"option {option!r} must not be empty")
        return value
    if kind is bool:
        if value.lower() not in ("true", "false"):
            raise KafkaOptionError(f"option {option!r} must be true or false, not {raw!r}")
        return value.lower() == "true"
    if kind == "isolation":
        if value.lower() not in ("read_committed", "read_uncommitted"):
            raise KafkaOptionError(f"option {option!r} must be read_committed or read_uncommitted, not {raw!r}")
        return value.lower()
    if kind == "acks":
        if value.lower() == "all" or value == "-1":
            return "all"
        if value in ("0", "1"):
            return int(value)
        raise KafkaOptionError(f"option {option!r} must be all, -1, 0 or 1, not {raw!r}")
    try:
        number = int(value)
    except ValueError:
        raise KafkaOptionError(f"option {option!r} must be an integer, not {raw!r}") from None
    if number < 0:
        raise KafkaOptionError(f"option {option!r} must be >= 0, not {number}")
    return number


def client_config(options: Mapping[str, str], role: str) -> dict[str, object]:
    """kraftlog client keyword arguments for the `kafka.*` options in `options` (lower-cased
    names), for role "consumer" or "producer"; `kafka.bootstrap.servers` is left to the
    caller (it is the `bootstrap` option)."""
    table = CONSUMER if role == "consumer" else PRODUCER
    config: dict[str, object] = {}
    for key, raw in options.items():
        low = key.lower()
        if not low.startswith(PREFIX) or low == PREFIX + "bootstrap.servers":
            continue
        name = low[len(PREFIX) :]
        if name in table:
            argument, kind = table[name]
            config[argument] = _convert(key, raw, kind)
            continue
        why = _refusal(name)
        if why is None:
            supported = ", ".join(PREFIX + n for n in sorted(table))
            why = f"kraftlog's {role} has no such setting; the {role} settings it maps are: {supported}"
        raise KafkaOptionError(f"option {key!r} is not supported by format 'kraftlog': {why}")
    return config
