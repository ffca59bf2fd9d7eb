"""Topic-level configuration keys: names, types, defaults, validation and documentation.

One table serves the controller (which validates configs on create and alter before they
are committed) and the broker (which builds each partition log's settings from it), so a
key cannot mean one thing to one side and another to the other. Names and defaults follow
Kafka's topic configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping


class InvalidConfigError(ValueError):
    """A config key or value the user supplied is not acceptable; the message says why and what to do."""


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: type
    default: object
    doc: str
    check: Callable[[object], str | None] = lambda v: None  # returns an error text or None


def _at_least(minimum: int) -> Callable[[object], str | None]:
    return lambda v: None if v >= minimum else f"must be >= {minimum}"  # type: ignore[operator]


def _one_of(*choices: str) -> Callable[[object], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _between(low: float, high: float) -> Callable[[object], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"  # type: ignore[operator]


DAY_MS = 24 * 3600 * 1000

TOPIC_CONFIG_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey("segment.bytes", int, 1 << 30, "Roll a new segment once the active one reaches this size.", _at_least(1024)),
        ConfigKey("segment.ms", int, 7 * DAY_MS, "Roll a new segment once the active one's first batch is this old.", _at_least(1)),
        ConfigKey("segment.index.bytes", int, 10 << 20, "Upper bound on each segment's offset and time index files.", _at_least(4096)),
        ConfigKey("index.interval.bytes", int, 4096, "Bytes of log between two entries of the sparse offset and time indexes.", _at_least(0)),
        ConfigKey("retention.ms", int, 7 * DAY_MS, "Delete whole segments whose newest record is older than this; -1 keeps forever.", _at_least(-1)),
        ConfigKey("retention.bytes", int, -1, "Delete the oldest whole segments while the partition is larger than this; -1 means no limit.", _at_least(-1)),
        ConfigKey("flush.messages", int, -1, "fsync the log after this many records; -1 leaves flushing to the OS (replication gives durability).", _at_least(-1)),
        ConfigKey("flush.ms", int, -1, "fsync the log when the oldest unflushed record is this old; -1 leaves flushing to the OS.", _at_least(-1)),
        ConfigKey("max.message.bytes", int, 1048588, "Largest record batch (after compression) the topic accepts.", _at_least(64)),
        ConfigKey("min.insync.replicas", int, 1, "acks=all writes fail with NOT_ENOUGH_REPLICAS while the ISR is smaller than this.", _at_least(1)),
        ConfigKey("unclean.leader.election.enable", bool, False, "Elect a replica outside the ISR when no in-sync replica is alive (may lose committed data)."),
        ConfigKey("message.timestamp.type", str, "CreateTime", "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's clock.", _one_of("CreateTime", "LogAppendTime")),
        ConfigKey("cleanup.policy", str, "delete", "How old data goes: delete (time/size retention), compact (keep the latest record of each key), or compact,delete (both).", _one_of("delete", "compact", "compact,delete", "delete,compact")),
        ConfigKey("delete.retention.ms", int, DAY_MS, "Compacted topics: how long a tombstone (null value) stays readable before the cleaner may remove it.", _at_least(0)),
        ConfigKey("min.compaction.lag.ms", int, 0, "Compacted topics: a record stays uncompacted at least this long after its segment's newest timestamp.", _at_least(0)),
        ConfigKey("min.cleanable.dirty.ratio", float, 0.5, "Compacted topics: clean a partition once the uncleaned part is at least this fraction of its closed segments.", _between(0.0, 1.0)),
        ConfigKey("compression.type", str, "producer", "Codec the broker uses for batches it encodes itself (simple-records path): producer/none keep them uncompressed, lz4 or zstd compresses.", _one_of("producer", "none", "lz4", "zstd")),
    ]
}


def check_key(key: str) -> ConfigKey:
    """The spec of ``key``; raise InvalidConfigError listing the known keys if there is none."""
    spec = TOPIC_CONFIG_KEYS.get(key)
    if spec is None:
        known = ", ".join(sorted(TOPIC_CONFIG_KEYS))
        raise InvalidConfigError(f"unknown topic config '{key}'; known keys: {known}")
    return spec


def parse_value(key: str, raw: str) -> object:
    """Parse and validate one ``key=value`` from a user; raise InvalidConfigError with guidance."""
    spec = check_key(key)
    value: object
    if spec.type is bool:
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise InvalidConfigError(f"config '{key}' must be true or false, got '{raw}'")
        value = lowered == "true"
    elif spec.type is int:
        try:
            value = int(raw)
        except ValueError:
            raise InvalidConfigError(f"config '{key}' must be an integer, got '{raw}'") from None
    elif spec.type is float:
        try:
            value = float(raw)
        except ValueError:
            raise InvalidConfigError(f"config '{key}' must be a number, got '{raw}'") from None
    else:
        value = raw
    problem = spec.check(value)
    if problem:
        raise InvalidConfigError(f"config '{key}' {problem}, got '{raw}'")
    return value


def validate(raw: Mapping[str, str]) -> dict[str, str]:
    """Validate user-supplied overrides; returns them normalised as strings (how they are stored)."""
    normalised: dict[str, str] = {}
    for key, raw_value in raw.items():
        value = parse_value(key, raw_value)
        normalised[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return normalised


def check_min_insync_replicas(overrides: Mapping[str, str], replication_factor: int) -> None:
    """Refuse a min.insync.replicas no ISR of ``replication_factor`` replicas can reach: every
    acks=all write would fail with NOT_ENOUGH_REPLICAS."""
    raw = overrides.get("min.insync.replicas")
    if raw is not None and int(raw) > replication_factor:
        raise InvalidConfigError(
            f"config 'min.insync.replicas' {raw} is larger than the replication factor {replication_factor}, so every acks=all write "
            f"would fail with NOT_ENOUGH_REPLICAS; set it to at most {replication_factor} (usually {max(1, replication_factor - 1)}) "
            f"or give the topic at least {raw} replicas (a new topic: --replication-factor; an existing one: reassign its partitions)"
        )


def effective(overrides: Mapping[str, str]) -> dict[str, object]:
    """Every key with its typed value: the override where one is set, else the default."""
    out: dict[str, object] = {name: spec.default for name, spec in TOPIC_CONFIG_KEYS.items()}
    for k, v in overrides.items():
        if k in TOPIC_CONFIG_KEYS:
            out[k] = parse_value(k, v)
    return out
