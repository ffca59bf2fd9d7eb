"""The one exception the client raises, and which broker answers are worth retrying.

Brokers answer with `ErrorCode` values (proto/common.proto) and gRPC status codes; the
client turns both into `KraftlogError` so callers catch one type, read a stable `code`
string, and learn from `retriable` whether waiting and trying again can help. Each code
carries advice in its message, because "NOT_ENOUGH_REPLICAS" alone does not tell a user
what to do next.
"""

from __future__ import annotations

import grpc

from server_common.errors import ErrorCode, error_code_name

# Conditions that clear up by themselves: a leader moved, a replica caught up, a broker
# restarted. The producer and consumer retry these (bounded by their timeouts).
RETRIABLE_CODES: frozenset[str] = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_LEADER_EPOCH",
        "FENCED_LEADER_EPOCH",
        "LEADER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "UNKNOWN_TOPIC_OR_PARTITION",  # a topic just created is not yet on every broker
        "BROKER_NOT_AVAILABLE",
        "REPLICA_NOT_AVAILABLE",
        "OFFSET_NOT_AVAILABLE",
        "STORAGE_ERROR",  # the partition moves to another replica
        "NOT_CONTROLLER",
        "UNSTABLE_OFFSET_COMMIT",  # OffsetFetch require_stable: the offset's transaction is still open
    }
)

# Retriable codes that mean our picture of the cluster is stale: refresh metadata before
# the next attempt, or the retry goes to the same wrong place.
METADATA_REFRESH_CODES: frozenset[str] = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_LEADER_EPOCH",
        "FENCED_LEADER_EPOCH",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "BROKER_NOT_AVAILABLE",
        "REPLICA_NOT_AVAILABLE",
        "STORAGE_ERROR",
    }
)

