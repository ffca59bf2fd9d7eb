"""Parsing and validating the `kraftlog` data source's options.

Spark hands options over lower-cased (a case-insensitive dict), so every name here is
matched case-insensitively; errors name the option as the user spelled it in the docs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

EARLIEST = -2
LATEST = -1

# Canonical spelling of every option, by lower-cased name.
_SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        "bootstrap",
        "kraftlog.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingOffsets",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "failOnDataLoss",
        "includeHeaders",
        "pollTimeoutMs",
    )
}
_SINK_OPTIONS = {name.lower(): name for name in ("bootstrap", "kraftlog.bootstrap.servers", "topic", "includeHeaders")}
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
    # where a partition with no such record starts: "error" (fail the query) or "latest"
    timestamp_strategy: str = "error"
    ending_offsets: object = "latest"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None = None
    include_headers: bool = False


def _check_unknown(options: Mapping[str, str], known: dict[str, str], kind: str) -> None:
    for key in options:
        low = key.lower()
        if low not in known and low not in _SPARK_INTERNAL:
            raise OptionError(
                f"unknown {kind} option {key!r} for format 'kraftlog'; known options: {', '.join(sorted(set(known.values())))}"
            )


def _bootstrap(opts: dict[str, str]) -> str:
    a, b = opts.get("bootstrap"), opts.get("kraftlog.bootstrap.servers")
    if a and b and a != b:
        raise OptionError("options 'bootstrap' and 'kraftlog.bootstrap.servers' disagree: set only one")
    value = (a or b or "").strip()
    if not value:
        raise OptionError("option 'bootstrap' (or 'kraftlog.bootstrap.servers') is required: host:port[,host:port...]")
    return value


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


def _offsets(opts: dict[str, str], low: str, name: str, default: str, allow_earliest: bool = True) -> object:
    raw = str(opts.get(low, default)).strip()
    if raw.lower() in ("earliest", "latest"):
        if raw.lower() == "earliest" and not allow_earliest:
            raise OptionError(f"option {name!r} cannot be 'earliest'")
        return raw.lower()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as err:
        raise OptionError(f"option {name!r} must be 'earliest', 'latest' or JSON like {{\"t\":{{\"0\":23}}}}: {err}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name!r} JSON must be an object of topic -> {{partition: offset}}")
    out: dict[tuple[str, int], int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map to {{partition: offset}}")
        for p, off in parts.items():
            try:
                p_int, off_int = int(p), int(off)
            except (TypeError, ValueError):
                raise OptionError(f"option {name!r}: {topic}-{p} has a non-integer partition or offset {off!r}") from None
            if off_int < -2 or (off_int == EARLIEST and not allow_earliest):
                raise OptionError(f"option {name!r}: offset {off_int} for {topic}-{p} is not valid")
            out[(topic, p_int)] = off_int
    return out


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
    if streaming and "endingoffsets" in opts:
        raise OptionError("option 'endingOffsets' is for batch queries only")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries only")
    if "startingtimestamp" in opts and "startingoffsets" in opts:
        raise OptionError("options 'startingTimestamp' and 'startingOffsets' both say where to start: set only one")
    poll_timeout = _int(opts, "polltimeoutms", "pollTimeoutMs")
    return SourceOptions(
        bootstrap=_bootstrap(opts),
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting_offsets=_offsets(opts, "startingoffsets", "startingOffsets", "latest" if streaming else "earliest"),
        starting_timestamp=_int(opts, "startingtimestamp", "startingTimestamp", minimum=0),
        timestamp_strategy=_choice(
            opts, "startingoffsetsbytimestampstrategy", "startingOffsetsByTimestampStrategy", ("error", "latest")
        ),
        ending_offsets=_offsets(opts, "endingoffsets", "endingOffsets", "latest", allow_earliest=False),
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_partitions=_int(opts, "minpartitions", "minPartitions"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        poll_timeout_ms=poll_timeout or 120_000,
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    """Validates writer options."""
    _check_unknown(options, _SINK_OPTIONS, "sink")
    opts = {k.lower(): v for k, v in options.items()}
    topic = (opts.get("topic") or "").strip() or None
    return SinkOptions(_bootstrap(opts), topic, _bool(opts, "includeheaders", "includeHeaders", False))
