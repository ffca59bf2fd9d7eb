"""The follower's decisions: its view of its own log and one leader answer in, one thing to do out.

A follower fetches from its leader with its log end as the fetch offset and the epoch of its
last record. Each partition of the leader's answer is one of: records (and the leader's HW),
a diverging epoch, OFFSET_OUT_OF_RANGE, or another error. `FollowerCore.decide` turns that
answer and a frozen view of the follower's log into one decision; the fetcher
(`data_plane/broker/replica_fetcher.py`) only carries it out and fetches again. No I/O, no
clock: the same code runs in the broker and in the replication transcripts and interleaving
tests (`tests/unit/replication/`).

The rules, in the order `decide` applies them:

1. **Stale answers are dropped.** An answer is applied only if the follower still follows the
   same leader epoch from the same log end it asked with, and its records start at that log
   end: leadership or the log moved while the answer was in flight (the follower half of
   leader-epoch fencing), or a pushed answer does not continue this log (the leader pushes
   what it appends to a follower asking at its log end, `data_plane/broker/fetch_session.py`).
2. **OFFSET_OUT_OF_RANGE** (Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate`): the
   leader could not place our fetch offset, or could not place our last epoch in its history.
   - The leader's log ends before ours: truncate to its end (the rule Kafka keeps for a
     leader that cannot answer by epoch; below our own log start this is a restart there).
   - The leader's log starts after ours ends (retention removed what we would fetch next):
     empty the log and start it again at the leader's log start.
   - Otherwise the leader holds our fetch offset but not our last epoch: Kafka keeps the log
     and fetches again from the same offset, which would get the same answer; here the
     partition backs off with a warning instead of spinning.
3. **Other errors back off**: briefly for metadata skew (a leader that has not applied the
   metadata that made it leader, or one we have not applied yet), longer otherwise.
4. **A diverging epoch truncates by KIP-279** (`divergence.truncation_for_diverging_epoch`),
   never to the HW. A truncation that would change nothing (same log end, same epoch
   history) would make the next fetch and answer the same: back off with a warning.
5. **Records are appended**, then the HW becomes the leader's HW capped by the new log end;
   an answer never lowers the HW (`partition_state.follower_high_watermark`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, NamedTuple, Sized, TypeVar

from data_plane.replication.divergence import DivergingEpoch, truncation_for_diverging_epoch
from data_plane.replication.epoch_history import NO_EPOCH, truncate_from_end
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import follower_high_watermark

# How long a partition waits before its next fetch after an answer that cannot be used.
PARTITION_BACKOFF_MS = 200
# Metadata skew is a matter of milliseconds, and waiting longer delays every failover.
METADATA_SKEW_BACKOFF_MS = 10
METADATA_SKEW = frozenset(
    {ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH}
)

# Records are opaque to the core: bytes in the broker, (epoch, value) lists in the model.
Records = TypeVar("Records", bound=Sized)


class FollowerLog(NamedTuple):
    """The follower's view of its replica when an answer arrives.

    ``leader_epoch`` is the leader epoch it follows now (from metadata); ``history`` the
    (epoch, start offset) entries of its log, oldest first. A named tuple, like the answer:
    both are built for every partition of every answer, so they must cost next to nothing.
    """

    log_start_offset: int
    log_end_offset: int
    history: tuple[tuple[int, int], ...]
    high_watermark: int
    leader_epoch: int

    @property
    def last_epoch(self) -> int:
        """The epoch a fetch names as its last fetched epoch (NO_EPOCH with no history).
        Indexed, not `.epoch`: the broker's epoch cache hands plain pairs."""
        return self.history[-1][0] if self.history else NO_EPOCH


class LeaderAnswer(NamedTuple, Generic[Records]):
    """One partition of the leader's answer, as plain values, with what the fetch asked.

    ``error`` is the leader's `ErrorCode` (NONE when records or a diverging epoch came back;
    the fetcher converts the wire's number); ``log_start_offset``/``log_end_offset`` are the leader's.
    """

    asked_leader_epoch: int
    asked_fetch_offset: int
    error: ErrorCode
    message: str
    records: Records
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging: DivergingEpoch | None = None
    records_base_offset: int = -1  # where ``records`` start (-1: no records)


@dataclass(frozen=True, slots=True)
class Ignore:
    """The answer no longer applies; the next round asks again."""

    reason: str


@dataclass(frozen=True, slots=True)
class Append(Generic[Records]):
    """Append ``records`` (offsets and epochs set by the leader), then set the HW with
    `high_watermark_after` from the new log end."""

    records: Records
    leader_high_watermark: int
    high_watermark: int  # the follower's HW before the append

    def high_watermark_after(self, log_end_offset: int) -> int:
        return follower_high_watermark(self.leader_high_watermark, log_end_offset, self.high_watermark)


