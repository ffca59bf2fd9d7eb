import pytest

from server_common.waiting import wait_for
from tests.spark.conftest import load, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_batch_read_every_record(spark, cluster):
    cluster.create_topic("batch3", 3, 1)
    produce(cluster.bootstrap, "batch3", 3, 50, headers=True)
    df = load(spark.read, bootstrap=cluster.bootstrap, subscribe="batch3", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = df.collect()
    assert len(rows) == 150
    by_part = {}
    for r in rows:
        assert r.topic == "batch3"
        assert r.value == f"{r.partition}-{r.offset}".encode()
        assert r.key == f"k{r.offset}".encode()
        assert [(h.key, h.value) for h in r.headers] == [("h", f"{r.offset}".encode())]
        assert r.timestampType == 0 and r.timestamp is not None
        by_part.setdefault(r.partition, []).append(r.offset)
    assert {p: sorted(o) for p, o in by_part.items()} == {p: list(range(50)) for p in range(3)}


def test_batch_offsets_and_min_partitions(spark, cluster):
    df = load(
        spark.read,
        **{"kraftlog.bootstrap.servers": cluster.bootstrap},
        assign='{"batch3":[0,2]}',
        startingOffsets='{"batch3":{"0":10,"2":-2}}',
        endingOffsets='{"batch3":{"0":20,"2":-1}}',
        minPartitions=6,
    )
    assert df.rdd.getNumPartitions() >= 6
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(2, o) for o in range(50)]


@pytest.mark.parametrize(
    "option,value,needle",
    [("bogusOption", "1", "bogusOption"), ("minPartitions", "zero", "minPartitions"), ("startingOffsets", "{bad", "startingOffsets")],
)
def test_bad_option_named(spark, cluster, option, value, needle):
    with pytest.raises(Exception, match="(?i)" + needle):  # Spark lower-cases option names
        load(spark.read, bootstrap=cluster.bootstrap, subscribe="batch3", **{option: value}).collect()


def test_write_then_read(spark, cluster):
    cluster.create_topic("written", 2, 1)
    src = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(40)], "key string, value string, partition int"
    )
    src.write.format("kraftlog").mode("append").option("bootstrap", cluster.bootstrap).option("topic", "written").save()
    rows = load(spark.read, bootstrap=cluster.bootstrap, subscribe="written").collect()
    assert sorted((r.key, r.value, r.partition) for r in rows) == sorted(
        (f"k{i}".encode(), f"v{i}".encode(), i % 2) for i in range(40)
    )


def test_records_cross_between_kafka_clients_and_spark(spark, cluster):
    """Through the Kafka listener (docs/kafka.md): librdkafka's records (keys, a null key,
    empty and null values, repeated and null-valued headers, its own timestamps) read by a
    batch read with every field as written; the sink's rows read by a librdkafka consumer.
    (kraftlog's client to a Kafka consumer: tests/integration/test_kafka_clients.py.)"""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster.create_topic("from-kafka", 2, 1)
    t0 = 1_700_000_000_000
    sent = [
        (i % 2, None if i % 7 == 0 else b"k%d" % i, b"" if i % 5 == 0 else b"v%d" % i,
         [("h", b"%d" % i), ("h", b"again"), ("nothing", None)] if i % 3 else [], t0 + 1000 * i)
        for i in range(40)
    ]
    sent.append((0, b"tombstone", None, [], t0))
    written = {}
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all", "linger.ms": 5})
    for partition, key, value, headers, ts in sent:
        producer.produce("from-kafka", value, key, partition, timestamp=ts, headers=headers,
                         on_delivery=lambda err, msg, record=(key, value, headers, ts): written.__setitem__(
                             (msg.partition(), msg.offset()), record) if err is None else None)
    assert producer.flush(30) == 0
    del producer
    df = load(spark.read, bootstrap=cluster.bootstrap, subscribe="from-kafka", includeHeaders="true")
    rows = df.selectExpr("partition", "offset", "key", "value", "headers", "unix_millis(timestamp) AS ts", "timestampType").collect()
    assert {(r.partition, r.offset): (r.key, r.value, [(h.key, h.value) for h in r.headers], r.ts) for r in rows} == written
    assert {r.timestampType for r in rows} == {0}  # CreateTime, as the producer stamped them

    cluster.create_topic("from-spark", 1, 1)
    rows_out = [(f"k{i}", f"v{i}", [("h", f"{i}".encode()), ("e", b"")]) for i in range(30)]
    src = spark.createDataFrame(rows_out, "key string, value string, headers array<struct<key:string,value:binary>>").coalesce(1)
    src.write.format("kraftlog").mode("append").option("bootstrap", cluster.bootstrap).option("topic", "from-spark").save()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "spark-cross",
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition("from-spark", 0, confluent_kafka.OFFSET_BEGINNING)])
        got: list = []
        wait_for(lambda: got.extend(m for m in consumer.consume(100, 0.5) if m.error() is None) or len(got) >= len(rows_out), 30,
                 "the sink's rows through the Kafka listener")
    finally:
        consumer.close()
    assert [(m.key(), m.value(), m.headers()) for m in got] == [(k.encode(), v.encode(), h) for k, v, h in rows_out]
    assert [m.offset() for m in got] == list(range(len(rows_out)))
