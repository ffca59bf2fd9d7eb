"""Client quota accounting on a broker (docs/quotas.md): which quota applies to a client, how
fast it has been going, and how long it must wait. Pure: time comes in as ``now_ms``.

Kafka's model (KIP-13, KIP-55, KIP-124, KIP-219):
- A quota is looked up per quota type in a fixed order of entities, most specific first
  (``QUOTA_PRECEDENCE``): user and client id, user and default client id, user alone,
  default user and client id, default user and default client id, default user alone, client
  id alone, default client id alone. The first entity holding a value of that type wins.
- The entity that wins also says who shares the usage: the rate is measured per
  (user, client id) where the entity names both dimensions, per user where it names only the
  user (every client id of that user together), per client id where it names only the
  client id (every user with that client id together). A default entity gives each user
  (client id) its own measure with the default's value.
- The rate is measured over ``samples`` windows of ``window_ms`` (Kafka's
  ``quota.window.num`` = 11 and ``quota.window.size.seconds`` = 1): the total of the samples
  not yet expired over the time they span, counted as at least ``samples - 1`` whole windows
  so that a client's first request is not judged over a few milliseconds.
- Over the quota, the throttle time is the time until the measured rate is back at the
  quota if the client sends nothing meanwhile: Kafka's ``(rate - quota) / quota * span``
  where no sample expires in between, shorter where one does (Kafka's formula ignores the
  expiry and so keeps a client waiting after its rate is back under the quota). Bounded by
  the whole measured window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from metadata_quorum.image import QuotaEntity

QUOTA_WINDOW_SAMPLES_DEFAULT = 11
QUOTA_WINDOW_MS_DEFAULT = 1000
SENSOR_SWEEP_INTERVAL_MS = 10_000
ANY = object()  # in QUOTA_PRECEDENCE: the client's own name in that dimension

# (user, client id) of each entity a quota may sit on, in the order they are tried: ANY is
# the client's own name, "" the default, None a dimension the entity does not name.
QUOTA_PRECEDENCE: tuple[tuple[object, object], ...] = (
    (ANY, ANY),
    (ANY, ""),
    (ANY, None),
    ("", ANY),
    ("", ""),
    ("", None),
    (None, ANY),
    (None, ""),
)

SensorKey = tuple[str, "str | None", "str | None"]  # (quota key, user or None, client id or None)


def user_name(principal: str) -> str:
    """The user a quota entity names for a principal: ``User:alice`` -> ``alice``."""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else principal


@dataclass(frozen=True, slots=True)
class AppliedQuota:
    """The quota that applies to a client for one quota type, and whose usage it measures."""

    bound: float
    sensor: SensorKey


def resolve_quota(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str) -> AppliedQuota | None:
    """The quota of type ``key`` for a client (Kafka's precedence), or None when no entity
    that matches it holds one. Specific names are never empty (an empty name is a default),
    so a client with no client id matches only the client-id default."""
    for user_part, client_part in QUOTA_PRECEDENCE:
        entity = (user if user_part is ANY else user_part, client_id if client_part is ANY else client_part)
        if (user_part is ANY and not user) or (client_part is ANY and not client_id):
            continue
        values = quotas.get(entity)
        if values is not None and key in values:
            sensor = (key, None if user_part is None else user, None if client_part is None else client_id)
            return AppliedQuota(values[key], sensor)
    return None


@dataclass(slots=True)
class RateSensor:
    """A value per second over sliding windows (Kafka's Rate over a SampledStat)."""

    samples: int
    window_ms: int
    starts_ms: list[float] = field(default_factory=list)  # start of each live sample, oldest first
    totals: list[float] = field(default_factory=list)
    last_record_ms: float = 0.0

    def __post_init__(self) -> None:
        assert self.samples >= 2 and self.window_ms > 0, (self.samples, self.window_ms)

    def record(self, value: float, now_ms: float) -> None:
        self._expire(now_ms)
        if not self.starts_ms or now_ms >= self.starts_ms[-1] + self.window_ms:
            self.starts_ms.append(now_ms)
            self.totals.append(0.0)
        self.totals[-1] += value
        self.last_record_ms = now_ms

    def span_ms(self, now_ms: float) -> float:
        """The time the rate is measured over: since the oldest live sample began, at least
        ``samples - 1`` whole windows."""
        oldest = self.starts_ms[0] if self.starts_ms else now_ms
        return max(now_ms - oldest, (self.samples - 1) * self.window_ms)

    def rate(self, now_ms: float) -> float:
        """Per second, over the live samples."""
        self._expire(now_ms)
        return sum(self.totals) * 1000.0 / self.span_ms(now_ms)

    def throttle_ms(self, bound: float, now_ms: float, max_ms: float) -> int:
        """How long until this sensor measures at most ``bound`` per second, if nothing more
        is recorded meanwhile (0: it does now), at most ``max_ms``. Between two sample
        expiries the total stays and the span grows, so the rate falls; at an expiry it drops.
        Where no sample expires on the way this is Kafka's ``(rate - bound) / bound x span``."""
        self._expire(now_ms)
        assert bound > 0, bound
        full_ms = self.samples * self.window_ms
        floor_ms = (self.samples - 1) * self.window_ms
        total = sum(self.totals)
        earliest_ms = now_ms  # the interval in which sample ``index`` is the oldest starts here
        for index, start in enumerate(self.starts_ms):
            needed_ms = total * 1000.0 / bound  # the span at which ``total`` is within the bound
            at = earliest_ms if needed_ms <= floor_ms else max(earliest_ms, start + needed_ms)
            if at < start + full_ms:  # reached before this sample expires
                return int(min(math.ceil(at - now_ms), max_ms))
            total -= self.totals[index]
            earliest_ms = start + full_ms
        return int(min(math.ceil(earliest_ms - now_ms), max_ms))  # only once every sample has expired

    def _expire(self, now_ms: float) -> None:
        full_ms = self.samples * self.window_ms
        while self.starts_ms and now_ms - self.starts_ms[0] >= full_ms:
            self.starts_ms.pop(0)
            self.totals.pop(0)


class QuotaAccounts:
    """Every client's sensors on one broker, and the time until which each client is muted
    (KIP-219: the broker answers at once with the throttle time, then holds the client's
    next requests until it has passed)."""

    def __init__(self, samples: int = QUOTA_WINDOW_SAMPLES_DEFAULT, window_ms: int = QUOTA_WINDOW_MS_DEFAULT) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._sensors: dict[SensorKey, RateSensor] = {}
        self._muted_until_ms: dict[tuple[str, str], float] = {}
        self._last_sweep_ms = 0.0

    @property
    def max_throttle_ms(self) -> float:
        return float(self.samples * self.window_ms)

    def record(self, quota: AppliedQuota, value: float, now_ms: float) -> int:
        """Count ``value`` against ``quota``; returns the throttle time it earns (ms)."""
        self._sweep(now_ms)
        sensor = self._sensors.get(quota.sensor)
        if sensor is None:
            sensor = self._sensors[quota.sensor] = RateSensor(self.samples, self.window_ms)
        sensor.record(value, now_ms)
        return sensor.throttle_ms(quota.bound, now_ms, self.max_throttle_ms)

    def mute(self, client: tuple[str, str], throttle_ms: int, now_ms: float) -> None:
        """Hold ``client``'s next requests until ``throttle_ms`` from now."""
        until = now_ms + throttle_ms
        if until > self._muted_until_ms.get(client, 0.0):
            self._muted_until_ms[client] = until

    def muted_for_ms(self, client: tuple[str, str], now_ms: float) -> float:
        """How much longer ``client`` is muted (0: not)."""
        until = self._muted_until_ms.get(client)
        if until is None:
            return 0.0
        if until <= now_ms:
            del self._muted_until_ms[client]
            return 0.0
        return until - now_ms

    def _sweep(self, now_ms: float) -> None:
        """Forget sensors idle for two whole windows and mutes long over: memory stays
        proportional to the clients seen lately."""
        if now_ms - self._last_sweep_ms < SENSOR_SWEEP_INTERVAL_MS:
            return
        self._last_sweep_ms = now_ms
        idle_ms = 2 * self.max_throttle_ms
        self._sensors = {k: s for k, s in self._sensors.items() if now_ms - s.last_record_ms < idle_ms}
        self._muted_until_ms = {k: t for k, t in self._muted_until_ms.items() if t > now_ms}
