"""The one error vocabulary of kraftlog, from the cores to the wire and back: `kraftlog.v1.ErrorCode`
(proto/common.proto), as a pure enum every layer may import.

The same names and numbers as the proto enum, so that a code is carried unchanged from a
core's decision to a response field. Conversion to and from the wire happens at the service
edges (``data_plane.partition_errors``, the controller's and coordinators' services) and in the
client's stub layer (``data_plane.client.errors``); everywhere else a code is an `ErrorCode`.
The pure cores do not import the generated protobuf module, so this module does not either;
a unit test checks this enum against the proto instead, and ``tests/unit/test_error_type.py``
that no product module names the protobuf constants.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Per-partition and per-request answers. Names and numbers must match proto/common.proto."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = 1
    NOT_LEADER_OR_FOLLOWER = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_OUT_OF_RANGE = 4
    CORRUPT_MESSAGE = 5
    MESSAGE_TOO_LARGE = 6
    FENCED_LEADER_EPOCH = 7
    UNKNOWN_LEADER_EPOCH = 8
    NOT_ENOUGH_REPLICAS = 9
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 10
    REQUEST_TIMED_OUT = 11
    STORAGE_ERROR = 12
    NOT_CONTROLLER = 13
    TOPIC_ALREADY_EXISTS = 14
    INVALID_TOPIC = 15
    INVALID_PARTITIONS = 16
    INVALID_REPLICATION_FACTOR = 17
    INVALID_CONFIG = 18
    STALE_BROKER_EPOCH = 19
    BROKER_NOT_REGISTERED = 20
    INVALID_REQUEST = 21
    OUT_OF_ORDER_SEQUENCE = 22
    DUPLICATE_SEQUENCE = 23
    INVALID_PRODUCER_EPOCH = 24
    UNKNOWN_PRODUCER_ID = 25
    INELIGIBLE_REPLICA = 26
    INVALID_UPDATE_VERSION = 27
    LEADER_NOT_AVAILABLE = 28
    REASSIGNMENT_IN_PROGRESS = 29
    NO_REASSIGNMENT_IN_PROGRESS = 30
    ELECTION_NOT_NEEDED = 31
    PREFERRED_LEADER_NOT_AVAILABLE = 32
    DUPLICATE_BROKER_REGISTRATION = 33
    INVALID_TIMESTAMP = 34
    REPLICA_NOT_AVAILABLE = 35
    BROKER_NOT_AVAILABLE = 36
    INVALID_REQUIRED_ACKS = 37
    OFFSET_NOT_AVAILABLE = 38
    INVALID_RECORD = 39
    COORDINATOR_NOT_AVAILABLE = 40
    NOT_COORDINATOR = 41
    COORDINATOR_LOAD_IN_PROGRESS = 42
    UNKNOWN_MEMBER_ID = 43
    FENCED_MEMBER_EPOCH = 44
    STALE_MEMBER_EPOCH = 45
    GROUP_ID_NOT_FOUND = 46
    NON_EMPTY_GROUP = 47
    INVALID_GROUP_ID = 48
    UNRELEASED_INSTANCE_ID = 49
    GROUP_MAX_SIZE_REACHED = 50
    UNSUPPORTED_ASSIGNOR = 51
    OFFSET_METADATA_TOO_LARGE = 52
    INVALID_COMMIT_OFFSET = 53
    GROUP_SUBSCRIBED_TO_TOPIC = 54
    ILLEGAL_GENERATION = 55
    REBALANCE_IN_PROGRESS = 56
    INCONSISTENT_GROUP_PROTOCOL = 57
    MEMBER_ID_REQUIRED = 58
    TOPIC_AUTHORIZATION_FAILED = 60
    GROUP_AUTHORIZATION_FAILED = 61
    CLUSTER_AUTHORIZATION_FAILED = 62
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 63
    AUTHENTICATION_FAILED = 64
    INVALID_TXN_STATE = 80
    PRODUCER_FENCED = 81
    CONCURRENT_TRANSACTIONS = 82
    INVALID_PRODUCER_ID_MAPPING = 83
    INVALID_TRANSACTION_TIMEOUT = 84
    TRANSACTIONAL_ID_NOT_FOUND = 85
    UNSTABLE_OFFSET_COMMIT = 88
    BROKER_CAPACITY_EXCEEDED = 100


def error_code_name(code: int) -> str:
    """The ErrorCode name for a wire value; ``ERROR_CODE_<n>`` for a value this version does
    not know. A peer on a newer version may send such a code, and naming it must never raise
    (a log line that crashes its caller turns a refusal into an outage)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_CODE_{code}"


def from_wire_code(code: int) -> ErrorCode:
    """An answer's ``error_code`` field as the enum; a number this version does not know is an
    unknown server error (its number stays visible through ``error_code_name`` where logged)."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
