"""The transactional producer's side of KIP-98 (with KIP-890's epoch bump at every end):
the calls to the transactional id's coordinator, and the rules the producer follows.

- `init_transactions` registers the transactional id (InitProducerId at its coordinator, found
  with FindCoordinator key_type TRANSACTION). The answer's producer id and epoch fence every
  older producer with the same id; a transaction an older one left open is aborted first
  (CONCURRENT_TRANSACTIONS is retried until its markers are written).
- Within a transaction, a partition is added by its leader (KIP-890 part 2): every produce
  carries the transactional id and ``add_to_transaction``, and the leader has the coordinator
  add the partition before appending the transaction's first batch there, so the coordinator
  knows every partition that needs a marker before any of its batches is in a log, and the
  batch leaves at once, with no AddPartitionsToTxn round trip before it (`leader_adds`).
  Batches are transactional (attribute bit 4) and numbered under the producer id and epoch.
- `commit_transaction` flushes, fails if any record of the transaction failed (the
  application then aborts), and sends EndTxn(commit); `abort_transaction` flushes and sends
  EndTxn(abort). The answer carries the bumped epoch: every partition numbers from 0 under it.
- `send_offsets_to_transaction` (KIP-447, Kafka's AddOffsetsToTxn): the group's
  `__consumer_offsets` partition (server_common/internal_topics.py) is added to the transaction
  with AddPartitionsToTxn (no produce of the producer goes there), so the commit or abort marker lands there too; then TxnOffsetCommit goes
  to the group's coordinator with the producer id and epoch and the consumer's member id and
  epoch. The offsets become the group's committed offsets only when the transaction commits.
- PRODUCER_FENCED from the coordinator, or INVALID_PRODUCER_EPOCH from a leader (a newer
  incarnation's markers carry a newer epoch), raise `ProducerFencedError`: this producer can
  never write again under this transactional id.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import structlog

from data_plane.client.channels import CHANNEL_OPTIONS
from data_plane.client.errors import RETRIABLE_CODES, KraftlogError, from_error_code
from data_plane.client.group_coordinator_link import CoordinatorLink, coordinator_channels, raise_commit_errors
from data_plane.client.group_membership import offset_commit_request
from data_plane.client.metadata_cache import MetadataCache
from data_plane.client.record_accumulator import RecordAccumulator
from kraftlog_proto import group_pb2
from kraftlog_proto import transaction_pb2 as pb
from kraftlog_proto import transaction_pb2_grpc
from server_common.internal_topics import OFFSETS_TOPIC, offsets_partition
from server_common.channel_pool import ChannelPool
from server_common.client_id import with_client_id
from server_common.client_security import ClientSecurity
from server_common.errors import ErrorCode

log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]
FENCED_CODES = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
# TxnOffsetCommit answers worth retrying beyond the coordinator's moves (CoordinatorLink):
# the offsets partition's replicas catching up, or the previous transaction's markers.
TXN_OFFSET_RETRY_CODES = RETRIABLE_CODES | {"CONCURRENT_TRANSACTIONS"}
# The previous transaction's markers usually take one replication round trip: the next
# transaction's first AddPartitionsToTxn retries CONCURRENT_TRANSACTIONS from this wait up,
# doubling to retry_backoff_ms (Kafka's producer retries it after 20 ms for the same reason).
CONCURRENT_TRANSACTIONS_FIRST_BACKOFF_S = 0.005


class GroupMetadata(NamedTuple):
    """What a transactional producer needs of a group consumer to commit its offsets inside a
    transaction (`Consumer.group_metadata()`): the coordinator checks the member id and epoch
    as for OffsetCommit, so a member fenced by a rebalance cannot move the group's offsets.
    ``leader_epochs``: per partition, the leader epoch of the last record the consumer read,
    committed with the offset as OffsetCommit does (the next member checks its position
    against the log with it, KIP-320); -1 where unknown."""

    group_id: str
    member_id: str
    member_epoch: int
    leader_epochs: Mapping[TopicPartition, int] = MappingProxyType({})


class ProducerFencedError(KraftlogError):
    """A newer producer with the same transactional id exists (it called init_transactions,
    or the coordinator aborted this producer's transaction on timeout): close this producer."""

    def __init__(self, message: str) -> None:
        super().__init__("PRODUCER_FENCED", message, retriable=False)


class TransactionManager:
    """One transactional id's state on the client, and its calls to the coordinator."""

    def __init__(
        self, transactional_id: str, timeout_ms: int, metadata: MetadataCache, security: ClientSecurity, client_id: str,
        accumulator: RecordAccumulator, flush: Callable[[float | None], None], request_timeout_s: float, retry_backoff_s: float,
        max_block_s: float,
    ) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must be a non-empty string")
        if timeout_ms <= 0:
            raise ValueError(f"transaction_timeout_ms={timeout_ms}: give a positive timeout")
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        calls = ChannelPool(with_client_id(transaction_pb2_grpc.TransactionCoordinatorStub, client_id, security.call_metadata()),
                            CHANNEL_OPTIONS, security.channel_credentials())
        self._group_channels = coordinator_channels(security, client_id)
        self._link = CoordinatorLink(transactional_id, metadata, self._group_channels, request_timeout_s,
                                     retry_backoff_s, key_type=group_pb2.TRANSACTION, call_pool=calls)
        self._metadata = metadata
        self._request_timeout_s = request_timeout_s
        self._group_links: dict[str, CoordinatorLink] = {}
        self._accumulator = accumulator
        self._flush = flush
        self._retry_backoff_s = retry_backoff_s
        self._max_block_s = max_block_s
        self._lock = threading.Lock()
        self.producer_id = -1
        self.producer_epoch = -1
        self.in_transaction = False
        self._added: set[TopicPartition] = set()
        self._results: dict[int, concurrent.futures.Future] = {}  # per batch of the transaction: its outcome
        self._fenced: ProducerFencedError | None = None
        accumulator.transactional = True

    # ------------------------------------------------------------ the application's calls

    def init_transactions(self) -> None:
        """Register the transactional id; fences older producers and aborts what they left open."""
        self._check_not_fenced()
        if self.in_transaction:
            raise KraftlogError(ErrorCode.INVALID_TXN_STATE, "init_transactions() inside a transaction: commit or abort it first")
        request = pb.TxnInitProducerIdRequest(transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms)
        answer = self._call("InitProducerId", request)
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self._accumulator.start_epoch(answer.producer_id, answer.producer_epoch)

    def begin_transaction(self) -> None:
        self._check_not_fenced()
        if self.producer_id < 0:
            raise KraftlogError(ErrorCode.INVALID_TXN_STATE, "call init_transactions() once before the first transaction")
        if self.in_transaction:
            raise KraftlogError(ErrorCode.INVALID_TXN_STATE, "a transaction is already open: commit or abort it first")
        with self._lock:
            self.in_transaction, self._added, self._results = True, set(), {}

    def leader_adds(self, tp: TopicPartition) -> None:
        """Called before a record or batch is queued for ``tp``. Its leader adds the partition
        to the transaction, through the coordinator, before appending the transaction's first
        batch there (KIP-890 part 2: the sender sets ``add_to_transaction``), so nothing is
        called here: the partition is only remembered (the transaction then has something to
        end). One round trip fewer than adding it first, and the batch leaves at once."""
        self._require_open("send")
        with self._lock:
            self._added.add(tp)

    def add_partition(self, tp: TopicPartition) -> None:
        """Add ``tp`` to the transaction with the coordinator now (AddPartitionsToTxn), for a
        write that does not go through a partition leader's produce: the group's offsets
        partition, before TxnOffsetCommit."""
        self._require_open("send_offsets_to_transaction")
        if tp in self._added:
            return
        self._call("AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            topics=[pb.TxnTopicPartitions(topic=tp[0], partitions=[tp[1]])]))
        with self._lock:
            self._added.add(tp)

    def track(self, result: concurrent.futures.Future) -> None:
        """Remember a batch's outcome: a commit fails if any batch of the transaction failed."""
        with self._lock:
            self._results[id(result)] = result

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group: GroupMetadata, offsets_partitions: int) -> None:
        """Commit ``offsets`` (partition -> next offset to read) of ``group`` inside the open
        transaction: its ``__consumer_offsets`` partition (of ``offsets_partitions``) is added
        first, so the transaction's marker decides whether they count. Retries retriable
        answers up to max_block_ms; a refusal (a stale member epoch, ...) is raised and the
        application aborts."""
        self._require_open("send_offsets_to_transaction")
        if not offsets:
            return
        self.add_partition((OFFSETS_TOPIC, offsets_partition(group.group_id, offsets_partitions)))
        request = txn_offset_commit_request(self.transactional_id, self.producer_id, self.producer_epoch, offsets, group)
        where = f"TxnOffsetCommit of group {group.group_id!r} for {self.transactional_id!r}"
        link = self._group_links.get(group.group_id)
        if link is None:
            link = self._group_links[group.group_id] = CoordinatorLink(
                group.group_id, self._metadata, self._group_channels, self._request_timeout_s, self._retry_backoff_s)
        deadline = time.monotonic() + self._max_block_s
        while True:
            remaining = deadline - time.monotonic()
            answer = link.call("TxnOffsetCommit", request, max(remaining, 0.001))
            try:
                raise_commit_errors(answer, where)
                return
            except KraftlogError as error:
                if error.code in FENCED_CODES:
                    self._fence(str(error))
                if error.code not in TXN_OFFSET_RETRY_CODES or remaining <= self._retry_backoff_s:
                    raise
            time.sleep(self._retry_backoff_s)

    def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it. If a record failed, raises
        its error and the transaction stays open: call abort_transaction()."""
        self._require_open("commit_transaction")
        self._flush(None)
        self._raise_failed_record()
        self._end(commit=True)

    def prepare_transaction(self) -> tuple[int, int] | None:
        """Deliver every record of the transaction and leave it open for another process to
        end (data_plane/client/prepared_transactions.py): returns the producer id and epoch
        EndTxn needs, or None when nothing was added (nothing to end). This producer is then
        done with the transaction; it must call init_transactions() before another (which
        would abort the prepared one if it is still open)."""
        self._require_open("prepare_transaction")
        self._flush(None)
        self._raise_failed_record()
        prepared = (self.producer_id, self.producer_epoch) if self._added else None
        with self._lock:
            self.in_transaction, self._added, self._results = False, set(), {}
            self.producer_id = self.producer_epoch = -1
        return prepared

    def abort_transaction(self) -> None:
        """Abort the open transaction: what it wrote is never seen by read_committed readers."""
        self._require_open("abort_transaction")
        self._flush(None)  # every batch resolved (written or failed) before the markers go out
        self._end(commit=False)

    def abort_on_close(self, timeout_s: float | None) -> None:
        """The producer closes with a transaction open: abort it (as Kafka's producer does on a
        graceful close), so its partitions' LSO moves now rather than after
        transaction_timeout_ms. Never commits. If the abort cannot finish within
        ``timeout_s`` (coordinator unreachable, producer fenced), the coordinator aborts the
        transaction at its timeout or at the id's next init_transactions."""
        if not self.in_transaction or self._fenced is not None:
            return
        budget_s = self._max_block_s if timeout_s is None else min(timeout_s, self._max_block_s)
        deadline = time.monotonic() + budget_s
        try:
            self._flush(budget_s)
            self._end(commit=False, max_block_s=max(deadline - time.monotonic(), 0.001))
        except (KraftlogError, TimeoutError) as error:
            log.warning("closing with a transaction open: it could not be aborted now; the coordinator aborts it after "
                        "transaction_timeout_ms or at the next init_transactions()", transactional_id=self.transactional_id,
                        transaction_timeout_ms=self.timeout_ms, error=str(error))

    # ------------------------------------------------------------ internals

    def _end(self, commit: bool, max_block_s: float | None = None) -> None:
        if self._added:  # nothing added: nothing to commit or abort at the coordinator
            request = pb.EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                       producer_epoch=self.producer_epoch, commit=commit)
            answer = self._call("EndTxn", request, max_block_s)
            self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
            self._accumulator.start_epoch(answer.producer_id, answer.producer_epoch)
        with self._lock:
            self.in_transaction, self._added, self._results = False, set(), {}

    def _raise_failed_record(self) -> None:
        for result in list(self._results.values()):
            error = result.exception()
            if error is not None:
                if isinstance(error, KraftlogError) and error.code in FENCED_CODES:
                    self._fence(str(error))
                raise KraftlogError(getattr(error, "code", "UNKNOWN_SERVER_ERROR"),
                                    f"a record of the transaction failed ({error}): call abort_transaction()", retriable=False)

    def _call(self, method: str, request: Any, max_block_s: float | None = None) -> Any:
        """``method`` at the coordinator, retried while the previous transaction completes
        (CONCURRENT_TRANSACTIONS) and across coordinator moves, up to max_block_ms (or ``max_block_s``)."""
        deadline = time.monotonic() + (self._max_block_s if max_block_s is None else max_block_s)
        backoff_s = CONCURRENT_TRANSACTIONS_FIRST_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            answer = self._link.call(method, request, max(remaining, 0.001))
            if answer.error_code == ErrorCode.NONE:
                return answer
            error = from_error_code(answer.error_code, answer.error_message, f"{method} for {self.transactional_id!r}")
            if answer.error_code == ErrorCode.PRODUCER_FENCED:
                self._fence(str(error))
            if answer.error_code != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= backoff_s:
                raise error
            time.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, self._retry_backoff_s)

    def _fence(self, why: str) -> None:
        self._fenced = ProducerFencedError(f"transactional id {self.transactional_id!r}: {why}")
        raise self._fenced

    def _check_not_fenced(self) -> None:
        if self._fenced is not None:
            raise self._fenced

    def _require_open(self, what: str) -> None:
        self._check_not_fenced()
        if not self.in_transaction:
            raise KraftlogError(ErrorCode.INVALID_TXN_STATE, f"{what}() with no transaction open: call begin_transaction() first")


def txn_offset_commit_request(transactional_id: str, producer_id: int, producer_epoch: int, offsets: dict[TopicPartition, int],
                        group: GroupMetadata) -> group_pb2.TxnOffsetCommitRequest:
    """The TxnOffsetCommit of ``offsets`` with the consumer's leader epochs (-1 where unknown), grouped per topic."""
    topics = offset_commit_request(group.group_id, group.member_id, group.member_epoch,
                                   {tp: (offset, group.leader_epochs.get(tp, -1)) for tp, offset in offsets.items()}).topics
    return group_pb2.TxnOffsetCommitRequest(
        group_id=group.group_id, transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        member_id=group.member_id, member_epoch=group.member_epoch, topics=topics)
