"""The internal topics and what may not be done to them.

A group's state and a transactional id's state each live in the partition of their internal
topic that the id hashes to over the topic's partition count (``offsets_partition``: the
brokers' coordinators and the clients compute it alike).
With another count every coordinator lookup lands on a partition without the state, so the
controller refuses to change the count or delete either topic, whoever asks (the CLI says the
same before asking); brokers create them on first use.
"""

from __future__ import annotations

import zlib

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"



def offsets_partition(key: str, partitions: int) -> int:
    """The partition of a coordinator key (group id or transactional id) among ``partitions``.
    The hash is CRC-32 (IEEE, as zlib and every language's standard library compute it) of
    the key's UTF-8 bytes, so a client in any language can compute it; Python's ``hash`` is
    randomized per process and would not do."""
    assert partitions > 0, partitions
    return zlib.crc32(key.encode("utf-8")) % partitions


# What each holds, and how to remove one entry of it instead.
_HOLDS = {
    OFFSETS_TOPIC: ("every consumer group's state and committed offsets", " (one group goes with 'kraftlog groups delete GROUP')"),
    TRANSACTION_STATE_TOPIC: ("every transactional id's state", ""),
}


def deletion_refusal(topic: str) -> str | None:
    """Why ``topic`` cannot be deleted, or None when it is not internal."""
    if topic not in _HOLDS:
        return None
    holds, instead = _HOLDS[topic]
    return f"{topic} is an internal topic and cannot be deleted: it holds {holds}{instead}"


def repartition_refusal(topic: str) -> str | None:
    """Why ``topic``'s partition count cannot change, or None when it is not internal."""
    if topic not in _HOLDS:
        return None
    return (f"the partition count of the internal topic {topic} cannot change: it holds {_HOLDS[topic][0]}, "
            "each in the partition its id hashes to over that count, so with another count they could no longer be found")
