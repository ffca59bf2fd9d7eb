"""The streaming-read comparison of the benchmark: the kraftlog source against a source that
does no work (tests/spark/arrow_floor_source.py, Spark's own ceiling), one after the other
in one session, each micro-batch into the `noop` sink, with Spark's duration breakdown and
the CPU time per record of the JVMs, the Python workers and the broker.

tests/spark/test_benchmark.py runs it in its local[2] session; for a standalone cluster the
driver must be its own process (one SparkContext per process), so it also runs as:

    python -m tests.spark.read_benchmark BOOTSTRAP TOPIC --master spark://… --records N
        --batch M --value-bytes B --worker-pids PID,PID --broker-pid PID

and prints the same report.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from server_common.waiting import wait_for


@dataclass(frozen=True)
class ReadBench:
    """What the comparison reads: `records` per partition of `topic`, `batch` records per
    micro-batch (maxOffsetsPerTrigger), `min_partitions` (0: one task per partition)."""

    bootstrap: str
    topic: str
    partitions: int
    records: int
    batch: int
    value_bytes: int
    min_partitions: int = 0


def compare_sources(spark, bench: ReadBench, processes: Processes, work_dir: Path, where: str) -> str:
    """Runs the kraftlog source, then the no-work source, over the same number of
    micro-batches after a warm-up of both; returns the report (both tables)."""
    from tests.spark.arrow_floor_source import ArrowFloorSource
    from tests.spark.conftest import load

    spark.dataSource.register(ArrowFloorSource)
    tasks = bench.min_partitions or bench.partitions
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": bench.batch}
    if bench.min_partitions:
        options["minPartitions"] = bench.min_partitions
    batches = bench.partitions * bench.records // bench.batch

    def kraftlog(starting_offsets: str = "earliest"):
        return load(spark.readStream, bootstrap=bench.bootstrap, subscribe=bench.topic, **{**options, "startingOffsets": starting_offsets})

    def floor(rows: int = bench.batch):
        reader = spark.readStream.format(ArrowFloorSource.name()).option("rows", rows).option("tasks", tasks)
        return reader.option("valueBytes", bench.value_bytes).load()

    # Warm up both streaming paths (Python workers, JIT) on two full-size micro-batches each:
    # after one small micro-batch the JIT was still compiling the shared Arrow-to-row path,
    # so whichever source ran first in a round paid for it (0.4 us per record more JVM CPU).
    run_noop(kraftlog(), 2, work_dir / "warm-kraftlog")
    run_noop(floor(), 2, work_dir / "warm-floor")

    # Twice each, in both orders, so that neither always runs on a JVM the other has warmed
    # further; each pair is compared on its own (the machine's load moves between pairs).
    kraftlog_name, floor_name = "kraftlog source", "no-work source (Spark's ceiling)"
    report = [
        f"streaming read into noop, {where}, maxOffsetsPerTrigger={bench.batch:,}, {tasks} tasks per micro-batch, "
        f"{batches} micro-batches per query, on {os.cpu_count()} cores"
    ]
    for round_ in (1, 2):
        measured = {}
        load_before = os.getloadavg()[0]
        pair = [(kraftlog_name, kraftlog, bench.batch), (floor_name, floor, bench.batch // tasks * tasks)]
        for name, query, per_batch in pair if round_ == 1 else reversed(pair):
            before = processes.snapshot()
            progress = run_noop(query(), batches, work_dir / f"{name.split()[0]}-{round_}")
            cpu = processes.spent(before, processes.snapshot())
            assert [p["numInputRows"] for p in progress] == [per_batch] * batches  # whole rows per task for the floor
            measured[name] = progress, cpu
        kraftlog_rates, floor_rates = (_rates(measured[name][0]) for name in (kraftlog_name, floor_name))
        report.append(f"round {round_}, load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
        report.extend(_table(name, progress, cpu) for name, (progress, cpu) in measured.items())
        report.append(
            f"round {round_}: kraftlog / no-work, medians: {statistics.median(kraftlog_rates) / statistics.median(floor_rates):.0%}; "
            f"kraftlog's first micro-batch took {statistics.median(kraftlog_rates) / kraftlog_rates[0]:.2f}x its median's time\n"
        )
    return "\n".join(report)


def run_noop(df, batches: int, checkpoint: Path) -> list[dict]:
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


def _rates(progress: list[dict]) -> list[float]:
    return [p["numInputRows"] / p["durationMs"]["triggerExecution"] * 1000 for p in progress]


def _table(title: str, progress: list[dict], cpu_s: dict[str, float]) -> str:
    lines = [title, f"{'batch':>7} {'records':>10} {'ms':>6} {'records/s':>11}  Spark durations (ms)"]
    rates = _rates(progress)
    for p, rate in zip(progress, rates):
        parts = ", ".join(f"{k}={v}" for k, v in sorted(p["durationMs"].items()) if k != "triggerExecution" and v)
        lines.append(f"{p['batchId']:>7} {p['numInputRows']:>10,} {p['durationMs']['triggerExecution']:>6} {rate:>11,.0f}  {parts}")
    lines.append(f"  records/s per micro-batch: median {statistics.median(rates):,.0f}, best {max(rates):,.0f}")
    records = sum(p["numInputRows"] for p in progress)
    lines.append("  CPU per record: " + ", ".join(f"{name} {s / records * 1e6:.2f} us" for name, s in sorted(cpu_s.items())))
    return "\n".join(lines) + "\n"


class Processes:
    """CPU time of the processes a query runs in: the JVMs (the driver's and, on a cluster,
    the executors under `worker_pids`), the Python workers under them, and the broker."""

    def __init__(self, driver_jvm: int, broker: int, worker_pids: tuple[int, ...] = ()) -> None:
        self.roots = (driver_jvm, *worker_pids)
        self.driver_jvm = driver_jvm
        self.broker = broker

    def snapshot(self) -> dict[tuple[str, int], float]:
        """CPU seconds so far by (role, pid); the worker daemons themselves only schedule
        and are left out."""
        snap = {("JVM", self.driver_jvm): cpu_seconds(self.driver_jvm, children=False)}
        for root in self.roots:
            for pid in _descendants(root):
                role = "JVM" if _command(pid) == "java" else "Python workers"
                snap[(role, pid)] = cpu_seconds(pid, children=role != "JVM")
        snap[("broker", self.broker)] = cpu_seconds(self.broker, children=False)
        return snap

    @staticmethod
    def spent(before: dict[tuple[str, int], float], after: dict[tuple[str, int], float]) -> dict[str, float]:
        """CPU seconds by role between two snapshots (a process that ended in between is not counted)."""
        spent: dict[str, float] = {}
        for (role, pid), seconds in after.items():
            spent[role] = spent.get(role, 0.0) + seconds - before.get((role, pid), 0.0)
        return spent


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, children: bool) -> float:
    """utime + stime (+ reaped children's) of `pid`; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / TICKS_PER_S


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


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


def main(argv: list[str] | None = None) -> int:
    """The comparison with the driver in this process against a standalone master."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("--master", required=True, help="spark://host:port of a standalone master")
    parser.add_argument("--executors", type=int, default=2, help="one 1-core executor per worker")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--records", type=int, required=True, help="per partition")
    parser.add_argument("--batch", type=int, required=True, help="maxOffsetsPerTrigger")
    parser.add_argument("--value-bytes", type=int, required=True)
    parser.add_argument("--min-partitions", type=int, default=0)
    parser.add_argument("--worker-pids", required=True, help="comma-separated pids of the worker JVMs")
    parser.add_argument("--broker-pid", type=int, required=True)
    parser.add_argument("--work-dir", type=Path, required=True, help="checkpoints go here")
    args = parser.parse_args(argv)
    from tests.spark.session import start_session
    from tests.spark.spark_processes import standalone_conf

    spark = start_session("kraftlog-read-benchmark", standalone_conf(args.master, args.executors))
    try:
        bench = ReadBench(args.bootstrap, args.topic, args.partitions, args.records, args.batch, args.value_bytes, args.min_partitions)
        driver_jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        workers = tuple(int(p) for p in args.worker_pids.split(","))
        report = compare_sources(spark, bench, Processes(driver_jvm, args.broker_pid, workers), args.work_dir, f"standalone cluster ({args.executors} workers, 1 core each)")
    finally:
        spark.stop()
    print(report, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
