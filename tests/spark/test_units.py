"""Driver-side logic without a cluster or a SparkSession."""

import json
import logging

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_plane import record_batch
from data_plane.client.consumer import cut_batch
from data_plane.client.partitioner import partition_for_key
from data_plane.client.producer_batch import RECORD_OVERHEAD_BYTES
from data_plane.client.producer_options import ProducerOptions
from spark_source import offsets
from spark_source.arrow_rows import arrow_schema, to_record_batch
from spark_source.options import OptionError, parse_sink, parse_source
from spark_source.reader import DataLossError, check_data_loss, plan_ranges
from spark_source.stream_reader import spread_limit
from spark_source.writer import CHUNK_BYTES, _BulkSender, _chunks, _Rows

pytestmark = pytest.mark.spark


def test_offsets_canonical_json():
    a = offsets.encode({("b", 10): 5, ("a", 2): 1, ("b", 2): 7})
    b = offsets.encode({("b", 2): 7, ("a", 2): 1, ("b", 10): 5})
    assert json.dumps(a) == json.dumps(b) == json.dumps(a, sort_keys=True)
    assert offsets.decode(json.dumps(a)) == {("b", 10): 5, ("a", 2): 1, ("b", 2): 7}


@pytest.mark.parametrize(
    "opts,needle",
    [
        ({"subscribe": "t"}, "bootstrap"),
        ({"bootstrap": "x:1"}, "subscribe"),
        ({"bootstrap": "x:1", "subscribe": "t", "assign": '{"t":[0]}'}, "exactly one"),
        ({"bootstrap": "x:1", "assign": "[1]"}, "assign"),
        ({"bootstrap": "x:1", "subscribe": "t", "failondataloss": "maybe"}, "failOnDataLoss"),
        ({"bootstrap": "x:1", "subscribepattern": "(", "x": "1"}, "'x'"),
        ({"bootstrap": "x:1", "subscribepattern": "("}, "subscribePattern"),
        ({"bootstrap": "x:1", "subscribe": "t", "endingoffsets": "earliest"}, "endingOffsets"),
    ],
)
def test_option_errors_name_the_option(opts, needle):
    with pytest.raises(OptionError, match=needle):
        parse_source(opts, streaming=False)


def test_options_parsed():
    o = parse_source(
        {"kraftlog.bootstrap.servers": "h:1", "subscribe": "b,a", "startingoffsets": '{"a":{"0":-2,"1":5}}', "maxoffsetspertrigger": "9"},
        streaming=True,
    )
    assert o.bootstrap == "h:1" and o.subscribe == ("a", "b") and o.max_offsets_per_trigger == 9
    assert o.starting_offsets == {("a", 0): -2, ("a", 1): 5} and o.fail_on_data_loss is True
    assert parse_sink({"bootstrap": "h:1", "topic": "t"}, streaming=False).topic == "t"


def test_spread_limit_proportional_and_exact():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 300, ("t", 1): 100, ("t", 2): 100}
    end = spread_limit(start, latest, 100)
    assert sum(end[tp] - start[tp] for tp in start) == 100
    assert end == {("t", 0): 75, ("t", 1): 25, ("t", 2): 100}
    assert spread_limit(start, latest, 10_000) == latest
    # Tiny limits still make progress.
    assert sum(e - start[tp] for tp, e in spread_limit(start, latest, 1).items()) == 1


def test_plan_ranges_min_partitions():
    o = parse_source({"bootstrap": "h:1", "subscribe": "t", "minpartitions": "4"}, streaming=False)
    parts = plan_ranges(o, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 30, ("t", 1): 10})
    assert len(parts) == 4
    assert sum(p.end - p.start for p in parts) == 40
    assert [(p.start, p.end) for p in parts if p.partition == 0] == [(0, 10), (10, 20), (20, 30)]


def test_data_loss():
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        check_data_loss({("t", 0): 3}, {("t", 0): 10}, fail=True)
    assert check_data_loss({("t", 0): 3}, {("t", 0): 10}, fail=False) == {("t", 0): 10}


