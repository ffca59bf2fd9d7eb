"""A broker forgets idle producer ids (Kafka's producer.id.expiration.ms) on a real process: a
broker that expires after 60 s idle, checked every 100 ms, and `kraftlog_producer_ids` on its
metrics endpoint. Idleness is measured from the batches' timestamps, so a producer whose
records carry a timestamp ten minutes old is idle at once, and one writing now is not: the
second is the negative control (it must be kept while the first goes). DeleteRecords past a
producer's only batch forgets it too, with no wait."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from data_plane.client import Admin, Producer
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_metrics import give_metrics_ports, metrics_port, scrape, value

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "pids"
BROKER_ARGS = ["--producer-id-expiration-ms", "60000", "--producer-id-expiration-check-interval-ms", "100"]
TEN_MINUTES_MS = 600_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("pids"), controllers=1, brokers=1, broker_args=BROKER_ARGS,
                       configure=give_metrics_ports) as c:
        c.create_topic(TOPIC, 1)
        yield c


def producer_ids(cluster: TestCluster) -> float | None:
    return value(scrape(metrics_port(cluster, "broker", 1)), "kraftlog_producer_ids")


def write_once(cluster: TestCluster, timestamp_ms: int) -> int:
    """One record from a new idempotent producer; answers its offset."""
    with Producer(cluster.bootstrap, acks="all") as producer:
        return producer.send(TOPIC, b"v", partition=0, timestamp_ms=timestamp_ms).result(30).offset


def test_an_idle_producer_is_forgotten_and_an_active_one_kept(cluster: TestCluster) -> None:
    write_once(cluster, int(time.time() * 1000) - TEN_MINUTES_MS)
    wait_for(lambda: producer_ids(cluster) == 0, 30, "the producer whose records are ten minutes old forgotten")
    with Producer(cluster.bootstrap, acks="all") as live:
        live.send(TOPIC, b"live", partition=0).result(30)
        wait_for(lambda: producer_ids(cluster) == 1, 30, "the live producer remembered")
        write_once(cluster, int(time.time() * 1000) - TEN_MINUTES_MS)  # expired at a check after the live one wrote
        wait_for(lambda: producer_ids(cluster) == 1, 30, "the second idle producer forgotten, the live one kept")
        live.send(TOPIC, b"again", partition=0).result(30)  # its sequence still follows on: nothing it knew was lost
        assert producer_ids(cluster) == 1


def test_deleting_the_records_of_a_producer_forgets_it_at_once(cluster: TestCluster) -> None:
    before = producer_ids(cluster)
    offset = write_once(cluster, int(time.time() * 1000))
    assert producer_ids(cluster) == before + 1  # written now: not idle
    with Admin(cluster.bootstrap) as admin:
        admin.delete_records((TOPIC, 0), offset + 1)
    assert producer_ids(cluster) == 0  # every producer's last batch lay below the new log start
