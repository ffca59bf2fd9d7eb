"""Parsing and validating the `kraftlog` data source's options.

Spark hands options over lower-cased (a case-insensitive dict), so every name here is
matched case-insensitively; errors name the option as the user spelled it in the docs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_source.kafka_options import PREFIX as KAFKA_PREFIX
from spark_source.kafka_options import KafkaOptionError, client_config

EARLIEST = -2
LATEST = -1

# Canonical spelling of every option, by lower-cased name.
_SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        "bootstrap",
        "kraftlog.bootstrap.servers",
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingOffsets",
        "endingTimestamp",
        "endingOffsetsByTimestamp",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "maxRecordsPerPartition",
        "failOnDataLoss",
        "includeHeaders",
        "pollTimeoutMs",
        "kafkaConsumer.pollTimeoutMs",
    )
}
_SINK_OPTIONS = {
    name.lower(): name
    for name in (
        "bootstrap", "kraftlog.bootstrap.servers", "kafka.bootstrap.servers", "topic", "includeHeaders", "exactlyOnce",
        "transactionalIdPrefix",
    )
}
# Sink options that only the exactly-once (transactional) streaming sink uses.
_TRANSACTIONAL_ONLY = ("transactionalIdPrefix", "kafka.transaction.timeout.ms")
# How long a task's transaction may stay open, from its first partition until the driver
# commits the micro-batch: the producer's default (60 s) would abort slow micro-batches; the
# brokers refuse more than their --transaction-max-timeout-ms (default 15 min).
SINK_TRANSACTION_TIMEOUT_MS = 300_000
# A source's default kafka.isolation.level, as with Spark's Kafka source.
DEFAULT_ISOLATION_LEVEL = "read_committed"
# Options of Spark's Kafka source that kraftlog refuses, with the reason and what to do instead.
_REFUSED = {
    name.lower(): (name, why)
    for name, why in (
        ("groupIdPrefix", "the kraftlog source joins no consumer group (the checkpoint holds the offsets): remove it"),
        ("fetchOffset.numRetries", "offset lookups retry retriable errors by themselves for 30 s: remove it"),
        ("fetchOffset.retryIntervalMs", "offset lookups retry retriable errors by themselves for 30 s: remove it"),
    )
}
_BOOTSTRAP_NAMES = ("bootstrap", "kraftlog.bootstrap.servers", "kafka.bootstrap.servers")
_START_NAMES = ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets")
_END_NAMES = ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
# Options Spark itself may add to a sink's options.
_SPARK_INTERNAL = {"path", "checkpointlocation", "queryname"}


class OptionError(ValueError):
    """A bad or unknown option; the message names it."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    # "earliest" | "latest" | {(topic, partition): offset or -2/-1}
    starting_offsets: object = "earliest"
    # ms: start at each partition's first record stamped at or after it (instead of starting_offsets)
    starting_timestamp: int | None = None
    # the same with a timestamp per partition: {(topic, partition): ms}, every partition named
    starting_by_timestamp: dict | None = None
    # where a partition with no such record starts: "error" (fail the query) or "latest"
    timestamp_strategy: str = "error"
    ending_offsets: object = "latest"
    # batch: end before each partition's first record stamped at or after it (latest if none)
    ending_timestamp: int | None = None
    ending_by_timestamp: dict | None = None
    max_offsets_per_trigger: int | None = None
    # stream: wait for this many new records, but no longer than max_trigger_delay_ms
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    # Consumer keyword arguments from kafka.* options (isolation_level always set)
    consumer_config: dict = field(default_factory=lambda: {"isolation_level": DEFAULT_ISOLATION_LEVEL})

    @property
    def read_committed(self) -> bool:
        """Whether "latest" means the last stable offset (read_committed) or the high watermark."""
        return self.consumer_config.get("isolation_level", DEFAULT_ISOLATION_LEVEL) == "read_committed"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None = None
    include_headers: bool = False
    # Producer keyword arguments from kafka.* options
    producer_config: dict = field(default_factory=dict)
    # streaming only: one transaction per task and micro-batch, committed with the micro-batch
    exactly_once: bool = False
    # transactional ids are <prefix>-<task partition>; None: derived from the query's id
    transactional_id_prefix: str | None = None


def _check_unknown(options: Mapping[str, str], known: dict[str, str], kind: str) -> None:
    for key in options:
        low = key.lower()
        if low in _REFUSED and kind == "source":
            name, why = _REFUSED[low]
            raise OptionError(f"option {name!r} is not supported by format 'kraftlog': {why}")
        if low.startswith(KAFKA_PREFIX):
            continue  # checked by client_config
        if low not in known and low not in _SPARK_INTERNAL:
            raise OptionError(
                f"unknown {kind} option {key!r} for format 'kraftlog'; known options: {', '.join(sorted(set(known.values())))}"
            )