_ADVICE: dict[str, str] = {
    "NOT_LEADER_OR_FOLLOWER": "leadership moved; the client refreshes metadata and retries",
    "UNKNOWN_LEADER_EPOCH": "the broker has not caught up with the latest leader epoch yet; retry shortly",
    "FENCED_LEADER_EPOCH": "the client's leader epoch is stale; it refreshes metadata and retries",
    "LEADER_NOT_AVAILABLE": "no live in-sync replica can lead the partition; restart its replicas' brokers",
    "NOT_ENOUGH_REPLICAS": "the ISR is smaller than min.insync.replicas; bring followers back or lower min.insync.replicas",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "the batch was appended but not replicated to min.insync.replicas; it may be duplicated if retried",
    "REQUEST_TIMED_OUT": "the broker did not answer within request_timeout_ms (a write's outcome is then unknown: it may be "
                         "committed); check the broker's health and load, or raise request_timeout_ms",
    "UNKNOWN_TOPIC_OR_PARTITION": "create the topic first, or check its name and partition count",
    "BROKER_NOT_AVAILABLE": "check that the broker is running and reachable at the address in the bootstrap list or metadata",
    "OFFSET_OUT_OF_RANGE": "the offset was deleted by retention or is past the end; seek_to_beginning/seek_to_end or set auto_offset_reset",
    "MESSAGE_TOO_LARGE": "a request is over the gRPC message limit of the client or the broker: send fewer records per "
                         "request (the producer's max_request_size)",
    "CORRUPT_MESSAGE": "a batch failed its CRC check or does not parse; on produce nothing was written, send it again; "
    "on fetch the broker takes the damaged range out of service and repairs it from a replica, retry; if it persists, report it",
    "INVALID_RECORD": "the batch's producer fields or body break the format (a client encoding bug); nothing was written: fix the encoder",
    "INVALID_REQUEST": "the broker rejected the request as malformed; check client and broker versions",
    "INVALID_REQUIRED_ACKS": "use acks=0, 1 or 'all'",
    "INVALID_TIMESTAMP": "a record timestamp is negative or the batch's max_timestamp is out of range; send timestamps in ms since the epoch",
    "BUFFER_EXHAUSTED": "records are produced faster than brokers accept them; raise buffer_memory or max_block_ms, or slow down",
    "DELIVERY_TIMEOUT": "the batch could not be delivered within delivery_timeout_ms; check broker health and the last error",
    "CLIENT_CLOSED": "the client was closed; create a new one",
    "AUTHENTICATION_FAILED": "check the username and password in the client config (--command-config, KRAFTLOG_CLIENT_CONFIG); 'kraftlog users list' shows the users an admin created",
    "NO_BROKER_REACHABLE": "check the address and that the brokers run: 'kraftlog cluster status' shows a local cluster's brokers, 'kraftlog cluster up' starts one",
    "OUT_OF_ORDER_SEQUENCE": "the leader saw a gap in this producer's sequence; the producer renumbers the partition under a new producer id and retries",
    "UNKNOWN_PRODUCER_ID": "the broker forgot this producer id (expired); recreate the producer",
    "INVALID_PRODUCER_EPOCH": "a newer producer with the same id fenced this one; stop using it",
    "UNKNOWN_SERVER_ERROR": "see the broker's log for details",
    "NO_POSITION": "call seek(), seek_to_beginning() or seek_to_end(), or set auto_offset_reset",
    "NOT_ASSIGNED": "call assign() with this partition first",
    "COORDINATOR_NOT_AVAILABLE": "the coordinator's partition (of __consumer_offsets for a group, of __transaction_state for a "
                                 "transactional id) has no reachable leader yet; the client finds the coordinator again and retries",
    "NOT_COORDINATOR": "the group's coordinator moved; the client finds it again and retries",
    "COORDINATOR_LOAD_IN_PROGRESS": "the new coordinator is loading the group; retry shortly",
    "UNKNOWN_MEMBER_ID": "the coordinator removed this member (session timeout or left); it rejoins with member epoch 0",
    "FENCED_MEMBER_EPOCH": "the member's epoch is stale; it drops its partitions and rejoins with member epoch 0",
    "STALE_MEMBER_EPOCH": "the commit came from an older member epoch; its partitions moved, so the newer owner's commits count",
    "GROUP_ID_NOT_FOUND": "no such group: check the name ('kraftlog groups list')",
    "NON_EMPTY_GROUP": "the group has members: stop its consumers (or wait for their session timeout) and retry",
    "INVALID_GROUP_ID": "use a non-empty group id",
    "UNRELEASED_INSTANCE_ID": "another live member holds this group_instance_id: give each consumer its own, or stop the other one",
    "GROUP_MAX_SIZE_REACHED": "the group is full: stop a member or raise the broker's group size limit",
    "UNSUPPORTED_ASSIGNOR": "use group_assignor 'uniform', 'range' or 'sticky'",
    "OFFSET_METADATA_TOO_LARGE": "shorten the commit's metadata string",
    "INVALID_COMMIT_OFFSET": "commit an offset >= 0",
    "GROUP_MEMBER": "a group member's partitions come from subscribe()",
    "PRODUCER_FENCED": "a newer producer with the same transactional id exists (or the transaction timed out): close this producer",
    "INVALID_TXN_STATE": "the call does not fit the transaction's state: init_transactions once, then begin, send, commit or abort "
                         "(a leader answers it to a transactional batch for a partition not in the ongoing transaction)",
    "INVALID_PRODUCER_ID_MAPPING": "the transactional id expired or was never registered: call init_transactions again",
    "INVALID_TRANSACTION_TIMEOUT": "transaction_timeout_ms must be positive and at most the brokers' --transaction-max-timeout-ms",
    "CONCURRENT_TRANSACTIONS": "the previous transaction is still completing; the producer retries",
}


# MESSAGE_TOO_LARGE has several causes and the message names the limit that was hit: the
# advice is for that limit (raising max.message.bytes does not help a record over the
# client's own max_request_size).
_ADVICE_BY_LIMIT: dict[str, dict[str, str]] = {
    "MESSAGE_TOO_LARGE": {
        "max_request_size": "raise the producer's max_request_size (kraftlog produce --max-request-size) or send smaller "
                            "records; a batch over the topic's max.message.bytes is refused by the broker after that",
        "buffer_memory": "raise the producer's buffer_memory above the record's size, or send smaller records",
        "max.message.bytes": "keep the producer's batch_size below the topic's max.message.bytes, or raise max.message.bytes "
                             "(kraftlog topics alter NAME --config max.message.bytes=N) for records larger than it",
    },
}


