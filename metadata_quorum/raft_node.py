"""The metadata log on Raft (pysyncobj): one replicated method applies an entry (a list of
encoded records) to the image, all or nothing.

pysyncobj runs networking, timers, applies and callbacks on one background thread. This
module keeps that thread's work short: apply, append to a bounded ring of recent records,
and hand results to the asyncio loop with ``call_soon_threadsafe``. Preconditions are
checked where the entry is applied (decisions are made on a possibly stale local image), so
a rejected entry changes nothing and its proposer gets the error as the result.

The state machine is a ``SyncObjConsumer`` so that pysyncobj's full dump (log compaction)
holds exactly the image, encoded as snapshot records (protobuf, not pickled classes), and
restoring it cannot race with construction. Both ``journalFile`` and ``fullDumpFile`` are
set (a journal alone comes back empty after a log compaction: docs/operations.md, Controller
quorum security), and the raft port binds only to its own address.
"""

from __future__ import annotations

import asyncio
import collections
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import structlog
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.journal import FileJournal
from pysyncobj.monotonic import monotonic as raft_clock
from pysyncobj.node import TCPNode
from pysyncobj.transport import TCPTransport

from metadata_quorum.controller_directory import OBSERVER, REMOVED, VOTER, ControllerDirectory, EncodedEntry
from metadata_quorum.endpoints import Voter
from metadata_quorum.loopback_peers import admitting_transport
from metadata_quorum.raft_dump import DumpFile, check_readable
from metadata_quorum.raft_journal import DurableJournal, journals_created_as, syncing_transport
from metadata_quorum.delta import apply_all, image_from_snapshot
from metadata_quorum.image import MetadataImage, RecordRejected
from metadata_quorum.snapshot_records import SnapshotEncoder
from metadata_quorum.records import Record, decode, encode
from server_common.errors import ErrorCode
from server_common.nudge import Nudge

log = structlog.get_logger("controller")

RING_RECORDS_MAX = 20_000
# pysyncobj checks these on its one thread, which also applies entries and writes dumps: a
# follower that spent longer than the timeout applying (or waiting for the GIL on a busy
# machine) starts an election before it reads the leader's pending heartbeat. Kafka's
# controller.quorum.election.timeout.ms is 1 s; entries are kept small (topic_admin) so that
# one apply takes a small fraction of the minimum.
RAFT_ELECTION_TIMEOUT_MIN_S = 0.5
RAFT_ELECTION_TIMEOUT_MAX_S = 1.0
# When the leader's Raft connection closes (its process died: the kernel closes its sockets),
# one follower need not wait out the election timeout: the one with the lowest id among the
# followers still connected to each other starts an election at once. Only one: two candidates
# at once split the vote and cost a full timeout, and under load a candidate's vote request
# can take hundreds of ms (it fsyncs its term and vote first), longer than any stagger that
# would keep failover short. The others keep their timeouts, which a granted vote restarts.
PROPOSAL_TIMEOUT_S = 5.0
# pysyncobj's default (appendEntriesUseBatch) holds a proposal until the thread's next tick
# (up to autoTickPeriod, 5 ms) and its entry until the next heartbeat round (appendEntriesPeriod,
# 10 ms), and tells the followers of a commit only at the round after that: a fence and its
# election took 15-25 ms to reach the brokers, most of a failover. Without it, a proposal wakes
# the Raft thread (pysyncobj's pipe notifier), its entry goes out at once, and the leader sends
# the new commit index as soon as it has applied an entry, so a follower controller (which
# brokers may stream from) applies one round trip later. Nothing is lost to batching: the
# active controller proposes one entry at a time (its write lock), so an append round carried
# one entry (and one journal fsync) before as well.
# How long pysyncobj's thread sleeps in poll when nothing happens (autoTickPeriod), and how
# often the leader sends an empty append round as its heartbeat (appendEntriesPeriod). Neither
# is on a commit's path: a proposal wakes the thread (the pipe notifier, above), an arriving
# message ends the poll, and the next tick at once works out the commit and sends it. They set
# only what an idle quorum costs: at 5 ms and 10 ms (pysyncobj's defaults are 50 ms and 100 ms)
# three idle controllers used 10-12% of a core on two cores, every tick a pass of pysyncobj's
# Python and every heartbeat a message and its answer; at 50 ms and 50 ms, about 5%
# (docs/performance.md). Ten heartbeats still fit in the shortest election timeout.
RAFT_TICK_S = 0.05
RAFT_HEARTBEAT_S = 0.05
SNAPSHOT_WARM_INTERVAL_S = 1.0  # how often what changed is encoded ahead of the next compaction (snapshot_records.py)