def test_starting_timestamp_options():
    o = parse_source({"bootstrap": "h:1", "subscribe": "t", "startingtimestamp": "1700000000000"}, streaming=True)
    assert (o.starting_timestamp, o.timestamp_strategy) == (1_700_000_000_000, "error")
    o = parse_source(
        {"bootstrap": "h:1", "subscribe": "t", "startingtimestamp": "0", "startingoffsetsbytimestampstrategy": "LATEST"},
        streaming=False,
    )
    assert (o.starting_timestamp, o.timestamp_strategy) == (0, "latest")
    for bad, needle in [
        ({"startingtimestamp": "-1"}, "'startingTimestamp' must be an integer >= 0"),
        ({"startingtimestamp": "5", "startingoffsets": "earliest"}, "set only one"),
        ({"startingoffsetsbytimestampstrategy": "earliest"}, "'startingOffsetsByTimestampStrategy' must be one of error, latest"),
    ]:
        with pytest.raises(OptionError, match=needle):
            parse_source({"bootstrap": "h:1", "subscribe": "t", **bad}, streaming=True)


def test_data_loss_skipped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="spark_source"):
        assert check_data_loss({("t", 0): 3, ("t", 1): 12}, {("t", 0): 10, ("t", 1): 10}, fail=False) == {("t", 0): 10, ("t", 1): 12}
    assert [r.getMessage() for r in caplog.records] == [
        "t-0: offsets 3..9 are no longer available (log start offset is 10); they were deleted by retention or the "
        "topic was recreated. Set failOnDataLoss=false to skip them. Skipping (failOnDataLoss=false)."
    ]


# --------------------------------------------------------------------------- Arrow rows

maybe_bytes = st.none() | st.binary(max_size=20)
record = st.tuples(maybe_bytes, maybe_bytes, st.lists(st.tuples(st.text(max_size=4), maybe_bytes), max_size=2))


@st.composite
def fetched_batches(draw: st.DrawFn) -> list[record_batch.DecodedBatch]:
    """Consecutive decoded batches as a fetch brings them, the first possibly cut by the consumer."""
    batches, offset = [], draw(st.integers(0, 1 << 40))
    for _ in range(draw(st.integers(1, 4))):
        records = draw(st.lists(record, min_size=1, max_size=12))
        buf = bytearray(
            record_batch.encode_batch(
                [v for _, v, _ in records],
                keys=[k for k, _, _ in records],
                headers=[h for _, _, h in records],
                timestamps_ms=[draw(st.integers(1 << 40, (1 << 40) + 100_000)) for _ in records],
                compression=draw(st.sampled_from(["none", "lz4", "zstd"])),
            )
        )
        record_batch.stamp_batch(buf, 0, offset, 0)
        if draw(st.booleans()):
            record_batch.set_log_append_time(buf, 0, draw(st.integers(0, 1 << 41)))
        batches.append(record_batch.decode_batch(bytes(buf)))
        offset += len(records) + draw(st.integers(0, 3))  # gaps, as control batches leave
    first = batches[0]
    batches[0] = cut_batch(first, draw(st.integers(first.header.base_offset, first.header.last_offset)))
    return batches


@settings(max_examples=80, deadline=None)
@given(fetched_batches(), st.booleans())
def test_arrow_rows_match_the_records(batches, include_headers):
    rb = to_record_batch("topic-a", 7, batches, include_headers)
    records = [r for b in batches for r in b.records()]
    timestamp_types = [b.header.timestamp_type for b in batches for _ in b.offsets]
    assert rb.schema == arrow_schema(include_headers)
    assert rb.column("key").to_pylist() == [r.key for r in records]
    assert rb.column("value").to_pylist() == [r.value for r in records]
    assert rb.column("offset").to_pylist() == [r.offset for r in records]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp_ms * 1000 for r in records]
    assert rb.column("timestampType").to_pylist() == timestamp_types
    assert set(rb.column("topic").to_pylist()) == {"topic-a"} and set(rb.column("partition").to_pylist()) == {7}
    if include_headers:
        assert rb.column("headers").to_pylist() == [[{"key": k, "value": v} for k, v in r.headers] for r in records]


def test_reading_leaves_pandas_unimported():
    """`pa.array` and `pa.scalar` import pandas (about 0.2 s of CPU) to ask whether their
    argument is a pandas array: a read task must not pay that in every new Spark worker.
    In a fresh interpreter: import the source as a worker does, turn a fetch of layout
    batches and a cut (list) batch into Arrow, and find pandas still not imported; the
    negative control at the end shows the probe does see `pa.scalar` import it."""
    import subprocess
    import sys

    script = """
import sys
import spark_source.source, spark_source.stream_reader
from data_plane import record_batch
from spark_source.arrow_rows import to_record_batch
from data_plane.client.consumer import cut_batch
batches = []
for base in (0, 5):
    buf = bytearray(record_batch.encode_batch([b"v%d" % i for i in range(5)], keys=[None, b"k", None, b"", None]))
    record_batch.stamp_batch(buf, 0, base, 0)
    batches.append(record_batch.decode_batch(bytes(buf)))
batches[0] = cut_batch(batches[0], 2)
rows = to_record_batch("t", 0, batches)
assert rows.column("offset").to_pylist() == list(range(2, 10)), rows
print("pandas" in sys.modules)
import pyarrow as pa
pa.scalar(1, pa.int32())
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120).stdout.split()
    assert out == ["False", "True"]


# --------------------------------------------------------------------------- writer


class _RecordingProducer:
    """Stands in for Producer: remembers what send_batch was given."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.options = ProducerOptions()
        self.sent: list[tuple[str, int, list, list | None]] = []

    def partitions_for(self, topic: str) -> int:
        return self.partitions

    def send_batch(self, topic, partition, values, keys=None):
        self.sent.append((topic, partition, values, keys))
        return object()


def test_bulk_writer_groups_by_partition_in_row_order():
    keys = [None, b"alpha", None, b"beta", b"alpha", None]
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array([f"v{i}" for i in range(6)], pa.string()),
            "partition": pa.array([None, None, 2, None, None, None], pa.int32()),
        }
    )
    producer = _RecordingProducer(partitions=4)
    futures = _BulkSender(producer).send(_Rows(batch, "out"))
    assert len(futures) == len(producer.sent)
    assert {topic for topic, _, _, _ in producer.sent} == {"out"}
    placed = {value: partition for _, partition, values, _ in producer.sent for value in values}
    assert sorted(placed) == [f"v{i}".encode() for i in range(6)]
    assert placed[b"v2"] == 2
    for i in (1, 3, 4):  # keyed rows follow Kafka's key hash
        assert placed[b"v%d" % i] == partition_for_key(keys[i], 4)
    assert placed[b"v0"] == placed[b"v5"]  # unkeyed rows share the sticky partition
    in_partition: dict[int, list[bytes]] = {}
    for _, partition, values, _ in producer.sent:
        in_partition.setdefault(partition, []).extend(values)
    assert all(values == sorted(values) for values in in_partition.values())  # row order kept


maybe_sized = st.none() | st.integers(0, CHUNK_BYTES + 100).map(lambda n: b"v" * n)


@settings(max_examples=200, deadline=None)
@given(st.lists(maybe_sized, min_size=1, max_size=40).flatmap(
    lambda values: st.tuples(st.just(values), st.none() | st.lists(maybe_sized, min_size=len(values), max_size=len(values)))))
def test_chunks_are_the_greedy_cut_at_chunk_bytes(drawn):
    """The chunks cover the rows in order; each is as long as it can be without passing
    CHUNK_BYTES (a row larger than that alone), the rule the per-row loop followed."""
    values, keys = drawn

    def size(i: int) -> int:
        return RECORD_OVERHEAD_BYTES + len(values[i] or b"") + (len(keys[i] or b"") if keys else 0)

    chunks = list(_chunks(values, keys))
    assert [start for start, _ in chunks] == [0, *(end for _, end in chunks[:-1])] and chunks[-1][1] == len(values)
    for start, end in chunks:
        total = sum(size(i) for i in range(start, end))
        assert end > start and (total <= CHUNK_BYTES or end == start + 1)
        assert end == len(values) or total + size(end) > CHUNK_BYTES  # greedy: the next row did not fit


def test_a_chunk_holds_exactly_chunk_bytes():
    half = b"v" * (CHUNK_BYTES // 2 - RECORD_OVERHEAD_BYTES)
    assert list(_chunks([half, half, b""], None)) == [(0, 2), (2, 3)]
    assert list(_chunks([half, half + b"v"], None)) == [(0, 1), (1, 2)]
    assert list(_chunks([b"v" * CHUNK_BYTES, b""], [None, b"k"])) == [(0, 1), (1, 2)]  # a larger row alone


def test_bulk_writer_chunks_unkeyed_rows_and_moves_on_per_arrow_batch():
    value = b"x" * 1000
    rows = 3 * CHUNK_BYTES // len(value)
    batch = pa.RecordBatch.from_pydict({"value": pa.array([value] * rows, pa.binary())})
    producer = _RecordingProducer(partitions=3)
    sender = _BulkSender(producer)
    sender.send(_Rows(batch, "out"))
    sizes = [sum(len(v) + RECORD_OVERHEAD_BYTES for v in values) for _, _, values, _ in producer.sent]
    assert sum(len(values) for _, _, values, _ in producer.sent) == rows
    assert len(sizes) >= 3 and max(sizes) <= CHUNK_BYTES
    assert len({p for _, p, _, _ in producer.sent}) == 1  # one Arrow batch: one sticky partition
    first = producer.sent[0][1]
    sender.send(_Rows(batch, "out"))
    assert producer.sent[-1][1] != first  # the next Arrow batch moved on


def test_bulk_writer_keeps_small_arrow_batches_on_one_partition_until_batch_size_went_there():
    """KIP-794 with the Arrow batch as the unit: batches far below the producer's batch_size
    share a partition (fuller requests), and it moves on once batch_size bytes went there."""
    producer = _RecordingProducer(partitions=3)
    sender = _BulkSender(producer)
    value = b"x" * 1000
    small = pa.RecordBatch.from_pydict({"value": pa.array([value] * 10, pa.binary())})
    per_batch = 10 * len(value)
    for _ in range(ProducerOptions().batch_size // per_batch):
        sender.send(_Rows(small, "out"))
    assert len({p for _, p, _, _ in producer.sent}) == 1
    first = producer.sent[0][1]
    sender.send(_Rows(small, "out"))  # batch_size bytes have now gone to it
    sender.send(_Rows(small, "out"))
    assert producer.sent[-1][1] != first


@pytest.mark.parametrize(
    "opts,streaming,needle",
    [
        ({"startingoffsetsbytimestamp": '{"t":{"0":5}}', "startingtimestamp": "5"}, False, "startingTimestamp.*startingOffsetsByTimestamp.*set only one"),
        ({"endingtimestamp": "5", "endingoffsets": "latest"}, False, "endingTimestamp.*endingOffsets.*set only one"),
        ({"endingtimestamp": "5"}, True, "'endingTimestamp' is for batch"),
        ({"endingoffsetsbytimestamp": '{"t":{"0":5}}'}, True, "'endingOffsetsByTimestamp' is for batch"),
        ({"minoffsetspertrigger": "5"}, False, "'minOffsetsPerTrigger' is for streaming"),
        ({"maxtriggerdelay": "5m"}, False, "'maxTriggerDelay' is for streaming"),
        ({"maxtriggerdelay": "soon"}, True, "maxTriggerDelay.*duration"),
        ({"startingoffsetsbytimestamp": '{"t":{"0":-1}}'}, False, "startingOffsetsByTimestamp.*timestamp -1"),
        ({"maxrecordsperpartition": "0"}, False, "maxRecordsPerPartition"),
        ({"polltimeoutms": "5", "kafkaconsumer.polltimeoutms": "6"}, False, "disagree"),
        ({"kafka.bootstrap.servers": "y:2"}, False, "disagree"),
        ({"groupidprefix": "g"}, False, "groupIdPrefix.*no consumer group"),
        ({"fetchoffset.numretries": "3"}, False, "fetchOffset.numRetries.*retry"),
        ({"kafka.group.id": "g"}, False, "kafka.group.id.*no consumer group"),
        ({"kafka.auto.offset.reset": "earliest"}, False, "startingOffsets"),
        ({"kafka.security.protocol": "SASL_SSL"}, False, "no authentication"),
        ({"kafka.sasl.mechanism": "PLAIN"}, False, "no authentication"),
        ({"kafka.session.timeout.ms": "1"}, False, "kafka.session.timeout.ms.*kafka.max.partition.fetch.bytes"),
        ({"kafka.fetch.max.bytes": "lots"}, False, "kafka.fetch.max.bytes.*integer"),
    ],
)
def test_kafka_source_option_errors(opts, streaming, needle):
    with pytest.raises(OptionError, match=needle):
        parse_source({"bootstrap": "x:1", "subscribe": "t", **opts}, streaming=streaming)


def test_kafka_source_options_parsed():
    o = parse_source(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "startingoffsetsbytimestamp": '{"t":{"0":1000,"1":2000}}',
            "kafkaconsumer.polltimeoutms": "5000",
            "kafka.max.partition.fetch.bytes": "1024",
            "kafka.client.id": "job-7",
            "minoffsetspertrigger": "100",
            "maxtriggerdelay": "30s",
        },
        streaming=True,
    )
    assert o.bootstrap == "h:1" and o.poll_timeout_ms == 5000
    assert o.starting_by_timestamp == {("t", 0): 1000, ("t", 1): 2000}
    assert o.consumer_config == {"isolation_level": "read_committed", "max_partition_fetch_bytes": 1024, "client_id": "job-7"}
    assert o.min_offsets_per_trigger == 100 and o.max_trigger_delay_ms == 30_000
    assert parse_source({"bootstrap": "h:1", "subscribe": "t"}, streaming=True).max_trigger_delay_ms == 15 * 60 * 1000
    b = parse_source({"bootstrap": "h:1", "subscribe": "t", "endingtimestamp": "7", "maxrecordsperpartition": "10"}, streaming=False)
    assert b.ending_timestamp == 7 and b.max_records_per_partition == 10
    sink = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.acks": "1", "kafka.compression.type": "lz4", "kafka.linger.ms": "0"}, streaming=False)
    assert sink.producer_config == {"acks": 1, "compression": "lz4", "linger_ms": 0}
    with pytest.raises(OptionError, match="kafka.value.serializer.*CAST"):
        parse_sink({"bootstrap": "h:1", "kafka.value.serializer": "x"}, streaming=False)
    with pytest.raises(OptionError, match="kafka.fetch.max.bytes.*producer"):
        parse_sink({"bootstrap": "h:1", "kafka.fetch.max.bytes": "5"}, streaming=False)


def test_plan_ranges_max_records_per_partition():
    o = parse_source({"bootstrap": "h:1", "subscribe": "t", "maxrecordsperpartition": "30"}, streaming=False)
    parts = plan_ranges(o, {("t", 0): 0, ("t", 1): 10}, {("t", 0): 100, ("t", 1): 20})
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 10, 20)]
    both = parse_source({"bootstrap": "h:1", "subscribe": "t", "maxrecordsperpartition": "60", "minpartitions": "6"}, streaming=False)
    assert len(plan_ranges(both, {("t", 0): 0}, {("t", 0): 100})) == 6  # the larger of the two counts


@pytest.mark.parametrize(("end", "fetches"), [(10, 1), (25, 3), (30, 3)])
def test_a_task_sends_no_fetch_past_its_range(end, fetches):
    """Polling with Fetch (where a broker has no Consume stream), read() reads [start, end)
    with the next fetch sent while it builds Arrow, but none once it has what it needs: a
    whole fetch past the end would be sent, received and thrown away by every task. Three
    batches of 10 records, one batch per fetch."""
    from data_plane.client import Producer
    from spark_source.reader import RangePartition, read_range
    from tests.unit.client.fake_broker import FakeBroker

    with FakeBroker({"one": 1}) as broker:
        with Producer(broker.address) as producer:
            for first in range(0, 30, 10):
                producer.send_batch("one", 0, [b"%d" % i for i in range(first, first + 10)]).result(10)
        part = RangePartition(broker.address, "one", 0, 0, end, False, True, 10_000, {"max_partition_fetch_bytes": 1, "fetch_mode": "fetch"})
        rows = pa.Table.from_batches(list(read_range(part)))
        assert rows.column("offset").to_pylist() == list(range(end))
        assert broker.fetch_requests == fetches


def test_a_worker_freezes_what_it_imported_once():
    """Spark's Python worker runs a full gc.collect() after every task: after the first
    task's freeze_long_lived(), what the imports created is no longer visited, while garbage
    made later is still collected. In a fresh interpreter (the freeze is per process)."""
    import subprocess
    import sys

    script = """
import gc
import spark_source.reader, spark_source.writer
from spark_source.worker_gc import freeze_long_lived
tracked = len(gc.get_objects())
freeze_long_lived()
frozen = gc.get_freeze_count()
cycle = [[]]; cycle[0].append(cycle); del cycle
print(tracked, frozen, len(gc.get_objects()), gc.collect())
freeze_long_lived()
print(gc.get_freeze_count() == frozen)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120).stdout.split()
    tracked, frozen, visited, collected = map(int, out[:4])
    assert tracked > 20_000 and frozen > 20_000  # kraftlog's client and pyarrow are big
    assert visited < tracked // 10
    assert collected >= 2  # the cycle made after the freeze is still garbage collected
    assert out[4] == "True"  # the second task freezes nothing more


def test_sink_delivery_options():
    """Streaming writes are exactly-once unless exactlyOnce=false, with a long transaction
    timeout by default; the transactional options are refused where nothing uses them."""
    stream = parse_sink({"bootstrap": "h:1", "topic": "t"}, streaming=True)
    assert stream.exactly_once and stream.producer_config == {"transaction_timeout_ms": 300_000}
    tuned = parse_sink({"bootstrap": "h:1", "topic": "t", "transactionalidprefix": "job", "kafka.transaction.timeout.ms": "9000"}, streaming=True)
    assert tuned.transactional_id_prefix == "job" and tuned.producer_config == {"transaction_timeout_ms": 9000}
    plain = parse_sink({"bootstrap": "h:1", "topic": "t", "exactlyonce": "false", "kafka.acks": "1"}, streaming=True)
    assert not plain.exactly_once and plain.producer_config == {"acks": 1}
    assert not parse_sink({"bootstrap": "h:1", "topic": "t"}, streaming=False).exactly_once
    with pytest.raises(OptionError, match="exactlyOnce.*streaming writes only"):
        parse_sink({"bootstrap": "h:1", "exactlyonce": "true"}, streaming=False)
    with pytest.raises(OptionError, match="transactionalIdPrefix.*exactlyOnce=false"):
        parse_sink({"bootstrap": "h:1", "exactlyonce": "false", "transactionalidprefix": "x"}, streaming=True)
    with pytest.raises(OptionError, match="kafka.transaction.timeout.ms.*batch write"):
        parse_sink({"bootstrap": "h:1", "kafka.transaction.timeout.ms": "5"}, streaming=False)
    with pytest.raises(OptionError, match="kafka.acks=all"):
        parse_sink({"bootstrap": "h:1", "kafka.acks": "1"}, streaming=True)
    with pytest.raises(OptionError, match="kafka.transactional.id.*transactionalIdPrefix"):
        parse_sink({"bootstrap": "h:1", "kafka.transactional.id": "x"}, streaming=True)


def test_source_isolation_level_option():
    default = parse_source({"bootstrap": "h:1", "subscribe": "t"}, streaming=True)
    assert default.read_committed and default.consumer_config == {"isolation_level": "read_committed"}
    raw = parse_source({"bootstrap": "h:1", "subscribe": "t", "kafka.isolation.level": "READ_UNCOMMITTED"}, streaming=False)
    assert not raw.read_committed and raw.consumer_config == {"isolation_level": "read_uncommitted"}
    with pytest.raises(OptionError, match="kafka.isolation.level.*read_committed or read_uncommitted"):
        parse_source({"bootstrap": "h:1", "subscribe": "t", "kafka.isolation.level": "serializable"}, streaming=False)
