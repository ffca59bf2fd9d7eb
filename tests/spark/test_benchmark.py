"""Streaming read and sink throughput of the Spark source against Spark's own ceiling.

    python3 -m pytest -m benchmark tests/spark/test_benchmark.py -s

Reads: a 3-partition topic of 100-byte values, one broker, a warm session (the Python
workers started and both streaming paths run on two full-size micro-batches), in local[2] and on a standalone cluster
(a master and two 1-core workers, the driver its own process). Prints one row per
micro-batch with Spark's own duration breakdown and the CPU time per record of the JVMs,
the Python workers and the broker; the same for a source that does no work at all
(tests/spark/arrow_floor_source.py: Spark's own cost on this machine at this moment, the
ceiling for any Python source), and their ratio (tests/spark/read_benchmark.py); then a
cProfile of one task's read (`read_range`, the code Spark's Python worker runs) outside
Spark, and gRPC's floor: the CPU that moving the same bytes through gRPC and protobuf alone
costs (tests/spark/transport_floor.py). The first micro-batches of every query are slower: Spark generates code per query
and the JIT compiles it as it runs. Writes: rows/s of a batch write through the sink
against the noop sink and `kraftlog perf produce` in the same run; rows/s of a streaming
query through the exactly-once sink against the at-least-once sink, alternating. Sizes:
KRAFTLOG_BENCH_RECORDS (per partition), KRAFTLOG_BENCH_BATCH (maxOffsetsPerTrigger),
KRAFTLOG_BENCH_MIN_PARTITIONS (minPartitions; 0 leaves it unset: a task per partition),
KRAFTLOG_BENCH_SINK_RECORDS (rows written), KRAFTLOG_BENCH_EOS_RECORDS and
KRAFTLOG_BENCH_EOS_BATCH (the streaming sink's rows per partition and per micro-batch).
"""

import cProfile
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
import zlib

import pytest

from data_plane import record_batch
from data_plane.client import Admin, Producer
from spark_source.arrow_rows import to_record_batch
from spark_source.reader import READ_CONFIG, RangePartition, read_range
from tests.spark import transport_floor
from tests.spark.read_benchmark import Processes, ReadBench, compare_sources
from tests.spark.spark_processes import REPO, run_driver, standalone_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 3
VALUE_BYTES = 100
RECORDS = int(os.environ.get("KRAFTLOG_BENCH_RECORDS", "2000000"))  # per partition
BATCH = int(os.environ.get("KRAFTLOG_BENCH_BATCH", "1000000"))  # records per micro-batch
MIN_PARTITIONS = int(os.environ.get("KRAFTLOG_BENCH_MIN_PARTITIONS", "0"))
SINK_RECORDS = int(os.environ.get("KRAFTLOG_BENCH_SINK_RECORDS", "1000000"))
EOS_RECORDS = int(os.environ.get("KRAFTLOG_BENCH_EOS_RECORDS", "200000"))  # per partition
EOS_BATCH = int(os.environ.get("KRAFTLOG_BENCH_EOS_BATCH", "100000"))  # rows per micro-batch
# Records per send_batch: about 100 KiB batches, what a busy producer writes.
PRODUCE_CHUNK = 1000


def _fill(bootstrap: str, topic: str, records: int) -> None:
    """`records` values of VALUE_BYTES bytes into each partition of `topic`."""
    with Producer(bootstrap, acks=1) as producer:
        futures = [
            producer.send_batch(topic, p, [b"%0*d" % (VALUE_BYTES, i) for i in range(first, first + PRODUCE_CHUNK)])
            for first in range(0, records, PRODUCE_CHUNK)
            for p in range(PARTITIONS)
        ]
        producer.flush()
        for future in futures:
            future.result()