class RoutedNode(TCPNode):
    """A Raft peer known by its quorum address but connected to through another one.

    pysyncobj names every peer by its address (the node announces it on connect and the
    other side looks it up), and dials ``node.ip``/``node.port``; so a peer keeps its
    identity while the connection goes through, say, a Toxiproxy proxy on that link. Of
    each pair only the node with the larger address dials, so one proxy carries the pair's
    Raft traffic both ways."""

    def __init__(self, address: str, via: tuple[str, int]) -> None:
        super().__init__(address)
        self._via = via

    @property
    def ip(self) -> str:
        return globalDnsResolver().resolve(self._via[0])

    @property
    def port(self) -> int:
        return self._via[1]


@dataclass(frozen=True)
class EntryResult:
    """What became of a proposed entry: error NONE and the offset of its first record, or a
    rejection (nothing applied). REQUEST_TIMED_OUT means the outcome is unknown."""

    error_code: int
    error_message: str
    first_offset: int = -1


class MetadataStateMachine(SyncObjConsumer):
    """The image, changed only by ``apply_entry``. Attributes set before
    ``SyncObjConsumer.__init__`` are plumbing; ``capture_dump``/``load_dump`` carry the image
    through pysyncobj's full dump (``raft_dump.py``)."""

    def __init__(self, cluster_id: str, on_applied: Callable[[MetadataImage, Sequence[Record], bool], None],
                 on_directory: Callable[[ControllerDirectory | None, frozenset[int]], None]) -> None:
        self._cluster_id = cluster_id
        self._on_applied = on_applied
        self._on_directory = on_directory
        self._snapshot = SnapshotEncoder()  # the encoded topics the next compaction reuses
        super().__init__()
        self.image = MetadataImage.empty(cluster_id)
        self.directory: ControllerDirectory | None = None  # None: the --quorum voters, no membership change yet
        self.caught_up_observers: frozenset[int] = frozenset()  # observers that announced they caught up since registered

    # Replicated methods get ids in name order: new ones sort after apply_entry, so journals
    # written before they existed replay unchanged.
    @replicated
    def set_controllers(self, entries: list[EncodedEntry]) -> None:
        """Replace the controller directory (``controller_directory.py``)."""
        self.directory = ControllerDirectory.decode(entries)
        self.caught_up_observers = self.caught_up_observers & {v.node_id for v in self.directory.observers}
        self._on_directory(self.directory, self.caught_up_observers)

    @replicated
    def set_observer_caught_up(self, node_id: int) -> None:
        """An observer says it has caught up (proposed by the observer itself, through the leader)."""
        if self.directory is not None and self.directory.role_of(node_id) == OBSERVER:
            self.caught_up_observers = self.caught_up_observers | {node_id}
            self._on_directory(self.directory, self.caught_up_observers)

    @replicated
    def apply_entry(self, encoded: list[bytes]) -> tuple[int, str, int]:
        """Apply one entry, replayed into one delta (all or nothing); returns (error code, message, first offset)."""
        try:
            records = [decode(data) for data in encoded]
            new = apply_all(self.image, records)
        except RecordRejected as rejected:
            return rejected.code, rejected.message, -1
        except ValueError as bad:  # same bytes on every node: rejected the same everywhere
            log.error("undecodable metadata entry rejected", error=str(bad))
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"undecodable entry: {bad}", -1
        first_offset = self.image.offset + 1
        self.image = new
        self._on_applied(new, records, False)
        return ErrorCode.NONE, "", first_offset

    def warm_snapshot(self) -> int:
        """Encode ahead, off the Raft thread, what the next compaction would encode (see
        ``SnapshotEncoder.warm``); how many topics it encoded."""
        return self._snapshot.warm(self.image)

    def capture_dump(self) -> Callable[[], dict]:
        """On the Raft thread, at the index pysyncobj's dump records: how to encode the state as
        it is now, later and in another thread (``raft_dump.py``). Images are persistent, and the
        directory and observers are replaced, never changed, so what is held here stays this
        point in time while later entries apply."""
        image, directory, caught_up_observers = self.image, self.directory, self.caught_up_observers

        def encode() -> dict:
            return {"cluster_id": image.cluster_id, "offset": image.offset, "records": self._snapshot.records(image),
                    "controllers": directory.encode() if directory is not None else None,
                    "caught_up_observers": sorted(caught_up_observers)}

        return encode

    def load_dump(self, data: dict) -> None:
        """Install the state of a dump (``capture_dump``'s encoding, in either file format)."""
        records = [decode(b) for b in data["records"]]
        self.image = image_from_snapshot(data["cluster_id"], records, data["offset"])
        self._snapshot.seed(self.image, data["records"], records)
        self._on_applied(self.image, (), True)
        controllers = data.get("controllers")  # absent from dumps written before membership changes existed
        self.directory = ControllerDirectory.decode(controllers) if controllers is not None else None
        self.caught_up_observers = frozenset(data.get("caught_up_observers", ()))
        self._on_directory(self.directory, self.caught_up_observers)


