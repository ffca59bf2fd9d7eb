"""Two-phase transactions: one process writes a transaction and hands it over without ending
it, another commits or aborts it (the pattern of Flink's Kafka sink, formalised by KIP-939).

The writer calls `Producer.prepare_transaction()` instead of `commit_transaction()`: every
record is delivered (or the call raises), and what comes back, a `PreparedTransaction`
(transactional id, producer id, producer epoch), is everything needed to end it. The
transaction coordinator checks only those three on EndTxn, so `end_prepared` can run in any
process, after the writer has closed its producer (closing never aborts an open
transaction). Until it is ended the transaction holds the last stable offset of its
partitions: read_committed readers wait at it, and the coordinator aborts it once
`transaction_timeout_ms` passes from its first partition.

A newer producer with the same transactional id (`init_transactions`) aborts a prepared
transaction that nobody ended and fences it: ending it afterwards raises
`ProducerFencedError`. A retried EndTxn of the same decision is answered as the first was.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import NamedTuple

from data_plane.client.channels import CHANNEL_OPTIONS, REQUEST_TIMEOUT_MS_DEFAULT
from data_plane.client.errors import from_error_code
from data_plane.client.group_coordinator_link import CoordinatorLink, coordinator_channels
from data_plane.client.metadata_cache import MetadataCache
from data_plane.client.transactions import ProducerFencedError
from kraftlog_proto import group_pb2, transaction_pb2_grpc
from kraftlog_proto import transaction_pb2 as pb
from server_common.channel_pool import ChannelPool
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from server_common.errors import ErrorCode

RETRY_BACKOFF_S = 0.05


class PreparedTransaction(NamedTuple):
    """A transaction whose records are all written, left open for someone else to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def end_prepared(
    bootstrap: str | Iterable[str], prepared: Iterable[PreparedTransaction], commit: bool, *,
    request_timeout_ms: float = REQUEST_TIMEOUT_MS_DEFAULT, max_block_ms: float = 60_000, security: ClientSecurity | None = None,
) -> None:
    """Commits (or aborts) every transaction of ``prepared`` with EndTxn at its coordinator,
    one after the other. The call returns once each decision is durable; the markers follow
    (readers see a commit once its marker is below the high watermark). Coordinator moves and
    CONCURRENT_TRANSACTIONS (the answer to a retried EndTxn while its markers are written) are
    retried up to ``max_block_ms`` per transaction; PRODUCER_FENCED (a newer producer with the
    id aborted it) raises ProducerFencedError, other refusals their KraftlogError."""
    security = resolve_security(security)
    metadata = MetadataCache(bootstrap, security)
    finders = coordinator_channels(security)
    calls = ChannelPool(transaction_pb2_grpc.TransactionCoordinatorStub, CHANNEL_OPTIONS, security.channel_credentials())
    try:
        for txn in prepared:
            link = CoordinatorLink(txn.transactional_id, metadata, finders, request_timeout_ms / 1000.0, RETRY_BACKOFF_S,
                                   key_type=group_pb2.TRANSACTION, call_pool=calls)
            _end(link, txn, commit, max_block_ms / 1000.0)
    finally:
        finders.close()
        calls.close()


def _end(link: CoordinatorLink, txn: PreparedTransaction, commit: bool, max_block_s: float) -> None:
    request = pb.EndTxnRequest(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                               producer_epoch=txn.producer_epoch, commit=commit)
    what = f"EndTxn({'commit' if commit else 'abort'}) of prepared transaction {txn.transactional_id!r}"
    deadline = time.monotonic() + max_block_s
    while True:
        remaining = deadline - time.monotonic()
        answer = link.call("EndTxn", request, max(remaining, 0.001))
        if answer.error_code == ErrorCode.NONE:
            return
        error = from_error_code(answer.error_code, answer.error_message, what)
        if answer.error_code == ErrorCode.PRODUCER_FENCED:
            raise ProducerFencedError(f"{error}: a newer producer with this transactional id aborted it")
        if answer.error_code != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= RETRY_BACKOFF_S:
            raise error
        time.sleep(RETRY_BACKOFF_S)

