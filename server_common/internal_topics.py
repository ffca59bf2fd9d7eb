"""The internal topics and what may not be done to them.

A group's state and a transactional id's state each live in the partition of their internal
topic that the id hashes to over the topic's partition count (data_plane/groups/placement.py).
With another count every coordinator lookup lands on a partition without the state, so the
controller refuses to change the count or delete either topic, whoever asks (the CLI says the
same before asking); brokers create them on first use.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"

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