_RAFT_STATES = {0: "follower", 1: "candidate", 2: "leader"}
_NOT_APPENDED = {FAIL_REASON.QUEUE_FULL, FAIL_REASON.MISSING_LEADER, FAIL_REASON.DISCARDED, FAIL_REASON.REQUEST_DENIED}


# The controller's --unsafe-testing join-before-caught-up negative control: set once at start
# (``enable_unsafe_join``), never by default. The node then counts as caught up from its first
# tick: it serves reads from whatever part of the log it holds, and an observer announces
# itself caught up (and is made a voter) before it has the log.
_unsafe_join_before_caught_up = False


def enable_unsafe_join() -> None:
    global _unsafe_join_before_caught_up
    _unsafe_join_before_caught_up = True


def has_caught_up(leader_commit: int | None, applied: int, term: int, entry_term: Callable[[int], int | None]) -> bool:
    """Whether a node has caught up with the metadata log since it started: it has heard a
    commit index from a leader (``leader_commit``; its own, as leader), applied up to it, and
    the entry there (``entry_term``: None when not in its journal) was written in the current
    ``term``.

    Only that term's leader writes such entries, the first being the no-op it appends on
    election, which commits only with (and after) everything committed before; so the image
    holds every entry committed when that commit index was sent. What a node loaded from its
    own disk says nothing of the kind: entries may have been committed while it was down, and
    after a power failure the commit index it stored may be older than what it had
    acknowledged (pysyncobj's ``isReady`` trusts it, and a new leader reports the loaded one
    until its no-op commits)."""
    return leader_commit is not None and applied >= leader_commit and entry_term(leader_commit) == term


def elects_at_once_after_leader_loss(self_id: int, connected_follower_ids: Sequence[int]) -> bool:
    """Whether this follower starts an election as soon as its connection to the leader closes:
    it has the lowest id among itself and the other followers it is connected to.

    Starting early is always safe in Raft (a candidate wins only with a majority of votes,
    given only to logs at least as complete); it costs availability only when the leader was
    alive after all (a link broke), which then sees a higher term and steps down. If this
    follower cannot win (its log is behind), the others' timeouts elect one of them."""
    return all(self_id < other for other in connected_follower_ids)


def _watching_peers(base: type[TCPTransport], on_disconnected: Callable[[TCPNode], None]) -> type[TCPTransport]:
    """``base`` that also reports each voter connection that closes to ``on_disconnected``."""

    class PeerWatchingTransport(base):
        def _onNodeDisconnected(self, node):
            super()._onNodeDisconnected(node)
            on_disconnected(node)

    return PeerWatchingTransport


