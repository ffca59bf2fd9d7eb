"""What the group and transaction coordinators share, on a floor below the broker, the groups
and the transactions packages, so that none of the three imports another for it: the refusal
a coordinator answers with, and the rules of a coordinator's writes to its internal partition, and the one loop of both
coordinators' Describe calls.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from server_common.errors import ErrorCode

State = TypeVar("State")
Entry = TypeVar("Entry")

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


def describe_each(keys: Iterable[str], look_up: Callable[[str], State | None], entry: Callable[[str, State], Entry],
                  refused: Callable[[str, ErrorCode, str], Entry], unknown: Callable[[str], Entry]) -> list[Entry]:
    """A Describe call's answers, one per key in the order asked: ``entry`` of the state the
    coordinator holds, ``refused`` when ``look_up`` raises `Refused` (the caller may not see
    it, this broker does not coordinate it, or not yet), ``unknown`` when there is none."""
    answers = []
    for key in keys:
        try:
            state = look_up(key)
        except Refused as refusal:
            answers.append(refused(key, refusal.code, refusal.message))
            continue
        answers.append(unknown(key) if state is None else entry(key, state))
    return answers