def _advice(code: str, message: str) -> str | None:
    """What to do about ``code``: for the limit the message names when the code has several."""
    by_limit = _ADVICE_BY_LIMIT.get(code, {})
    return next((advice for limit, advice in by_limit.items() if limit in message), _ADVICE.get(code))


# Codes whose broker message usually says all the advice does (the group coordinator's answers
# name the group and what to do): the advice is left out when the message already gives it.
_ADVISED_BY_BROKER = {"GROUP_ID_NOT_FOUND": "check the name", "NON_EMPTY_GROUP": "stop its consumers"}


class KraftlogError(Exception):
    """An error the client reports to its caller.

    `error` is the broker's `ErrorCode` (None for a client-side condition such as
    `DELIVERY_TIMEOUT`, which no broker answers); `code` is its stable name, the string
    callers match on, either way; `retriable` says whether trying again later may succeed;
    `refresh_metadata` says the client's view of leaders was stale.
    """

    def __init__(
        self, code: ErrorCode | str, message: str = "", *, retriable: bool | None = None, outcome_unknown: bool = False
    ) -> None:
        self.error: ErrorCode | None = code if isinstance(code, ErrorCode) else ErrorCode.__members__.get(code)
        code = code.name if isinstance(code, ErrorCode) else code
        self.code = code
        self.detail = message
        self.retriable = code in RETRIABLE_CODES if retriable is None else retriable
        self.refresh_metadata = code in METADATA_REFRESH_CODES
        self.outcome_unknown = outcome_unknown
        given = _ADVISED_BY_BROKER.get(code)
        advice = None if given is not None and given in message else _advice(code, message)
        text = f"{code}: {message}" if message else code
        if outcome_unknown:
            text += " [outcome unknown: an attempt reached a broker, so the records may have been written]"
        super().__init__(f"{text} ({advice})" if advice else text)

    def with_outcome_unknown(self) -> KraftlogError:
        """The same error for records a broker may have written (a failed produce whose
        request reached a leader without a definite answer): callers count these apart."""
        if self.outcome_unknown:
            return self
        return KraftlogError(self.code, self.detail, retriable=self.retriable, outcome_unknown=True)


def from_error_code(code: int, message: str, where: str) -> KraftlogError:
    """Wraps a per-partition error answer (the wire's number); `where` names the partition or
    broker. A number this version does not know keeps it in the name (``ERROR_CODE_<n>``)."""
    detail = f"{where}: {message}" if message else where
    return KraftlogError(error_code_name(code), detail)


# gRPC status codes that mean "the broker or the path to it is unwell": retry elsewhere
# or later. Anything else (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNIMPLEMENTED) is a bug
# or a limit that retrying will not fix.
_GRPC_RETRIABLE = {
    grpc.StatusCode.UNAVAILABLE: ErrorCode.BROKER_NOT_AVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ErrorCode.REQUEST_TIMED_OUT,
    grpc.StatusCode.CANCELLED: ErrorCode.BROKER_NOT_AVAILABLE,
    grpc.StatusCode.ABORTED: ErrorCode.BROKER_NOT_AVAILABLE,
}
_GRPC_FATAL = {
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorCode.MESSAGE_TOO_LARGE,
    grpc.StatusCode.INVALID_ARGUMENT: ErrorCode.INVALID_REQUEST,
}


def from_rpc_error(err: grpc.RpcError, address: str) -> KraftlogError:
    """Wraps a failed gRPC call to the broker at `address`."""
    status = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    message = f"broker {address}: gRPC {status.name}: {details}"
    if status in _GRPC_RETRIABLE:
        return KraftlogError(_GRPC_RETRIABLE[status], message)
    return KraftlogError(_GRPC_FATAL.get(status, ErrorCode.UNKNOWN_SERVER_ERROR), message, retriable=False)
