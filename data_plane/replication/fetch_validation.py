"""Leader-epoch checks shared by produce, fetch, replica fetch and list offsets.

Rule (docs/architecture.md, "Replication"; KIP-320 for clients, KIP-101 for replicas): every
request to or about a partition leader carries the leader epoch its sender believes in.

- older than ours  -> FENCED_LEADER_EPOCH: the sender talks to a leader that has since been
  replaced (or is one); it must refresh metadata, and nothing is served or appended.
- newer than ours  -> UNKNOWN_LEADER_EPOCH: *we* are behind on metadata; the sender retries
  after a short backoff, by which time our metadata has caught up.
- -1               -> unchecked (clients that do not track epochs).

Only then does leadership matter: a broker that is not the leader answers
NOT_LEADER_OR_FOLLOWER (with a hint, added by the shell). Checking the epoch first matches
Kafka's `Partition.localLogWithEpochOrThrow`: a request from the past is fenced even when it
reaches a broker that is no longer leader, which tells the client its view is stale rather
than that it picked the wrong broker.
"""

from server_common.errors import ErrorCode

EPOCH_UNCHECKED = -1


def check_leader_epoch(request_leader_epoch: int, local_leader_epoch: int) -> ErrorCode:
    """Compare the epoch a request carries with the one this broker knows."""
    assert request_leader_epoch >= EPOCH_UNCHECKED, request_leader_epoch
    assert local_leader_epoch >= 0, local_leader_epoch
    if request_leader_epoch == EPOCH_UNCHECKED:
        return ErrorCode.NONE
    if request_leader_epoch < local_leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request_leader_epoch > local_leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE

