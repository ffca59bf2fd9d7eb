"""Streaming read throughput: records/s a micro-batch query reads into the `noop` sink.

    python3 -m pytest -m benchmark tests/spark/test_benchmark.py

A 3-partition topic of 100-byte values, local[2], one broker, a warm session (the Python
workers started and both streaming paths run once). Prints one row per micro-batch with
Spark's own duration breakdown and the CPU time per record of the JVM, the Python workers
and the broker; the same for a source that does no work at all
(tests/spark/arrow_floor_source.py: Spark's own cost on this machine at this moment, the
ceiling for any Python source); then a cProfile of one task's read (`read_range`, the code
Spark's Python worker runs) outside Spark. The first micro-batches of every query are
slower: Spark generates code per query and the JIT compiles it as it runs. Sizes:
KRAFTLOG_BENCH_RECORDS (per partition), KRAFTLOG_BENCH_BATCH (maxOffsetsPerTrigger) and
KRAFTLOG_BENCH_MIN_PARTITIONS (minPartitions; 0 leaves it unset: a task per partition).
"""

import cProfile
import io
import json
import os
import pstats
import statistics
import time
import zlib
from pathlib import Path

import pytest

from data_plane import record_batch
from data_plane.client import Producer
from server_common.waiting import wait_for
from spark_source.arrow_rows import to_record_batch
from spark_source.reader import RangePartition, read_range
from tests.spark.arrow_floor_source import ArrowFloorSource
from tests.spark.conftest import load

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 3
VALUE_BYTES = 100
RECORDS = int(os.environ.get("KRAFTLOG_BENCH_RECORDS", "2000000"))  # per partition
BATCH = int(os.environ.get("KRAFTLOG_BENCH_BATCH", "1000000"))  # records per micro-batch
MIN_PARTITIONS = int(os.environ.get("KRAFTLOG_BENCH_MIN_PARTITIONS", "0"))
# Records per send_batch: about 100 KiB batches, what a busy producer writes.
PRODUCE_CHUNK = 1000
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def bench_topic(cluster):
    """The topic, filled; deleted afterwards (it holds hundreds of MB)."""
    cluster.create_topic("bench", PARTITIONS, 1)
    with Producer(cluster.bootstrap, acks=1) as producer:
        futures = [
            producer.send_batch("bench", p, [b"%0*d" % (VALUE_BYTES, i) for i in range(first, first + PRODUCE_CHUNK)])
            for first in range(0, RECORDS, PRODUCE_CHUNK)
            for p in range(PARTITIONS)
        ]
        producer.flush()
        for future in futures:
            future.result()
    yield "bench"
    with cluster.controller_client() as controllers:
        controllers.delete_topics(["bench"])


def test_streaming_read_records_per_second(spark, cluster, bench_topic, tmp_path, capsys):
    spark.dataSource.register(ArrowFloorSource)
    tasks = MIN_PARTITIONS or PARTITIONS
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": BATCH}
    if MIN_PARTITIONS:
        options["minPartitions"] = MIN_PARTITIONS
    batches = PARTITIONS * RECORDS // BATCH

    def kraftlog(starting_offsets: str = "earliest"):
        return load(spark.readStream, bootstrap=cluster.bootstrap, subscribe=bench_topic, **{**options, "startingOffsets": starting_offsets})

    def floor(rows: int = BATCH):
        reader = spark.readStream.format(ArrowFloorSource.name()).option("rows", rows).option("tasks", tasks)
        return reader.option("valueBytes", VALUE_BYTES).load()

    # Warm up both streaming paths (Python workers, JIT) on a small micro-batch each.
    near_end = json.dumps({bench_topic: {str(p): RECORDS - 20_000 for p in range(PARTITIONS)}})
    _run(kraftlog(near_end), 1, tmp_path / "warm-kraftlog")
    _run(floor(60_000), 1, tmp_path / "warm-floor")

    processes = _Processes(spark, cluster)
    measured = {}
    runs = [
        ("kraftlog source", kraftlog(), BATCH),
        ("no-work source (Spark's ceiling)", floor(), BATCH // tasks * tasks),  # whole rows per task
    ]
    for name, df, per_batch in runs:
        before = processes.snapshot()
        progress = _run(df, batches, tmp_path / name.split()[0])
        cpu = processes.spent(before, processes.snapshot())
        assert [p["numInputRows"] for p in progress] == [per_batch] * batches
        measured[name] = progress, cpu
    _report(
        capsys,
        f"streaming read into noop, local[2], maxOffsetsPerTrigger={BATCH:,}, {tasks} tasks per micro-batch, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
        + "".join(_table(name, progress, cpu) for name, (progress, cpu) in measured.items()),
    )


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
        "  of which zlib.crc32": lambda: zlib.crc32(fetch),
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


def _run(df, batches: int, checkpoint: Path) -> list[dict]:
    """Progress of the first `batches` micro-batches of `df` into noop, back to back."""
    query = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start()
    try:
        wait_for(lambda: len(_nonempty(query)) >= batches or query.exception(), 1800, f"{batches} micro-batches", interval_s=0.5)
        assert query.exception() is None
    finally:
        query.stop()
    return _nonempty(query)[:batches]


def _nonempty(query) -> list[dict]:
    return [p for p in query.recentProgress if p["numInputRows"]]


def _table(title: str, progress: list[dict], cpu_s: dict[str, float]) -> str:
    lines = [title, f"{'batch':>7} {'records':>10} {'ms':>6} {'records/s':>11}  Spark durations (ms)"]
    rates = []
    for p in progress:
        total_ms = p["durationMs"]["triggerExecution"]
        rates.append(p["numInputRows"] / total_ms * 1000)
        parts = ", ".join(f"{k}={v}" for k, v in sorted(p["durationMs"].items()) if k != "triggerExecution" and v)
        lines.append(f"{p['batchId']:>7} {p['numInputRows']:>10,} {total_ms:>6} {rates[-1]:>11,.0f}  {parts}")
    lines.append(f"  records/s per micro-batch: median {statistics.median(rates):,.0f}, best {max(rates):,.0f}")
    records = sum(p["numInputRows"] for p in progress)
    lines.append("  CPU per record: " + ", ".join(f"{name} {s / records * 1e6:.2f} us" for name, s in cpu_s.items()))
    return "\n".join(lines) + "\n"


class _Processes:
    """CPU time of the processes a query runs in: the JVM, its Python workers, the broker."""

    def __init__(self, spark, cluster) -> None:
        self.jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        self.broker = cluster.brokers[0].pid

    def snapshot(self) -> dict[tuple[str, int], float]:
        """CPU seconds so far by (role, pid)."""
        snap = {("JVM", self.jvm): _cpu_s(self.jvm, children=False)}
        snap.update({("Python workers", pid): _cpu_s(pid, children=True) for pid in _descendants(self.jvm)})
        snap[("broker", self.broker)] = _cpu_s(self.broker, children=False)
        return snap

    @staticmethod
    def spent(before: dict[tuple[str, int], float], after: dict[tuple[str, int], float]) -> dict[str, float]:
        """CPU seconds by role between two snapshots (a process that ended in between is not counted)."""
        spent: dict[str, float] = {}
        for (role, pid), seconds in after.items():
            spent[role] = spent.get(role, 0.0) + seconds - before.get((role, pid), 0.0)
        return spent


def _cpu_s(pid: int, children: bool) -> float:
    """utime + stime (+ reaped children's) of `pid`; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / TICKS_PER_S


def _descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _report(capsys, text: str) -> None:
    """Benchmarks print their figures even without -s."""
    with capsys.disabled():
        print("\n" + text)
