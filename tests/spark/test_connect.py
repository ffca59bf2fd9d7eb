"""The source and the sink through Spark Connect: a Connect server (its own JVM, from the
PySpark package) and a Connect client in this process that registers the data source and
runs a streaming query from one topic into another, then reads the result in batch."""

import json

import pytest

from spark_source import register
from tests.spark.conftest import produce
from tests.spark.spark_processes import connect_server

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _connect_client_missing() -> str | None:
    from pyspark.sql.connect.utils import check_dependencies

    try:
        check_dependencies()
    except ImportError as err:
        return str(err)
    return None


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    missing = _connect_client_missing()
    if missing:
        pytest.skip(f"the Spark Connect client needs pyspark[connect]: {missing}")
    # The Connect session class itself, not SparkSession.builder.remote(): that one switches
    # the whole process to Connect mode, and the other Spark tests share this process.
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with connect_server(tmp_path_factory.mktemp("spark-connect")) as url:
        session = ConnectSession.builder.remote(url).getOrCreate()
        try:
            yield session
        finally:
            session.stop()


def test_stream_topic_to_topic_through_connect(connect, cluster, tmp_path):
    cluster.create_topic("connect-src", 2, 1)
    cluster.create_topic("connect-dst", 2, 1)
    produce(cluster.bootstrap, "connect-src", 2, 20)
    register(connect)  # the client pickles the class; the server's Python workers import spark_source

    query = (
        connect.readStream.format("kraftlog")
        .option("bootstrap", cluster.bootstrap)
        .option("subscribe", "connect-src")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 15)
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format("kraftlog")
        .option("bootstrap", cluster.bootstrap)
        .option("topic", "connect-dst")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(240), "the availableNow query did not finish in 240 s"
    assert query.exception() is None
    assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {"connect-src": {"0": 20, "1": 20}}

    rows = connect.read.format("kraftlog").option("bootstrap", cluster.bootstrap).option("subscribe", "connect-dst").load().collect()
    assert sorted((r.partition, r.key, r.value) for r in rows) == sorted(
        (p, f"k{i}".encode(), f"{p}-{i}".encode()) for p in range(2) for i in range(20)
    )


def test_bad_option_is_named_through_connect(connect, cluster):
    """Errors raised by the source in the server reach the Connect client with their message."""
    reader = connect.read.format("kraftlog").option("bootstrap", cluster.bootstrap).option("subscribe", "connect-src")
    with pytest.raises(Exception, match="(?i)maxOffsetsPerTrigger.*streaming queries only"):
        reader.option("maxOffsetsPerTrigger", 5).load().collect()
