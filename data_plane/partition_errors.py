"""The broker's one error type, from the cores to the wire: a code of ``proto/common.proto``'s
ErrorCode (``server_common.errors.ErrorCode``, same names and numbers) and a message
that tells the client what to do next. ``to_wire``/``from_wire`` are the only conversions to
and from protobuf response fields.

The broker never raises these through gRPC; they become per-partition error fields. Only a
malformed request (one no correct client would send) becomes a gRPC INVALID_ARGUMENT.
"""

from __future__ import annotations

from dataclasses import dataclass

from server_common.errors import ErrorCode
from data_plane.replication.fetch_validation import check_leader_epoch as epoch_rule


@dataclass(frozen=True)
class PartitionError(Exception):
    """A per-partition failure: ``code`` says what happened, ``message`` what to do next."""

    code: ErrorCode
    message: str

    def __post_init__(self) -> None:
        assert isinstance(self.code, ErrorCode), self.code
        assert self.code == ErrorCode.NONE or self.message, f"{self.code.name} needs a message saying what to do next"

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


NO_ERROR = PartitionError(ErrorCode.NONE, "")


def to_wire(error: PartitionError) -> dict[str, int | str]:
    """The response fields every answer with an error carries (``error_code``, ``error_message``)."""
    return {"error_code": int(error.code), "error_message": error.message}


def from_wire(code: int, message: str) -> PartitionError:
    """An answer's error fields; a number this version does not know is an unknown server error."""
    try:
        return PartitionError(ErrorCode(code), message or ErrorCode(code).name)
    except ValueError:
        return PartitionError(ErrorCode.UNKNOWN_SERVER_ERROR, f"error code {code} unknown to this broker: {message}")


class MalformedRequest(ValueError):
    """The request breaks the protocol; answered with INVALID_ARGUMENT and this message."""


def negative_partition(topic: str, partition: int) -> str | None:
    """Why a partition number cannot name a partition (None: it can). A negative one is a
    bug in the request, not a partition that may appear: answered as invalid, never as
    UNKNOWN_TOPIC_OR_PARTITION, which clients retry until their deadline."""
    if partition >= 0:
        return None
    return f"{topic}-{partition}: partition numbers are >= 0 (a topic of N partitions has 0..N-1, as Metadata lists): fix the request"


def not_leader(topic: str, partition: int, leader: int) -> PartitionError:
    where = f"broker {leader}" if leader >= 0 else "no broker (the partition is offline)"
    return PartitionError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"this broker does not lead {topic}-{partition}; its leader is {where}: refresh metadata and retry there",
    )


def unknown_partition(topic: str, partition: int) -> PartitionError:
    return PartitionError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        f"{topic}-{partition} does not exist on this cluster; create the topic first (kraftlog topics create {topic}) "
        "or check the name and partition count (kraftlog topics list)",
    )


def check_leader_epoch(topic: str, partition: int, requested: int, current: int) -> None:
    """Fence requests that name another leader epoch (the rule lives in the replication core)."""
    code = epoch_rule(requested, current)
    if code == ErrorCode.FENCED_LEADER_EPOCH:
        raise PartitionError(code, f"leader epoch {requested} for {topic}-{partition} is stale (current {current}): refresh metadata and retry")
    if code == ErrorCode.UNKNOWN_LEADER_EPOCH:
        raise PartitionError(code, f"leader epoch {requested} for {topic}-{partition} is newer than this broker knows ({current}): retry shortly")
