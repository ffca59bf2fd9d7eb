"""The error vocabulary from the cores to the wire: `kraftlog.v1.ErrorCode` (proto/common.proto).

The same names and numbers as the proto enum, so that a code is carried unchanged from a
core's decision to a response field (`data_plane.broker.errors` converts, in one place). The
pure cores do not import the generated protobuf module (cores import nothing from shells);
a unit test checks this enum against the proto instead.
"""

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
