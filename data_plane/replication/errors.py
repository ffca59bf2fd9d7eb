"""Error codes the replication core answers with.

A subset of `kraftlog.v1.ErrorCode` (proto/common.proto) with the same names and numbers,
so the broker shell can put `code.value` straight into a response without a mapping table.
The pure core does not import the generated protobuf module (cores import nothing from
shells); a unit test checks every member against the proto instead.
"""

from enum import IntEnum


class ErrorCode(IntEnum):
    """Per-partition answers. Names and numbers must match proto/common.proto."""

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_OUT_OF_RANGE = 4
    FENCED_LEADER_EPOCH = 7
    UNKNOWN_LEADER_EPOCH = 8
    NOT_ENOUGH_REPLICAS = 9
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 10
    REQUEST_TIMED_OUT = 11
    OUT_OF_ORDER_SEQUENCE = 22
    INVALID_PRODUCER_EPOCH = 24
    INELIGIBLE_REPLICA = 26
    INVALID_UPDATE_VERSION = 27
    INVALID_REQUIRED_ACKS = 37