@pytest.fixture(scope="module")
def bench_topic(cluster):
    """The topic, filled; deleted afterwards (it holds hundreds of MB)."""
    cluster.create_topic("bench", PARTITIONS, 1)
    _fill(cluster.bootstrap, "bench", RECORDS)
    yield "bench"
    with cluster.controller_client() as controllers:
        controllers.delete_topics(["bench"])


def test_streaming_read_records_per_second(spark, cluster, bench_topic, tmp_path, capsys):
    driver_jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    processes = Processes(driver_jvm, cluster.brokers[0].pid)
    _report(capsys, compare_sources(spark, _read_bench(cluster, bench_topic), processes, tmp_path, "local[2]"))


def test_streaming_read_on_standalone_cluster(cluster, bench_topic, tmp_path, capsys):
    """The same comparison with the driver in its own process against a standalone master
    with two workers of one core each (tests/spark/read_benchmark.py)."""
    bench = _read_bench(cluster, bench_topic)
    with standalone_cluster(tmp_path / "spark", workers=2) as spark_cluster:
        command = [
            sys.executable, "-m", "tests.spark.read_benchmark", bench.bootstrap, bench.topic,
            "--master", spark_cluster.master_url, "--partitions", str(bench.partitions),
            "--records", str(bench.records), "--batch", str(bench.batch), "--value-bytes", str(bench.value_bytes),
            "--min-partitions", str(bench.min_partitions), "--worker-pids", ",".join(map(str, spark_cluster.worker_pids)),
            "--broker-pid", str(cluster.brokers[0].pid), "--work-dir", str(tmp_path / "checkpoints"),
        ]
        output = tmp_path / "driver.out"
        driver = run_driver(command, output, 1800)
    text = output.read_text()
    assert driver.returncode == 0, text[-3000:]
    _report(capsys, text[text.index("streaming read into noop"):])


def test_sink_rows_per_second_against_perf_produce(spark, cluster, capsys):
    """A batch write of SINK_RECORDS rows of 100-byte values into a topic through the
    kraftlog sink (local[2], two tasks), the same rows into Spark's `noop` sink (Spark's own
    cost of making them), and `kraftlog perf produce` writing as many records of the same
    size with acks=all into another topic, one after the other."""
    topics = {name: f"sink-bench-{name}" for name in ("warm", "spark", "perf")}
    for topic in topics.values():
        cluster.create_topic(topic, PARTITIONS, 1)

    def rows(count: int):
        values = f"CAST(lpad(CAST(id AS STRING), {VALUE_BYTES}, '0') AS BINARY) AS value"
        return spark.range(0, count, numPartitions=2).selectExpr(values)

    def write(count: int, topic: str) -> None:
        rows(count).write.format("kraftlog").mode("append").option("bootstrap", cluster.bootstrap).option("topic", topic).save()

    write(50_000, topics["warm"])  # Python workers, JIT
    lines = [f"batch write of {SINK_RECORDS:,} rows of {VALUE_BYTES} bytes, local[2], 2 tasks, {PARTITIONS} partitions, acks=all"]
    timed = {
        "Spark into noop (no sink work)": lambda: rows(SINK_RECORDS).write.format("noop").mode("append").save(),
        "Spark into kraftlog (the sink)": lambda: write(SINK_RECORDS, topics["spark"]),
    }
    for name, run in timed.items():
        started = time.perf_counter()
        run()
        elapsed = time.perf_counter() - started
        lines.append(f"  {name:<34} {SINK_RECORDS / elapsed:>11,.0f} rows/s  ({elapsed:.2f} s, load average {os.getloadavg()[0]:.1f})")
    with Admin(cluster.bootstrap) as admin:
        written = admin.list_offsets({(topics["spark"], p): -1 for p in range(PARTITIONS)})
    assert sum(a.offset for a in written.values()) == SINK_RECORDS
    perf = subprocess.run(
        [
            sys.executable, "-m", "cli", "perf", "produce", "--bootstrap", cluster.bootstrap, "--topic", topics["perf"],
            "--num-records", str(SINK_RECORDS), "--record-size", str(VALUE_BYTES), "--acks", "all", "--json",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=True,
    )
    # The JSON report is the last document; the client's structlog lines may precede it.
    figure = json.loads(perf.stdout[[m.start() for m in re.finditer(r"^\{$", perf.stdout, re.M)][-1]:])["records_per_sec"]
    lines.append(f"  {'kraftlog perf produce --acks all':<34} {figure:>11,.0f} rows/s  (load average {os.getloadavg()[0]:.1f})")
    _report(capsys, "\n".join(lines))


def test_streaming_sink_exactly_once_against_at_least_once(spark, cluster, tmp_path, capsys):
    """Rows/s a streaming query writes (a copy of a filled topic, Trigger.AvailableNow,
    EOS_BATCH rows per micro-batch) through the exactly-once sink (a transaction per task and
    micro-batch, committed by the driver) and the at-least-once sink, alternating, two rounds
    after a warm-up of each, in both orders. Rows/s: the rows over the sum of the micro-batches' durations."""
    cluster.create_topic("eos-bench-src", PARTITIONS, 1)
    _fill(cluster.bootstrap, "eos-bench-src", EOS_RECORDS)
    total = EOS_RECORDS * PARTITIONS

    def run(name: str, exactly_once: bool) -> tuple[float, list[float]]:
        cluster.create_topic(name, PARTITIONS, 1)
        query = (
            spark.readStream.format("kraftlog").option("bootstrap", cluster.bootstrap).option("subscribe", "eos-bench-src")
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", EOS_BATCH).load()
            .selectExpr("value", "partition")
            .writeStream.format("kraftlog").option("bootstrap", cluster.bootstrap).option("topic", name)
            .option("exactlyOnce", str(exactly_once).lower()).option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True).start()
        )
        assert query.awaitTermination(900) and query.exception() is None
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        with Admin(cluster.bootstrap) as admin:
            written = admin.list_offsets({(name, p): -1 for p in range(PARTITIONS)}, read_committed=True)
        rows = sum(p["numInputRows"] for p in batches)
        seconds = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
        assert rows == total and sum(a.offset for a in written.values()) >= rows
        return rows / seconds, [p["numInputRows"] / p["durationMs"]["triggerExecution"] * 1000 for p in batches]

    run("eos-bench-warm-alo", False)
    run("eos-bench-warm-eos", True)
    lines = [f"streaming copy of {total:,} rows of {VALUE_BYTES} bytes, local[2], {PARTITIONS} tasks, "
             f"{EOS_BATCH:,} rows per micro-batch, acks=all"]
    figures: dict[str, list[float]] = {"at-least-once": [], "exactly-once": []}
    sinks = [("at-least-once", False), ("exactly-once", True)]
    for round_ in (1, 2):
        for name, exactly_once in sinks if round_ == 1 else sinks[::-1]:  # neither always runs second
            rate, per_batch = run(f"eos-bench-{round_}-{'eos' if exactly_once else 'alo'}", exactly_once)
            figures[name].append(rate)
            lines.append(f"  round {round_} {name:<14} {rate:>11,.0f} rows/s (micro-batches: "
                         f"{', '.join(f'{r:,.0f}' for r in per_batch)}; load average {os.getloadavg()[0]:.1f})")
    eos, alo = statistics.median(figures["exactly-once"]), statistics.median(figures["at-least-once"])
    lines.append(f"  exactly-once / at-least-once: {eos / alo:.0%}")
    _report(capsys, "\n".join(lines))


def _read_bench(cluster, topic: str) -> ReadBench:
    return ReadBench(cluster.bootstrap, topic, PARTITIONS, RECORDS, BATCH, VALUE_BYTES, MIN_PARTITIONS)


def test_one_task_profile(cluster, bench_topic, capsys):
    """What one Spark task does, in this process under cProfile: fetch, decode, build Arrow."""
    count = min(RECORDS, 200_000)
    part = RangePartition(cluster.bootstrap, bench_topic, 0, 0, count, False, True, 60_000)
    assert sum(b.num_rows for b in read_range(part)) == count  # warm the broker's page cache
    profile = cProfile.Profile()
    started = time.perf_counter(), time.process_time(), time.thread_time()
    rows = profile.runcall(lambda: sum(b.num_rows for b in read_range(part)))
    wall, cpu, main = (now - then for now, then in zip((time.perf_counter(), time.process_time(), time.thread_time()), started))
    assert rows == count
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(12)
    _report(
        capsys,
        f"one task, {count:,} records of partition 0: {wall * 1000:.0f} ms wall, {count / wall:,.0f} records/s; "
        f"CPU {main * 1000:.0f} ms in the reading thread (fetch handling, CRC, checks, Arrow), "
        f"{(cpu - main) * 1000:.0f} ms in gRPC's threads (receiving the fetches)\n" + out.getvalue(),
    )


def test_decode_versus_arrow_cpu(capsys):
    """CPU per record of the two stages of a task's read on one fetch held in memory (no
    broker, no Spark): decoding the fetched bytes (data_plane.record_batch: CRC and length
    checks) and building the Arrow batch from the decoded batches (spark_source.arrow_rows)."""
    fetch = record_batch.encode_batch([b"%0*d" % (VALUE_BYTES, i) for i in range(PRODUCE_CHUNK)]) * 65  # ~8 MiB
    records = 65 * PRODUCE_CHUNK
    decoded = list(record_batch.decode_batches(fetch))
    stages = {
        "decode_batches (CRC + checks)": lambda: list(record_batch.decode_batches(fetch)),
        "  of which the CRC (zlib-ng)": lambda: record_batch.crc32(fetch),
        "  the CRC with the system zlib": lambda: zlib.crc32(fetch),
        "to_record_batch (Arrow)": lambda: to_record_batch("bench", 0, decoded),
    }
    lines = [f"one fetch of {records:,} records of {VALUE_BYTES} bytes, CPU per record, median of 30:"]
    for name, stage in stages.items():
        spent = []
        for _ in range(30):
            started = time.process_time()
            stage()
            spent.append(time.process_time() - started)
        lines.append(f"  {name:<32} {statistics.median(spent) / records * 1e6:.3f} us")
    assert to_record_batch("bench", 0, decoded).num_rows == records
    _report(capsys, "\n".join(lines))


def test_grpc_transport_floor(capsys):
    """The floor under the broker's and the Python workers' CPU per record: gRPC and protobuf
    alone moving Consume messages of the read's size (tests/spark/transport_floor.py), per
    MiB and per record of this benchmark's topic."""
    record_bytes = len(record_batch.encode_batch([b"%0*d" % (VALUE_BYTES, i) for i in range(PRODUCE_CHUNK)])) / PRODUCE_CHUNK
    lines = [f"gRPC alone, one stream, {record_bytes:.1f} bytes per record of this benchmark's topic; medians of 5 reads of 1 GiB:"]
    for message_bytes in (READ_CONFIG["stream_message_bytes"], 4 << 20):
        floors = transport_floor.measure(message_bytes, 1024, 5)
        server = statistics.median(f.server_ms_per_mib for f in floors)
        client = statistics.median(f.client_ms_per_mib for f in floors)
        per_record = 1000 * record_bytes / (1 << 20)  # µs per record for each ms per MiB
        lines.append(f"  messages of {message_bytes >> 20} MiB: server {server:.2f} ms CPU per MiB ({server * per_record:.3f} us per record), "
                     f"client {client:.2f} ms ({client * per_record:.3f} us), {statistics.median(f.mib_per_s for f in floors):,.0f} MiB/s")
    _report(capsys, "\n".join(lines))


def _report(capsys, text: str) -> None:
    """Benchmarks print their figures even without -s."""
    with capsys.disabled():
        print("\n" + text)
