"""The producer's decision for one batch's answer (data_plane/client/produce_answers.py),
driven directly: properties of the retry, back-off, timeout and sequence-reset rules over
any batch state, answer and time. The whole loop (accumulator, numbering, a leader with the
real sequence check) runs on these decisions in test_in_flight_ordering.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from data_plane.client.errors import RETRIABLE_CODES, KraftlogError
from data_plane.client.idempotence import OUTCOME_UNKNOWN_CODES
from data_plane.client.produce_answers import (
    Appended,
    BatchState,
    Complete,
    Fail,
    ResetSequence,
    Retry,
    RetryRules,
    backoff_ms,
    decide,
)
from server_common.errors import ErrorCode

CODES = [code for code in ErrorCode if code is not ErrorCode.NONE]
OUT_OF_ORDER = ErrorCode.OUT_OF_ORDER_SEQUENCE

rules_st = st.builds(
    RetryRules,
    retries=st.integers(0, 10),
    retry_backoff_ms=st.floats(1, 1_000),
    retry_backoff_max_ms=st.floats(1, 10_000),
    delivery_timeout_ms=st.floats(1, 200_000),
    idempotent=st.booleans(),
)
batch_st = st.builds(
    BatchState,
    topic=st.just("t"),
    partition=st.integers(0, 3),
    record_count=st.integers(1, 100),
    created_ms=st.floats(0, 1_000_000),
    attempts=st.integers(0, 12),
    outcome_unknown=st.booleans(),
    sent_behind_unresolved=st.booleans(),
    last_error=st.none(),
)
# the codes with rules of their own come up as often as all the others together
code_st = st.one_of(st.just(OUT_OF_ORDER), st.sampled_from(sorted(ErrorCode[name] for name in OUTCOME_UNKNOWN_CODES)), st.sampled_from(CODES))
error_st = st.one_of(
    code_st.map(lambda code: KraftlogError(code, "answered")),
    st.builds(lambda code, retriable: KraftlogError(code, "answered", retriable=retriable), code_st, st.booleans()),
)


def _now(batch: BatchState, elapsed: float) -> float:
    return batch.created_ms + elapsed


@given(batch_st, st.integers(0, 1 << 40), st.integers(-1, 1 << 40), st.floats(0, 300_000), rules_st, st.booleans())
def test_an_appended_batch_completes_at_the_offset_the_leader_named(batch, base, append_time, elapsed, rules, stopping) -> None:
    assert decide(batch, Appended(base, append_time), _now(batch, elapsed), rules, stopping=stopping) == Complete(base, append_time)


@given(st.integers(0, 30), rules_st)
def test_backoff_doubles_from_the_base_and_never_passes_the_cap(attempts, rules) -> None:
    wait = backoff_ms(attempts, rules)
    assert wait == min(rules.retry_backoff_ms * 2 ** attempts, rules.retry_backoff_max_ms)
    assert wait <= max(rules.retry_backoff_max_ms, 0) and wait <= backoff_ms(attempts + 1, rules)


@given(batch_st, error_st, st.floats(0, 300_000), rules_st, st.booleans())
def test_a_refused_batch_is_retried_only_with_attempts_and_time_left(batch, error, elapsed, rules, stopping) -> None:
    now = _now(batch, elapsed)
    decision = decide(batch, error, now, rules, stopping=stopping)
    assert not isinstance(decision, Complete)
    out_of_order = error.error is OUT_OF_ORDER and rules.idempotent
    retriable = error.retriable or out_of_order
    in_time = now + backoff_ms(batch.attempts, rules) < batch.created_ms + rules.delivery_timeout_ms
    may_retry = retriable and batch.attempts < rules.retries and in_time and not stopping
    assert isinstance(decision, (Retry, ResetSequence)) == may_retry
    if may_retry:
        assert decision.backoff_ms == backoff_ms(batch.attempts, rules)
        assert decision.error.code == error.code and decision.error.retriable
    elif retriable and not in_time:
        assert decision.error.code == "DELIVERY_TIMEOUT" and not decision.error.retriable
        assert f"last error: {error}" in decision.error.detail  # the cause stays visible
    else:
        assert (decision.error.code, decision.error.detail) == (error.code, error.detail)


@given(batch_st, error_st, st.floats(0, 300_000), rules_st)
def test_an_unknown_outcome_is_remembered_and_only_out_of_order_clears_it(batch, error, elapsed, rules) -> None:
    decision = decide(batch, error, _now(batch, elapsed), rules)
    if isinstance(decision, ResetSequence):
        return  # nothing of the batch is in the log: renumbered, it starts afresh
    if error.error is OUT_OF_ORDER and rules.idempotent:
        assert decision.outcome_unknown is False  # the leader says it appended nothing
    else:
        assert decision.outcome_unknown == (batch.outcome_unknown or error.code in OUTCOME_UNKNOWN_CODES)


@given(batch_st, st.booleans(), st.floats(0, 300_000), rules_st, st.booleans())
def test_out_of_order_resets_the_sequence_exactly_when_the_batch_went_first(batch, retriable_flag, elapsed, rules, stopping) -> None:
    """OUT_OF_ORDER_SEQUENCE recovery. Behind an unresolved batch the refusal may mean the batch
    overtook it: retried in its turn under its numbers. Sent first, the leader lost track of the
    producer id: the partition resets, so the batch and everything after it are renumbered in
    their order, never re-sent under the old numbers behind later batches (which once wrote
    records out of order). A broker that marks the answer not retriable changes nothing."""
    error = KraftlogError(OUT_OF_ORDER, "gap", retriable=retriable_flag)
    decision = decide(batch, error, _now(batch, elapsed), rules, stopping=stopping)
    if not rules.idempotent:  # no sequences: an ordinary answer, not retriable by default
        assert not isinstance(decision, ResetSequence) and not getattr(decision, "reset_sequence", False)
        return
    first = not batch.sent_behind_unresolved
    match decision:
        case ResetSequence():
            assert first
        case Retry():
            assert not first and decision.not_appended
        case Fail():
            assert decision.reset_sequence == first
        case _:
            raise AssertionError(decision)


def test_the_first_unresolved_batch_refused_out_of_order_resets_its_partition() -> None:
    """The case that once re-sent records out of order, spelled out."""
    rules = RetryRules(retries=5, retry_backoff_ms=100, retry_backoff_max_ms=1_000, delivery_timeout_ms=120_000, idempotent=True)
    first = BatchState("t", 0, 3, created_ms=0, attempts=0, outcome_unknown=True, sent_behind_unresolved=False)
    later = BatchState("t", 0, 3, created_ms=0, attempts=0, outcome_unknown=False, sent_behind_unresolved=True)
    gap = KraftlogError(OUT_OF_ORDER, "expected sequence 0")
    assert isinstance(decide(first, gap, 10, rules), ResetSequence)
    retry = decide(later, gap, 10, rules)
    assert isinstance(retry, Retry) and (retry.backoff_ms, retry.outcome_unknown, retry.not_appended) == (100, False, True)


def test_the_retriable_codes_are_the_clients() -> None:
    """The decision reads retriability from the error, which reads the client's table."""
    assert KraftlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER).retriable and "NOT_LEADER_OR_FOLLOWER" in RETRIABLE_CODES
    assert not KraftlogError(OUT_OF_ORDER).retriable
