"""Whether ``kraftlog produce`` and ``consume`` can use the partitions they name, asked
before they send or read anything.

A partition without a leader refuses every write and every read, and one with fewer in-sync
replicas than its topic's ``min.insync.replicas`` refuses acks=all writes
(``NOT_ENOUGH_REPLICAS``). All are retriable for the clients, which retry them until a
timeout and only then fail: a user who typed one line would wait two minutes (the producer's
delivery timeout) or 30 s (the consumer's request timeout, for the whole topic) to learn
that a broker is down. So the commands look first: when every partition a command would use
refuses it, it says why at once and what to do; when only some do, ``produce`` warns and
writes (records that land on a refusing partition fail after the delivery timeout, as the
producer decides) and ``consume`` warns and reads the others.

The look is a snapshot (a broker may come back a moment later, or go away): it decides only
what the command says, never what the brokers accept.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol

ADVICE = ("start the brokers that are down ('kraftlog cluster status' names them, 'kraftlog cluster up' starts them), "
          "or wait until their replicas are back in sync ('kraftlog topics describe')")


class PartitionState(Protocol):
    """What the check needs of a partition (``data_plane.client.admin.PartitionDescription``)."""

    leader: int
    isr: tuple[int, ...]


def refusals(partitions: Mapping[int, PartitionState], targets: Iterable[int], min_insync_replicas: int | None) -> dict[int, str]:
    """Why each target partition refuses the command now; partitions that serve it are left
    out. ``min_insync_replicas``: the topic's, for acks=all writes; None for reads and other
    acks (or when it is not known), which only a missing leader refuses."""
    refused = {}
    for number in targets:
        partition = partitions[number]
        if partition.leader < 0:
            refused[number] = "has no leader"
        elif min_insync_replicas is not None and len(partition.isr) < min_insync_replicas:
            isr = ",".join(str(b) for b in partition.isr)
            refused[number] = (f"has {len(partition.isr)} in-sync replica(s) (broker {isr}), fewer than "
                               f"min.insync.replicas={min_insync_replicas}, so acks=all writes are refused")
    return refused


def describe(topic: str, refused: Mapping[int, str]) -> str:
    """``events-0 has no leader; events-1 has 1 in-sync replica(s) ...``."""
    return "; ".join(f"{topic}-{number} {reason}" for number, reason in sorted(refused.items()))


def refusal_message(topic: str, refused: Mapping[int, str], done: str = "written") -> str:
    """The one line saying that nothing can be written (or read), and what to do about it."""
    lower_acks = ", or produce with --acks 1" if any("acks=all" in r for r in refused.values()) else ""
    return f"nothing can be {done} now: {describe(topic, refused)}: {ADVICE}{lower_acks}"


def unread_message(topic: str, refused: Mapping[int, str]) -> str:
    """The line saying that some partitions are left out of a read."""
    return f"warning: {describe(topic, refused)}: not read by this command (the other partitions are); {ADVICE}, then read again"


def warning_message(topic: str, refused: Mapping[int, str]) -> str:
    """The line saying that records sent to some partitions will fail."""
    return (f"warning: {describe(topic, refused)}: records sent there are retried for up to the delivery timeout "
            f"(2 minutes), then fail; {ADVICE}")
