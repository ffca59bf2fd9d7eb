"""The client honours throttle_time_ms (KIP-219): after an answer that carries one it sends
nothing more to that broker until the time has passed, and every call carries its client id
in the ``kraftlog-client-id`` metadata. The fake broker never holds requests itself, so a gap
between requests can only be the client's own wait."""

from __future__ import annotations

import time

from data_plane.client import Consumer, Producer
from server_common.client_id import client_id_from_metadata
from tests.unit.client.fake_broker import FakeBroker

THROTTLE_MS = 400


class ThrottlingBroker(FakeBroker):
    """Answers every Produce and Fetch with a throttle time; notes when each arrived and
    answered, and the client id each call carried."""

    def __init__(self, *args, throttle_ms: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.throttle_ms = throttle_ms
        self.calls: list[tuple[str, float, float]] = []  # (method, arrived, answered)
        self.client_ids: set[str] = set()

    def _noted(self, method: str, answer, request, context):
        arrived = time.monotonic()
        self.client_ids.add(client_id_from_metadata(context.invocation_metadata()))
        response = answer(request, context)
        response.throttle_time_ms = self.throttle_ms
        self.calls.append((method, arrived, time.monotonic()))
        return response

    def Produce(self, request, context):
        return self._noted("Produce", super().Produce, request, context)

    def Fetch(self, request, context):
        return self._noted("Fetch", super().Fetch, request, context)

    def Metadata(self, request, context):
        self.client_ids.add(client_id_from_metadata(context.invocation_metadata()))
        return super().Metadata(request, context)

    def gaps_s(self, method: str) -> list[float]:
        """From each answer to the next request of ``method``."""
        calls = [c for c in self.calls if c[0] == method]
        return [later[1] - earlier[2] for earlier, later in zip(calls, calls[1:])]


def test_the_producer_waits_out_the_throttle_before_its_next_request():
    with ThrottlingBroker({"t": 1}, throttle_ms=THROTTLE_MS) as broker:
        with Producer(broker.address, linger_ms=0, client_id="my-producer") as producer:
            for i in range(3):
                producer.send("t", b"%d" % i).result(10)
        gaps = broker.gaps_s("Produce")
        assert len(gaps) == 2 and min(gaps) >= THROTTLE_MS / 1000 * 0.9, gaps
        assert broker.client_ids == {"my-producer"}


def test_the_fetching_consumer_waits_out_the_throttle_before_its_next_fetch():
    with ThrottlingBroker({"t": 1}, throttle_ms=THROTTLE_MS) as broker:
        with Producer(broker.address, linger_ms=0) as producer:
            for i in range(3):
                producer.send("t", b"%d" % i).result(10)
        broker.calls.clear()
        broker.client_ids.clear()
        with Consumer(broker.address, client_id="my-consumer", fetch_mode="fetch", fetch_max_wait_ms=10) as consumer:
            consumer.assign([("t", 0)])
            consumer.seek(("t", 0), 0)
            deadline = time.monotonic() + 5
            while len(broker.gaps_s("Fetch")) < 3 and time.monotonic() < deadline:
                consumer.poll(100)
        gaps = broker.gaps_s("Fetch")
        assert len(gaps) >= 3 and min(gaps) >= THROTTLE_MS / 1000 * 0.9, gaps
        assert broker.client_ids == {"my-consumer"}


def test_every_call_carries_the_default_client_id_when_none_is_given():
    with ThrottlingBroker({"t": 1}, throttle_ms=0) as broker:
        with Producer(broker.address, linger_ms=0) as producer:
            producer.send("t", b"x").result(10)
        assert broker.client_ids == {"kraftlog-producer"}
