"""Shared fixtures for the Spark tests: one kraftlog cluster and one SparkSession per session."""

from __future__ import annotations

import os
import sys

import pytest

from tests.cluster import local_cluster

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("spark-cluster"), controllers=1, brokers=1) as c:
        yield c


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from spark_source import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kraftlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.pollingDelay", "50ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0, headers: bool = False) -> None:
    """Writes values b"<p>-<i>" (i from `start`) with key b"k<i>" to every partition."""
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
                )
        producer.flush()
