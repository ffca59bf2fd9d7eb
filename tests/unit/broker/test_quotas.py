"""The broker's quota core: Kafka's precedence of quota entities, the sliding-window rate and
the throttle time it earns."""

from __future__ import annotations

import pytest

from data_plane.broker.quotas import QuotaAccounts, RateSensor, resolve_quota, user_name

KEY = "producer_byte_rate"

# Every entity a quota may sit on, most specific first, each with a distinct value.
ALL_LEVELS = {
    ("alice", "app"): 1.0,
    ("alice", ""): 2.0,
    ("alice", None): 3.0,
    ("", "app"): 4.0,
    ("", ""): 5.0,
    ("", None): 6.0,
    (None, "app"): 7.0,
    (None, ""): 8.0,
}


def quotas_from(levels: dict) -> dict:
    return {entity: {KEY: value} for entity, value in levels.items()}


def test_each_level_beats_every_later_one():
    """Take the most specific level away one at a time: the next one in Kafka's order answers."""
    levels = dict(ALL_LEVELS)
    for expected in range(1, 9):
        quota = resolve_quota(quotas_from(levels), KEY, "alice", "app")
        assert quota is not None and quota.bound == float(expected), levels
        del levels[next(iter(levels))]
    assert resolve_quota(quotas_from(levels), KEY, "alice", "app") is None


@pytest.mark.parametrize("entity, sensor", [
    (("alice", "app"), (KEY, "alice", "app")),
    (("alice", None), (KEY, "alice", None)),  # every client id of alice together
    (("", None), (KEY, "alice", None)),  # the default user: each user on its own
    ((None, "app"), (KEY, None, "app")),  # every user with client id app together
    ((None, ""), (KEY, None, "app")),
])
def test_the_winning_entity_says_whose_usage_is_shared(entity, sensor):
    quota = resolve_quota(quotas_from({entity: 10.0}), KEY, "alice", "app")
    assert quota is not None and quota.sensor == sensor


def test_an_override_of_another_user_or_client_does_not_apply():
    assert resolve_quota(quotas_from({("bob", None): 1.0, (None, "other"): 2.0}), KEY, "alice", "app") is None


def test_a_client_without_a_client_id_gets_only_the_default():
    quotas = quotas_from({(None, ""): 8.0, ("", ""): 5.0})
    assert resolve_quota(quotas, KEY, "alice", "").bound == 5.0  # default user + default client id
    assert resolve_quota(quotas_from({(None, ""): 8.0}), KEY, "ANONYMOUS", "").bound == 8.0


def test_other_quota_types_are_resolved_on_their_own():
    quotas = {("alice", None): {"request_rate": 1.0}, (None, ""): {KEY: 8.0}}
    assert resolve_quota(quotas, KEY, "alice", "app").bound == 8.0
    assert resolve_quota(quotas, "request_rate", "alice", "app").bound == 1.0


def test_user_name_strips_the_principal_type():
    assert user_name("User:alice") == "alice"
    assert user_name("User:ANONYMOUS") == "ANONYMOUS"
    assert user_name("CN=broker-1") == "CN=broker-1"


def test_rate_counts_at_least_samples_minus_one_windows():
    sensor = RateSensor(samples=11, window_ms=1000)
    sensor.record(10_000, now_ms=0)
    assert sensor.rate(now_ms=0) == pytest.approx(1000.0)  # 10,000 over 10 s, not over 0 ms
    sensor.record(10_000, now_ms=20_000)
    assert sensor.rate(now_ms=20_000) == pytest.approx(1000.0)  # the first sample has expired


def test_rate_spans_the_live_samples_once_they_cover_more_than_the_minimum():
    sensor = RateSensor(samples=3, window_ms=1000)
    for t in (0, 1000, 2000):
        sensor.record(500, now_ms=t)
    assert sensor.rate(now_ms=2500) == pytest.approx(1500 / 2.5)


def test_throttle_is_kafkas_formula_where_no_sample_expires_meanwhile():
    sensor = RateSensor(samples=11, window_ms=1000)
    for t in range(5000, 15_001, 1000):
        sensor.record(1200, now_ms=t)  # 13,200 over the 10 s span: 1320/s
    rate, span = sensor.rate(now_ms=15_000), sensor.span_ms(now_ms=15_000)
    kafka_ms = (rate - 1250) / 1250 * span  # 560 ms: the oldest sample lives 1 s more
    assert sensor.throttle_ms(1250, now_ms=15_000, max_ms=60_000) == pytest.approx(kafka_ms, abs=1)
    assert sensor.throttle_ms(2000, now_ms=15_000, max_ms=60_000) == 0


def test_throttle_ends_when_an_expiring_sample_brings_the_rate_down():
    """One large sample: once it expires the rate is within the quota at once, long before
    Kafka's formula (which assumes the total stays) would let the client go."""
    sensor = RateSensor(samples=11, window_ms=1000)
    sensor.record(100_000, now_ms=0)
    sensor.record(1_000, now_ms=10_500)
    throttle = sensor.throttle_ms(1000, now_ms=10_500, max_ms=60_000)
    assert throttle == 500  # the first sample expires at 11,000
    assert sensor.rate(now_ms=10_500 + throttle) <= 1000


def test_throttle_is_capped():
    sensor = RateSensor(samples=11, window_ms=1000)
    sensor.record(10**9, now_ms=0)
    assert sensor.throttle_ms(1000, now_ms=0, max_ms=11_000) == 11_000


@pytest.mark.parametrize("seed", range(20))
def test_after_the_throttle_the_sensor_accepts_and_not_a_millisecond_earlier(seed):
    import random

    rng = random.Random(seed)
    sensor = RateSensor(samples=5, window_ms=200)
    now = 0.0
    for _ in range(rng.randrange(1, 30)):
        now += rng.uniform(0, 150)
        sensor.record(rng.uniform(0, 5000), now_ms=now)
    bound = rng.uniform(1000, 20_000)
    throttle = sensor.throttle_ms(bound, now_ms=now, max_ms=10**9)
    probe = RateSensor(sensor.samples, sensor.window_ms, list(sensor.starts_ms), list(sensor.totals))
    assert probe.rate(now + throttle) <= bound * 1.001
    if throttle > 1:
        probe = RateSensor(sensor.samples, sensor.window_ms, list(sensor.starts_ms), list(sensor.totals))
        assert probe.rate(now + throttle - 2) > bound


def test_a_client_that_waits_out_its_throttles_keeps_to_the_quota():
    """Simulated client: sends 10 KB whenever it is allowed to; over 60 s its rate is the quota's."""
    accounts = QuotaAccounts(samples=11, window_ms=1000)
    quota = resolve_quota(quotas_from({(None, ""): 20_000.0}), KEY, "u", "c")
    now = sent = 0.0
    while now < 60_000:
        throttle = accounts.record(quota, 10_000, now)
        sent += 10_000
        now += max(throttle, 1)
    # the first 10 s may burst (samples - 1 windows of credit), the rest holds the quota
    assert sent / 60 == pytest.approx(20_000, rel=0.2)
    assert sent <= 20_000 * 70


def test_mute_lasts_the_throttle_time():
    accounts = QuotaAccounts()
    accounts.mute(("u", "c"), 500, now_ms=1000)
    assert accounts.muted_for_ms(("u", "c"), now_ms=1200) == 300
    assert accounts.muted_for_ms(("u", "c"), now_ms=1500) == 0
    assert accounts.muted_for_ms(("v", "c"), now_ms=1200) == 0
