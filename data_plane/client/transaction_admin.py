"""Administering transactions: list the transactional ids of the cluster and describe one.

ListTransactions goes to every broker (each knows only the ids it coordinates);
DescribeTransactions goes to the id's coordinator (FindCoordinator with key_type TRANSACTION).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from data_plane.client.channels import REQUEST_TIMEOUT_MS_DEFAULT, broker_channels, client_channels
from data_plane.client.errors import KraftlogError, from_error_code
from data_plane.client.every_broker import ask_every_broker
from data_plane.client.group_coordinator_link import CoordinatorLink, coordinator_channels
from data_plane.client.metadata_cache import MetadataCache
from kraftlog_proto import group_pb2, transaction_pb2, transaction_pb2_grpc
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from server_common.errors import ErrorCode

RETRY_BACKOFF_S = 0.1


class ListedTransaction(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


class TransactionAdmin:
    """Transaction administration against the brokers; use as a context manager."""

    def __init__(self, bootstrap: str | Iterable[str], *, request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
                 security: ClientSecurity | None = None) -> None:
        """``security``: TLS files and credentials; None: the config named by ``KRAFTLOG_CLIENT_CONFIG``, else plaintext."""
        self.security = resolve_security(security)
        self._metadata = MetadataCache(bootstrap, self.security)
        self._brokers = broker_channels(self.security)
        self._finders = coordinator_channels(self.security)
        self._coordinators = client_channels(transaction_pb2_grpc.TransactionCoordinatorStub, self.security)
        self._timeout_s = request_timeout_ms / 1000.0

    def __enter__(self) -> TransactionAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._brokers.close()
        self._finders.close()
        self._coordinators.close()

    def list_transactions(self, states: Iterable[str] = ()) -> tuple[list[ListedTransaction], dict[int, str]]:
        """Every transactional id of the cluster (in ``states``, default all), from every live
        broker, and the brokers that did not answer (id -> error): their ids are missing."""
        request = transaction_pb2.ListTransactionsRequest(states_filter=list(states))
        answers, unanswered = ask_every_broker(self._metadata, self._brokers.stub, self._timeout_s,
                                               lambda a: self._coordinators.stub(a).ListTransactions.future(request, timeout=self._timeout_s),
                                               "ListTransactions")
        listed = {t.transactional_id: ListedTransaction(t.transactional_id, t.producer_id, t.state, t.coordinator_id or broker_id)
                  for broker_id, answer in answers.items() for t in answer.transactions}
        return sorted(listed.values()), unanswered

    def describe_transaction(self, transactional_id: str) -> transaction_pb2.DescribedTransaction:
        """The id's state, producer id and epoch, timeout, start time and partitions, from its coordinator."""
        link = CoordinatorLink(transactional_id, self._metadata, self._finders, self._timeout_s, RETRY_BACKOFF_S,
                               key_type=group_pb2.TRANSACTION, call_pool=self._coordinators)
        answer = link.call("DescribeTransactions", transaction_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                           error_of=lambda a: a.transactions[0].error_code if a.transactions else ErrorCode.NONE)
        described = next((t for t in answer.transactions if t.transactional_id == transactional_id), None)
        if described is None:
            raise KraftlogError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, f"transactional id {transactional_id!r}: the coordinator did not describe it")
        if described.error_code != ErrorCode.NONE:
            raise from_error_code(described.error_code, described.error_message, "DescribeTransactions")
        return described