@dataclass(frozen=True, slots=True)
class SetHighWatermark:
    """No records came back: only the HW may move."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class Truncate:
    """Keep records below ``offset`` and fetch again from the new end. ``complete`` is False
    when the next fetch may diverge again further back (KIP-279's second round)."""

    offset: int
    reason: str
    complete: bool = True


@dataclass(frozen=True, slots=True)
class RestartAt:
    """Empty the log and start it again at ``offset`` (everything we hold is before the
    leader's log start, or the cut falls below our own log start)."""

    offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class BackOff:
    """Fetch this partition again only after ``backoff_ms``. ``warn`` marks a state that will
    not clear by itself (an operator should look), as opposed to metadata catching up."""

    backoff_ms: int
    reason: str
    warn: bool


FollowerDecision = Ignore | Append | SetHighWatermark | Truncate | RestartAt | BackOff

StaleAnswerRule = Callable[[FollowerLog, LeaderAnswer], str | None]


def drop_stale_answers(log: FollowerLog, answer: LeaderAnswer) -> str | None:
    """Why the answer is stale (leader epoch or log end moved since the fetch), or None."""
    if answer.asked_leader_epoch != log.leader_epoch:
        return f"asked in leader epoch {answer.asked_leader_epoch}, now following {log.leader_epoch}"
    if answer.asked_fetch_offset != log.log_end_offset:
        return f"asked from offset {answer.asked_fetch_offset}, the log now ends at {log.log_end_offset}"
    if answer.records_base_offset >= 0 and answer.records_base_offset != log.log_end_offset:
        return f"records start at offset {answer.records_base_offset}, the log ends at {log.log_end_offset}"
    return None


def apply_stale_answers(log: FollowerLog, answer: LeaderAnswer) -> str | None:
    """The `--unsafe-testing skip-epoch-fencing` rule: every answer applies."""
    return None


@dataclass(frozen=True, slots=True)
class FollowerCore:
    """The follower's rules. Built once per broker; ``stale_answer`` is the one rule a
    negative control replaces (`apply_stale_answers`)."""

    stale_answer: StaleAnswerRule = drop_stale_answers

    def decide(self, log: FollowerLog, answer: LeaderAnswer) -> FollowerDecision:
        assert 0 <= log.log_start_offset <= log.log_end_offset, log
        assert 0 <= log.high_watermark <= log.log_end_offset, log
        assert not log.history or log.history[-1][1] <= log.log_end_offset, log
        assert 0 <= answer.log_start_offset <= answer.log_end_offset or answer.error != ErrorCode.NONE, answer
        stale = self.stale_answer(log, answer)
        if stale is not None:
            return Ignore(stale)
        if answer.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            return out_of_range(log, answer)
        if answer.error != ErrorCode.NONE:
            backoff_ms = METADATA_SKEW_BACKOFF_MS if answer.error in METADATA_SKEW else PARTITION_BACKOFF_MS
            return BackOff(backoff_ms, f"leader refused the fetch: {answer.error.name} {answer.message}".rstrip(), warn=False)
        if answer.diverging is not None:
            return diverged(log, answer.diverging)
        if len(answer.records):
            return Append(answer.records, answer.high_watermark, log.high_watermark)
        return SetHighWatermark(follower_high_watermark(answer.high_watermark, log.log_end_offset, log.high_watermark))


def diverged(log: FollowerLog, diverging: DivergingEpoch) -> Truncate | RestartAt | BackOff:
    """KIP-279's truncation, or a back-off when it would leave the log exactly as it is."""
    truncation = truncation_for_diverging_epoch(diverging, log.history, log.log_end_offset)
    reason = f"diverged from the leader at epoch {diverging.epoch} (ends at {diverging.end_offset} there)"
    if truncation.offset == log.log_end_offset and truncate_from_end(log.history, truncation.offset) == log.history:
        return BackOff(PARTITION_BACKOFF_MS, f"{reason}; truncating to {truncation.offset} changes nothing", warn=True)
    return cut_to(log, truncation.offset, reason, truncation.complete)


def out_of_range(log: FollowerLog, answer: LeaderAnswer) -> Truncate | RestartAt | BackOff:
    """Kafka's answer to OFFSET_OUT_OF_RANGE on a follower (see the module docstring)."""
    if answer.log_end_offset < log.log_end_offset:
        return cut_to(log, answer.log_end_offset, f"ahead of the leader's log end {answer.log_end_offset}", True)
    if answer.log_start_offset > log.log_end_offset:
        return RestartAt(answer.log_start_offset, f"the leader's log starts at {answer.log_start_offset}, after ours ends")
    return BackOff(
        PARTITION_BACKOFF_MS,
        f"the leader [{answer.log_start_offset}, {answer.log_end_offset}) holds offset {log.log_end_offset} but cannot "
        f"place last epoch {log.last_epoch}: {answer.message}",
        warn=True,
    )


def cut_to(log: FollowerLog, offset: int, reason: str, complete: bool) -> Truncate | RestartAt:
    """Truncate to ``offset``, or restart there when it falls before our log start."""
    assert 0 <= offset <= log.log_end_offset, (offset, log)
    if offset < log.log_start_offset:
        return RestartAt(offset, f"{reason}; {offset} is before our log start {log.log_start_offset}")
    return Truncate(offset, reason, complete)


# ---------------------------------------------------------------------- the fetch session

Key = TypeVar("Key")


class FetchPosition(NamedTuple):
    """What a fetch tells the leader about one partition: where the follower's log ends, the
    epoch of its last record, the leader epoch it follows and (``--durability fsync``; -1
    otherwise) how far its log is fsynced: a change of any of them is news to the leader."""

    fetch_offset: int
    last_fetched_epoch: int
    leader_epoch: int
    durable_offset: int = -1


class SessionRequest(NamedTuple, Generic[Key]):
    """One round's request: ``full`` lists every partition of the session (the leader forgets
    any other), otherwise only those ``partitions`` the leader must hear about."""

    full: bool
    partitions: tuple[tuple[Key, FetchPosition], ...]


def asks_again(decision: FollowerDecision) -> bool:
    """Whether the next round must name the partition although its position may not have
    moved: every answer but a clean one (records appended, or only the HW) means the leader's
    idea of this partition may not match ours, and a leader only serves what it hears about or
    what changes on its side."""
    return not isinstance(decision, (Append, SetHighWatermark))


class FollowerSession(Generic[Key]):
    """The follower's half of one ReplicaFetch stream as a fetch session (Kafka's KIP-227):
    what the leader holds for each partition, and which partitions the next round names.

    The stream opens with a full list; afterwards a round names only the partitions whose
    position (log end, last epoch, leader epoch) changed, those whose last answer was not a
    clean one (`asks_again`), and those this broker is not in the ISR of (by its metadata): the
    leader re-derives an ISR expansion only from a fetch, so a caught-up follower outside the
    ISR keeps asking every round, as before sessions. Any other partition is left to the
    leader, which keeps the position and answers when something changes on its side. A
    partition leaving the session (no longer fetchable from this leader) makes the next round
    a full list again. Pure: the fetcher (`replica_fetcher.py`) examines its replicas and
    builds the request; this class decides what it says.
    """

    def __init__(self) -> None:
        self._held: dict[Key, FetchPosition] | None = None  # None: a new stream, nothing sent yet
        self._ask_again: set[Key] = set()
        self._out_of_isr: set[Key] = set()
        self._answered: set[Key] = set()

    @property
    def is_new(self) -> bool:
        return self._held is None

    def held(self, key: Key) -> FetchPosition | None:
        """The position the leader holds for ``key`` (what its answers are relative to)."""
        return self._held.get(key) if self._held is not None else None

    def holds_any(self) -> bool:
        return bool(self._held)

    def to_examine(self) -> set[Key]:
        """The partitions a round must look at when it does not look at all of them: the ones
        answered since the last round (their logs moved) and the ones named every round."""
        return self._answered | self._ask_again | self._out_of_isr

    def leaves(self, key: Key) -> bool:
        """Whether ``key`` (examined and found not fetchable from this leader) is one the leader
        holds: then the next round must be a full one."""
        return self._held is not None and key in self._held

    def plan(self, positions: dict[Key, FetchPosition], waiting: frozenset[Key] | set[Key],
             out_of_isr: set[Key], complete: bool) -> SessionRequest[Key]:
        """The next request. ``positions``: each examined partition that can be fetched from
        this leader now; ``waiting``: those of them backing off (held, not named); ``out_of_isr``:
        those this broker is not in the ISR of; ``complete``: every partition of the session
        was examined (required for a full list)."""
        assert waiting <= positions.keys() and out_of_isr <= positions.keys(), (waiting, out_of_isr)
        examined = positions.keys()
        self._out_of_isr = (self._out_of_isr - examined) | out_of_isr
        self._answered.clear()
        askable = {k: p for k, p in positions.items() if k not in waiting}
        if self._held is None or (complete and not self._held.keys() <= examined):
            assert complete, "a full list needs every partition examined"
            self._held = askable
            self._ask_again.clear()
            return SessionRequest(True, tuple(sorted(askable.items())))
        named = {k: p for k, p in askable.items() if self._held.get(k) != p or k in self._ask_again or k in self._out_of_isr}
        self._held.update(named)
        self._ask_again -= named.keys()
        return SessionRequest(False, tuple(sorted(named.items())))

    def answered(self, key: Key, decision: FollowerDecision | None) -> None:
        """The leader answered ``key`` and the fetcher acted on ``decision`` (None: it could not
        carry the decision out, or the partition is no longer fetchable here)."""
        self._answered.add(key)
        if decision is None or asks_again(decision):
            self._ask_again.add(key)
