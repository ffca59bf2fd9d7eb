"""What the group and transaction coordinators share, on a floor below the broker, the groups
and the transactions packages, so that none of the three imports another for it: the refusal
a coordinator answers with, and the rules of a coordinator's writes to its internal partition.
Pure: no I/O.
"""

from __future__ import annotations

from server_common.errors import ErrorCode

# A coordinator write not covered by the HW within this is outcome-unknown: its shard reloads.
WRITE_TIMEOUT_MS = 5000
# The answers after which a coordinator's write may or may not be in the log: the shard
# reloads from the log rather than trust its memory.
OUTCOME_UNKNOWN = (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_LEADER_OR_FOLLOWER)


class Refused(Exception):
    """A coordinator's refusal: ``code`` is the answer, ``message`` says what to do next."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message
