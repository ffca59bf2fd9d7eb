"""The link emulator's rules (chaos/link_rules.py): which packets they match, drops, delays with
jitter, reordering, and the strongest of several rules winning."""

from __future__ import annotations

import random

import pytest

from chaos.link_rules import LinkRule, RuleTable

A, B, C = "10.0.0.11", "10.0.0.12", "10.0.0.13"


def table(*rules: LinkRule, seed: int = 1) -> RuleTable:
    t = RuleTable(random.Random(seed))
    for i, rule in enumerate(rules):
        t.add(i, rule)
    return t


def test_no_rule_delivers_at_once_and_a_removed_rule_stops_acting() -> None:
    t = table(LinkRule(A, B, loss=1.0))
    assert t.decide(B, A) == 0.0 and t.decide(A, C) == 0.0
    assert t.decide(A, B) is None
    t.remove(0)
    assert t.decide(A, B) == 0.0


def test_a_delay_with_jitter_stays_within_its_bounds() -> None:
    t = table(LinkRule(A, None, delay_ms=200, jitter_ms=100))
    waits = [t.decide(A, B) for _ in range(1000)]
    assert all(0.2 <= w <= 0.3 for w in waits) and max(waits) - min(waits) > 0.05
    assert t.decide(B, A) == 0.0


def test_a_loss_share_drops_about_that_share() -> None:
    t = table(LinkRule(None, B, loss=0.25))
    dropped = sum(t.decide(A, B) is None for _ in range(4000))
    assert 800 < dropped < 1200


def test_reordering_delays_every_other_packet() -> None:
    t = table(LinkRule(A, B, delay_ms=50, reorder=True))
    assert [t.decide(A, B) for _ in range(4)] == [0.05, 0.0, 0.05, 0.0]


def test_a_drop_wins_and_otherwise_the_longest_delay() -> None:
    assert table(LinkRule(A, None, delay_ms=100), LinkRule(None, B, loss=1.0)).decide(A, B) is None
    assert table(LinkRule(A, None, delay_ms=100), LinkRule(None, B, delay_ms=300)).decide(A, B) == 0.3


@pytest.mark.parametrize("bad", [dict(loss=1.5), dict(delay_ms=-1), dict(jitter_ms=-5)])
def test_impossible_rules_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        LinkRule(A, B, **bad)
