"""Shared fixtures for the Spark tests: one kraftlog cluster and one SparkSession per session."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cluster import local_cluster
from tests.spark.session import start_session

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


# Brokers look for segments to delete every 100 ms, so retention tests wait briefly.
RETENTION_CHECK_INTERVAL_MS = 100


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    broker_args = ["--retention-check-interval-ms", str(RETENTION_CHECK_INTERVAL_MS)]
    with local_cluster(tmp_path_factory.mktemp("spark-cluster"), controllers=1, brokers=1, broker_args=broker_args) as c:
        yield c


@pytest.fixture(scope="session")
def spark():
    session = start_session("kraftlog-tests")
    yield session
    session.stop()


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    per_partition: int,
    start: int = 0,
    headers: bool = False,
    timestamp_ms: Callable[[int, int], int] | None = None,
) -> None:
    """Writes values b"<p>-<i>" (i from `start`) with key b"k<i>" to every partition p, with
    timestamp `timestamp_ms(p, i)` when given (else the producer's clock)."""
    from data_plane.client import Producer

    with Producer(bootstrap, acks="all") as producer:
        for p in range(partitions):
            for i in range(start, start + per_partition):
                producer.send(
                    topic,
                    f"{p}-{i}".encode(),
                    key=f"k{i}".encode(),
                    partition=p,
                    headers=[("h", f"{i}".encode())] if headers else None,
                    timestamp_ms=timestamp_ms(p, i) if timestamp_ms else None,
                )
        producer.flush()


def load(reader, **options):
    """`reader` (spark.read or spark.readStream) of format kraftlog with `options`, loaded."""
    reader = reader.format("kraftlog")
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


def run_available_now(df, checkpoint, on_batch) -> None:
    """Runs a Trigger.AvailableNow query of `df` into foreachBatch(on_batch) to its end;
    raises what the query raised."""
    query = (
        df.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
    assert query.exception() is None