def _alias(opts: dict[str, str], names: tuple[str, ...]) -> str | None:
    """The value of whichever of the synonyms `names` is set; they must agree."""
    given = {name: str(opts[name.lower()]).strip() for name in names if name.lower() in opts}
    if len(set(given.values())) > 1:
        raise OptionError(f"options {', '.join(repr(n) for n in given)} mean the same and disagree: set only one")
    return next(iter(given.values()), None)


def _bootstrap(opts: dict[str, str]) -> str:
    value = _alias(opts, _BOOTSTRAP_NAMES)
    if not value:
        raise OptionError(
            "option 'bootstrap' (or 'kraftlog.bootstrap.servers' or 'kafka.bootstrap.servers') is required: host:port[,host:port...]"
        )
    return value


def _one_of(opts: dict[str, str], names: tuple[str, ...], what: str) -> None:
    given = [n for n in names if n.lower() in opts]
    if len(given) > 1:
        raise OptionError(f"options {' and '.join(repr(n) for n in given)} all say where to {what}: set only one")


def _duration_ms(opts: dict[str, str], low: str, name: str, default: int) -> int:
    """A duration as Spark writes them: 500ms, 30s, 15m, 1h, 1d, or plain milliseconds."""
    if low not in opts:
        return default
    raw = str(opts[low]).strip().lower()
    match = re.fullmatch(r"(\d+)\s*(ms|s|sec|m|min|h|d)?", raw)
    if not match:
        raise OptionError(f"option {name!r} must be a duration like 30s, 15m or 1h, not {opts[low]!r}")
    unit = {None: 1, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    return int(match.group(1)) * unit[match.group(2)]


def _bool(opts: dict[str, str], low: str, name: str, default: bool) -> bool:
    if low not in opts:
        return default
    value = str(opts[low]).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, not {opts[low]!r}")


def _int(opts: dict[str, str], low: str, name: str, minimum: int = 1) -> int | None:
    if low not in opts:
        return None
    wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    try:
        value = int(str(opts[low]).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be {wanted}, not {opts[low]!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be {wanted}, not {value}")
    return value


def _choice(opts: dict[str, str], low: str, name: str, choices: tuple[str, ...]) -> str:
    value = str(opts.get(low, choices[0])).strip().lower()
    if value not in choices:
        raise OptionError(f"option {name!r} must be one of {', '.join(choices)}, not {opts[low]!r}")
    return value


def _partition_json(raw: str, name: str, what: str, valid) -> dict[tuple[str, int], int]:
    """JSON {"topic": {"partition": number}} -> {(topic, partition): number}, each checked by `valid`."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as err:
        raise OptionError(f"option {name!r} must be JSON like {{\"t\":{{\"0\":23}}}}: {err}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name!r} JSON must be an object of topic -> {{partition: {what}}}")
    out: dict[tuple[str, int], int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map to {{partition: {what}}}")
        for p, number in parts.items():
            try:
                p_int, value = int(p), int(number)
            except (TypeError, ValueError):
                raise OptionError(f"option {name!r}: {topic}-{p} has a non-integer partition or {what} {number!r}") from None
            if not valid(value):
                raise OptionError(f"option {name!r}: {what} {value} for {topic}-{p} is not valid")
            out[(topic, p_int)] = value
    return out


def _offsets(opts: dict[str, str], low: str, name: str, default: str, allow_earliest: bool = True) -> object:
    raw = str(opts.get(low, default)).strip()
    if raw.lower() in ("earliest", "latest"):
        if raw.lower() == "earliest" and not allow_earliest:
            raise OptionError(f"option {name!r} cannot be 'earliest'")
        return raw.lower()
    if not raw.startswith("{"):
        raise OptionError(f"option {name!r} must be 'earliest', 'latest' or JSON like {{\"t\":{{\"0\":23}}}}, not {raw!r}")
    lowest = EARLIEST if allow_earliest else LATEST
    return _partition_json(raw, name, "offset", lambda off: off >= lowest)


def _timestamps(opts: dict[str, str], low: str, name: str) -> dict | None:
    if low not in opts:
        return None
    return _partition_json(str(opts[low]).strip(), name, "timestamp", lambda ts: ts >= 0)


def parse_source(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validates reader options (batch or streaming)."""
    _check_unknown(options, _SOURCE_OPTIONS, "source")
    opts = {k.lower(): v for k, v in options.items()}
    chosen = [n for n in ("subscribe", "subscribepattern", "assign") if opts.get(n)]
    if len(chosen) != 1:
        raise OptionError(
            "set exactly one of the options 'subscribe', 'subscribePattern' or 'assign'"
            + (f" (got {', '.join(_SOURCE_OPTIONS[c] for c in chosen)})" if chosen else "")
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    if "subscribe" in chosen:
        subscribe = tuple(sorted({t.strip() for t in opts["subscribe"].split(",") if t.strip()}))
        if not subscribe:
            raise OptionError("option 'subscribe' must name at least one topic")
    elif "subscribepattern" in chosen:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as err:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {err}") from None
    else:
        try:
            parsed = json.loads(opts["assign"])
            assign = tuple(sorted({(str(t), int(p)) for t, ps in parsed.items() for p in ps}))
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise OptionError('option \'assign\' must be JSON like {"topicA":[0,1],"topicB":[2]}') from None
        if not assign:
            raise OptionError("option 'assign' names no partitions")
    for name in _END_NAMES if streaming else ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if name.lower() in opts:
            raise OptionError(f"option {name!r} is for {'batch' if streaming else 'streaming'} queries only")
    _one_of(opts, _START_NAMES, "start")
    _one_of(opts, _END_NAMES, "end")
    poll_timeout = _alias(opts, ("pollTimeoutMs", "kafkaConsumer.pollTimeoutMs"))
    try:
        consumer_config = {"isolation_level": DEFAULT_ISOLATION_LEVEL, **client_config(options, "consumer")}
    except KafkaOptionError as err:
        raise OptionError(str(err)) from None
    return SourceOptions(
        bootstrap=_bootstrap(opts),
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting_offsets=_offsets(opts, "startingoffsets", "startingOffsets", "latest" if streaming else "earliest"),
        starting_timestamp=_int(opts, "startingtimestamp", "startingTimestamp", minimum=0),
        starting_by_timestamp=_timestamps(opts, "startingoffsetsbytimestamp", "startingOffsetsByTimestamp"),
        timestamp_strategy=_choice(
            opts, "startingoffsetsbytimestampstrategy", "startingOffsetsByTimestampStrategy", ("error", "latest")
        ),
        ending_offsets=_offsets(opts, "endingoffsets", "endingOffsets", "latest", allow_earliest=False),
        ending_timestamp=_int(opts, "endingtimestamp", "endingTimestamp", minimum=0),
        ending_by_timestamp=_timestamps(opts, "endingoffsetsbytimestamp", "endingOffsetsByTimestamp"),
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_duration_ms(opts, "maxtriggerdelay", "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        min_partitions=_int(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        poll_timeout_ms=_int({"polltimeoutms": poll_timeout} if poll_timeout else {}, "polltimeoutms", "pollTimeoutMs") or 120_000,
        consumer_config=consumer_config,
    )


def parse_sink(options: Mapping[str, str], streaming: bool) -> SinkOptions:
    """Validates writer options. A streaming write is exactly-once unless exactlyOnce=false;
    a batch write is at-least-once (a re-run job writes its rows again)."""
    _check_unknown(options, _SINK_OPTIONS, "sink")
    opts = {k.lower(): v for k, v in options.items()}
    topic = (opts.get("topic") or "").strip() or None
    try:
        producer_config = client_config(options, "producer")
    except KafkaOptionError as err:
        raise OptionError(str(err)) from None
    if not streaming and "exactlyonce" in opts:
        raise OptionError("option 'exactlyOnce' is for streaming writes only: a batch write is at-least-once; remove it")
    exactly_once = streaming and _bool(opts, "exactlyonce", "exactlyOnce", True)
    if not exactly_once:
        given = [name for name in _TRANSACTIONAL_ONLY if name.lower() in opts]
        if given:
            why = "exactlyOnce=false" if streaming else "a batch write"
            raise OptionError(f"option {given[0]!r} is for the exactly-once streaming sink, not {why}: remove it")
    else:
        if producer_config.get("acks", "all") != "all" or producer_config.get("enable_idempotence") is False:
            raise OptionError("the exactly-once sink writes transactions, which need kafka.acks=all and idempotence: "
                              "remove kafka.acks/kafka.enable.idempotence or set exactlyOnce=false")
        producer_config.setdefault("transaction_timeout_ms", SINK_TRANSACTION_TIMEOUT_MS)
    prefix = (opts.get("transactionalidprefix") or "").strip() or None
    return SinkOptions(
        _bootstrap(opts), topic, _bool(opts, "includeheaders", "includeHeaders", False), producer_config, exactly_once, prefix
    )
