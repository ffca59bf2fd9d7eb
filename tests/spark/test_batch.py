import pytest

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