def _entry_term(journal: FileJournal, index: int) -> int | None:
    """The term of the journal's entry at Raft ``index`` (entries are (command, index, term))."""
    position = index - journal[0][1] if len(journal) else -1
    return journal[position][2] if 0 <= position < len(journal) else None


class ControllerRaftNode:
    """One controller of the metadata quorum (a voter, or an observer catching up to become
    one), seen from asyncio."""

    def __init__(
        self,
        self_voter: Voter,
        voters: Sequence[Voter],
        data_dir: Path,
        cluster_id: str,
        password: str | None,
        loop: asyncio.AbstractEventLoop,
        raft_routes: dict[int, tuple[str, int]] | None = None,
        durable_journal: bool = True,
        bind_address: str | None = None,
        admit_incoming: Callable[[int], bool] | None = None,
    ) -> None:
        """``voters``: the ``--quorum`` voters; a controller not among them starts as an
        observer (pysyncobj's read-only node: it receives the log but neither votes nor counts
        for commits) and becomes a voter once the directory says so (``quorum add-controller``).
        ``raft_routes``: voter id -> address to connect to instead of its quorum address.
        ``bind_address``: where pysyncobj listens (default: this voter's Raft address; the
        Raft TLS relay's loopback port with ``--raft-tls``).
        ``durable_journal``: fsync the journal before any message relies on it
        (``raft_journal.py``); False leaves it to the page cache (pysyncobj's own behaviour).
        ``admit_incoming``: whether pysyncobj may keep an accepted connection, by its socket's
        file descriptor (with ``--raft-tls``: only the relay of this process may connect)."""
        self.voter = self_voter
        self._loop = loop
        self._lock = threading.Lock()
        self._ring: collections.deque[tuple[int, Record]] = collections.deque(maxlen=RING_RECORDS_MAX)
        self._image = MetadataImage.empty(cluster_id)
        self._published_up_to = -1  # after a restart of pysyncobj in this process, replayed entries up to here are not published again
        self._applied_event = asyncio.Event()
        self.role_changed = Nudge()  # set on the loop after each Raft role change (`_on_state_changed`)
        self._cluster_id = cluster_id
        self._data_dir = data_dir
        self._password = password
        self._raft_routes = raft_routes or {}
        self._durable_journal = durable_journal
        self._bind_address = bind_address
        self._admit_incoming = admit_incoming
        self._startup_directory = ControllerDirectory.of_voters(list(voters))
        self._directory = self._startup_directory
        self._was_member = False  # seen in the directory (or --quorum) since it started: leaving it later means removed
        self.removed = False
        self.caught_up_observers: frozenset[int] = frozenset()
        self._announced_caught_up = False
        self._promoting = False
        self._raft_thread_calls: collections.deque[Callable[[], None]] = collections.deque()  # run by the next tick
        self.journal: DurableJournal | None = None  # the durable journal, None with the page cache's
        self._raft_log: FileJournal | None = None
        self._caught_up = False
        self._syncobj: SyncObj | None = None
        data_dir.mkdir(parents=True, exist_ok=True)
        check_readable(data_dir / "raft.dump")
        self._start_raft(observer=all(v.node_id != self_voter.node_id for v in voters))

    def _start_raft(self, observer: bool) -> None:
        """Create pysyncobj's node (its thread starts at once): a voter bound to its Raft
        address, or an observer (no address: it dials the voters and says it is read-only)."""
        self.observer = observer
        self._was_member = self._was_member or self._directory.role_of(self.voter.node_id) != REMOVED
        self.state_machine = MetadataStateMachine(self._cluster_id, self._on_applied, self._on_directory)
        dump = DumpFile(self._data_dir / "raft.dump", self.state_machine.capture_dump, self._load_dump, durable=self._durable_journal)
        compaction = {"logCompactionMinEntries": 2**62, "logCompactionMinTime": 2**62} if observer else {}  # an observer's dump would name no self
        conf = SyncObjConf(
            journalFile=str(self._data_dir / "raft.journal"),
            fullDumpFile=str(self._data_dir / "raft.dump"),
            bindAddress=self._bind_address or self.voter.raft_address,
            password=self._password,
            autoTickPeriod=RAFT_TICK_S,
            appendEntriesPeriod=RAFT_HEARTBEAT_S,
            appendEntriesUseBatch=False,  # entries and commit indexes go out at once: see the note on appendEntriesUseBatch at the top
            raftMinTimeout=RAFT_ELECTION_TIMEOUT_MIN_S,
            raftMaxTimeout=RAFT_ELECTION_TIMEOUT_MAX_S,
            leaderFallbackTimeout=RAFT_ELECTION_TIMEOUT_MAX_S,
            connectionRetryTime=0.1,
            serializer=dump.serialize,  # off the Raft thread (raft_dump.py); pysyncobj forks for its own, unsafe with gRPC threads
            serializeChecker=dump.check,
            deserializer=dump.deserialize,
            onStateChanged=self._on_state_changed,
            dynamicMembershipChange=True,
            **compaction,
        )
        others = [
            RoutedNode(v.raft_address, self._raft_routes[v.node_id]) if v.node_id in self._raft_routes else v.raft_address
            for v in self._directory.voters
            if v.node_id != self.voter.node_id
        ]
        durable = self._durable_journal

        def create_journal(path: str) -> FileJournal:
            self._raft_log = DurableJournal(Path(path)) if durable else FileJournal(path)
            if durable:
                self.journal = self._raft_log
            return self._raft_log

        base = syncing_transport(lambda: self.journal) if durable else TCPTransport
        if self._admit_incoming is not None:
            base = admitting_transport(base, self._admit_incoming, self.voter.node_id)
        with journals_created_as(create_journal):
            self._syncobj = SyncObj(None if observer else self.voter.raft_address, others, conf=conf, consumers=[self.state_machine],
                                    transportClass=_watching_peers(base, self._on_peer_disconnected))
        self._syncobj.addOnTickCallback(self._on_tick)
        log.info("raft started", controller_id=self.voter.node_id, role=OBSERVER if observer else VOTER,
                 voters=[v.node_id for v in self._directory.voters])

    def _load_dump(self, data: dict) -> None:
        """Runs on pysyncobj's thread: load a dump (at start, or one the leader sent), then
        give the leader a full election timeout to be heard from. Loading 100,000 partitions
        takes a second or more, during which no heartbeat is read: without this the node
        would find its election deadline past and start an election at once, deposing a
        healthy leader with its higher term. Delaying an election is always safe."""
        self.state_machine.load_dump(data)
        syncobj = self.state_machine._syncObj  # set before pysyncobj's thread starts; self._syncobj may not be yet
        syncobj._SyncObj__raftElectionDeadline = raft_clock() + random.uniform(RAFT_ELECTION_TIMEOUT_MIN_S, RAFT_ELECTION_TIMEOUT_MAX_S)

    # ---- membership

    @property
    def voters(self) -> tuple[Voter, ...]:
        return self._directory.voters

    @property
    def directory(self) -> ControllerDirectory:
        return self._directory

    def _on_directory(self, directory: ControllerDirectory | None, caught_up_observers: frozenset[int]) -> None:
        """Runs on pysyncobj's thread when an entry (or the dump) changes the directory."""
        directory = directory or self._startup_directory
        role = directory.role_of(self.voter.node_id)
        self._directory = directory
        self.caught_up_observers = caught_up_observers
        if role != REMOVED:
            self._was_member = True
        if role == REMOVED and self._was_member and not self.removed:
            self.removed = True
            log.warning("removed from the quorum: no longer serving, voting until the removal commits, never campaigning",
                        controller_id=self.voter.node_id, voters=[v.node_id for v in directory.voters])
        elif role != REMOVED and self.removed:
            self.removed = False
        if role == VOTER and self.observer and not self._promoting:
            self._promoting = True
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._promote()))

    async def _promote(self) -> None:
        """Observer -> voter: restart pysyncobj in this process as a voter on the same journal
        and dump. Reads are refused until it has caught up again (the caught-up rule holds
        across the change); what it already published is not published again."""
        log.info("promoted to voter; restarting raft as a voter", controller_id=self.voter.node_id)
        self._caught_up = False
        old = self._syncobj
        await asyncio.get_running_loop().run_in_executor(None, old.destroy_synchronous)
        with self._lock:
            self._published_up_to = self._image.offset
        self._start_raft(observer=False)
        self._promoting = False

    def _on_tick(self) -> None:
        """Runs on pysyncobj's thread at every tick."""
        while self._raft_thread_calls:
            self._raft_thread_calls.popleft()()
        self._note_caught_up()
        syncobj = self._syncobj
        if self.removed and syncobj is not None:  # a removed voter votes until its removal commits, but never campaigns
            syncobj._SyncObj__raftElectionDeadline = raft_clock() + RAFT_ELECTION_TIMEOUT_MAX_S
        if self.observer and self._caught_up and not self._announced_caught_up and self._directory.role_of(self.voter.node_id) == OBSERVER:
            self._announced_caught_up = True
            self.state_machine.set_observer_caught_up(self.voter.node_id, callback=self._on_announced)
            log.info("observer caught up; announcing it to the active controller", controller_id=self.voter.node_id,
                     metadata_offset=self._image.offset)

    def _on_announced(self, result: object, fail_reason: int) -> None:
        if fail_reason != FAIL_REASON.SUCCESS:
            self._announced_caught_up = False  # retried at the next tick

    # ---- raft thread -> asyncio

    def _on_state_changed(self, old: int, new: int) -> None:
        """Runs on pysyncobj's thread: each Raft role change, for reading a failover from the logs
        and to wake the active controller's role loop (`role_changed`)."""
        self._loop.call_soon_threadsafe(self.role_changed.set)
        syncobj = self._syncobj
        log.info("raft state changed", controller_id=self.voter.node_id, old_state=_RAFT_STATES.get(old), state=_RAFT_STATES.get(new),
                 term=syncobj.raftCurrentTerm if syncobj is not None else None)

    def _on_peer_disconnected(self, peer: TCPNode) -> None:
        """Runs on pysyncobj's thread when a peer's Raft connection closes: if it was the
        leader's, start an election now if this follower is the one to (``elects_at_once_after_leader_loss``).
        pysyncobj has no call for this; its deadline attribute is set directly."""
        syncobj = self._syncobj
        if syncobj is None or self.removed or syncobj._isLeader() or syncobj._getLeader() != peer:
            return
        leader_id = next((v.node_id for v in self.voters if v.raft_address == peer.id), -1)
        reachable = {n.id for n in syncobj.otherNodes if syncobj.isNodeConnected(n)}
        connected = [v.node_id for v in self.voters if v.node_id not in (leader_id, self.voter.node_id) and v.raft_address in reachable]
        if not elects_at_once_after_leader_loss(self.voter.node_id, connected):
            return
        syncobj._SyncObj__raftElectionDeadline = raft_clock()  # pysyncobj's clock, not time.monotonic: they differ
        log.info("lost the connection to the leader; electing at once", controller_id=self.voter.node_id, leader=leader_id,
                 term=syncobj.raftCurrentTerm, connected_followers=connected)

    def _on_applied(self, image: MetadataImage, records: Sequence[Record], reset: bool) -> None:
        """Runs on pysyncobj's thread: publish the image and recent records, wake streams."""
        with self._lock:
            if image.offset <= self._published_up_to:  # replayed after a promotion: published already
                return
            if reset:
                self._ring.clear()
            first = image.offset - len(records) + 1
            self._ring.extend(zip(range(first, image.offset + 1), records))
            self._image = image
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        event, self._applied_event = self._applied_event, asyncio.Event()
        event.set()

    def _note_caught_up(self) -> None:
        """Runs on pysyncobj's thread at every tick, until this node has caught up
        (``has_caught_up``; on this thread the status cannot race pysyncobj's updates)."""
        journal = self._raft_log
        if self._caught_up or journal is None:
            return
        if _unsafe_join_before_caught_up:
            self._caught_up = True
            log.warning("unsafe: counted as caught up without checking", controller_id=self.voter.node_id, metadata_offset=self._image.offset)
            return
        status = self._syncobj.getStatus()
        if has_caught_up(status["leader_commit_idx"], status["last_applied"], status["raft_term"], lambda index: _entry_term(journal, index)):
            self._caught_up = True
            log.info("caught up with the metadata log", controller_id=self.voter.node_id, term=status["raft_term"],
                     commit_index=status["leader_commit_idx"], metadata_offset=self._image.offset)

    @property
    def caught_up(self) -> bool:
        """Whether this node has applied every entry committed before it started (and so
        answers reads with an image that is at worst stale, never missing what it once had),
        and has not been removed from the quorum (a removed controller stops receiving the log)."""
        return self._caught_up and not self.removed

    def catching_up_message(self) -> str:
        """Why a read was refused, and what to do instead."""
        if self.removed:
            return (f"controller {self.voter.node_id} was removed from the metadata quorum and no longer serves; ask one of the voters "
                    f"{[v.node_id for v in self.voters]} (`kraftlog quorum describe`), and stop this controller")
        status = self.status()
        return (f"controller {self.voter.node_id} has not yet caught up with the metadata log since it started (applied entry "
                f"{status['last_applied']}, term {status['raft_term']}, leader {'unknown' if self.leader_id() < 0 else self.leader_id()}), "
                "so its answer could miss committed topics, brokers or users; retry in a moment or ask another controller, "
                "and if no controller catches up check the quorum with `kraftlog quorum describe`")

    # ---- reads (local, possibly stale)

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def applied_event(self) -> asyncio.Event:
        """Set at the next apply; take it before reading, then wait on it."""
        return self._applied_event

    def read_since(self, from_offset: int) -> tuple[MetadataImage, list[tuple[int, Record]] | None]:
        """(image, records from ``from_offset`` on), or (image, None) when the ring no longer
        reaches back that far and the caller must send a snapshot of the image."""
        with self._lock:
            image = self._image
            if from_offset > image.offset:
                return image, []
            if self._ring and self._ring[0][0] <= from_offset:
                return image, [item for item in self._ring if item[0] >= from_offset]
            return image, None

    def status(self) -> dict:
        """pysyncobj's getStatus(), read from another thread (retried if a dict changed
        meanwhile), plus ``caught_up``."""
        for _ in range(10):
            try:
                status = self._syncobj.getStatus()
                break
            except RuntimeError:
                time.sleep(0.001)
        else:
            status = self._syncobj.getStatus()
        return {**status, "caught_up": self.caught_up}

    def raft_state(self, status: dict) -> str:
        return _RAFT_STATES.get(status.get("state"), "unknown")

    def is_leader(self) -> bool:
        return self._syncobj._isLeader()

    def raft_voter_addresses(self) -> set[str]:
        """The Raft addresses of pysyncobj's voter set as this node knows it (self included)."""
        others = {node.id for node in self._syncobj.otherNodes}
        return others if self.observer else others | {self.voter.raft_address}

    def connected_leader_id(self) -> int:
        """``leader_id()`` when this node is the leader or connected to it, else -1: a leader
        whose connection is down may be dead, and naming it would send clients there."""
        leader = self._syncobj._getLeader()
        if leader is None or not (self._syncobj._isLeader() or self._syncobj.isNodeConnected(leader)):
            return -1
        return self.leader_id()

    def term(self) -> int:
        return self._syncobj.raftCurrentTerm

    def leader_id(self) -> int:
        """The controller id of the last known Raft leader, -1 if none."""
        leader = self._syncobj._getLeader()
        if leader is None:
            return -1
        return next((v.node_id for v in self.voters if v.raft_address == leader.id), -1)

    # ---- writes

    async def propose(self, records: Sequence[Record], timeout_s: float = PROPOSAL_TIMEOUT_S) -> EntryResult:
        """Commit ``records`` as one entry; returns once applied here (or failed)."""
        return await self._commit(lambda callback: self.state_machine.apply_entry([encode(r) for r in records], callback=callback),
                                  lambda result: EntryResult(*result), timeout_s)

    async def propose_directory(self, directory: ControllerDirectory, timeout_s: float = PROPOSAL_TIMEOUT_S) -> EntryResult:
        """Commit a new controller directory."""
        return await self._commit(lambda callback: self.state_machine.set_controllers(directory.encode(), callback=callback),
                                  lambda _: EntryResult(ErrorCode.NONE, ""), timeout_s)

    async def change_voters(self, raft_address: str, add: bool, timeout_s: float = PROPOSAL_TIMEOUT_S) -> EntryResult:
        """Add or remove one pysyncobj voter (one change at a time: pysyncobj refuses a second
        before the first has committed, REQUEST_DENIED -> NOT_CONTROLLER here)."""
        change = self._syncobj.addNodeToCluster if add else self._syncobj.removeNodeFromCluster
        return await self._commit(lambda callback: change(raft_address, callback=callback), lambda _: EntryResult(ErrorCode.NONE, ""), timeout_s)

    async def hand_over_leadership(self) -> bool:
        """Ask the most caught-up connected voter to take over leadership at once (Raft's
        TimeoutNow), on pysyncobj's thread; False when none is caught up enough to be asked."""
        future: asyncio.Future[bool] = self._loop.create_future()

        def on_raft_thread() -> None:
            self._syncobj.transferLeadership(callback=lambda _, reason: self._loop.call_soon_threadsafe(
                lambda: future.done() or future.set_result(reason == FAIL_REASON.SUCCESS)))

        self._raft_thread_calls.append(on_raft_thread)
        self._syncobj._SyncObj__pipeNotifier.notify()  # the next tick now, not after RAFT_TICK_S of sleep
        return await asyncio.wait_for(future, PROPOSAL_TIMEOUT_S)

    async def _commit(self, submit: Callable[[Callable], None], outcome_of: Callable[[object], EntryResult], timeout_s: float) -> EntryResult:
        """Submit a pysyncobj command with a callback and wait for its outcome here."""
        future: asyncio.Future[EntryResult] = self._loop.create_future()

        def settle(result: EntryResult) -> None:
            if not future.done():
                future.set_result(result)

        def callback(result: object, fail_reason: int) -> None:  # raft thread
            if fail_reason == FAIL_REASON.SUCCESS:
                outcome = outcome_of(result)
            elif fail_reason in _NOT_APPENDED:
                outcome = EntryResult(ErrorCode.NOT_CONTROLLER, f"the entry was not committed (pysyncobj reason {fail_reason}): leadership is changing")
            else:
                outcome = EntryResult(ErrorCode.REQUEST_TIMED_OUT, f"leadership changed while committing (pysyncobj reason {fail_reason}): the outcome is unknown; check and retry")
            self._loop.call_soon_threadsafe(settle, outcome)

        submit(callback)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except asyncio.TimeoutError:
            return EntryResult(ErrorCode.REQUEST_TIMED_OUT, f"not committed within {timeout_s:.0f} s (no quorum?): the outcome is unknown; check and retry")

    async def keep_snapshot_warm(self) -> None:
        """Every ``SNAPSHOT_WARM_INTERVAL_S``, encode in a worker thread what changed in the
        image, a little at a time, so that a log compaction's dump writer (``raft_dump.py``)
        finds it encoded: encoding 100,000 partitions at once is over a second of pure Python,
        which the Raft thread would wait for in slices of the interpreter lock (when it ran on
        the Raft thread, one config change waited 5 s for the election it caused)."""
        while True:
            await asyncio.sleep(SNAPSHOT_WARM_INTERVAL_S)  # a timer, not a wait for a condition
            try:
                await asyncio.to_thread(self.state_machine.warm_snapshot)
            except Exception:  # a timer must never die silently: the compaction encodes what this did not
                log.exception("warming the snapshot failed; the next compaction encodes what changed", controller_id=self.voter.node_id)

    def destroy(self) -> None:
        """Stop pysyncobj's thread and close its journal."""
        self._syncobj.destroy_synchronous()
