"""The source on a real Spark standalone cluster: a master and two workers, each its own
JVM (tests/spark/spark_processes.py), with the driver in a separate process
(tests/spark/file_sink_query.py --master)."""

import json
import os
import sys

import pytest

from tests.spark.conftest import produce
from tests.spark.file_sink_query import assert_each_record_once, kill_mid_batch
from tests.spark.spark_processes import run_driver, standalone_cluster
from tests.spark.traced_source import TracedKraftlogSource, read_traces

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone"), workers=2) as spark_cluster:
        yield spark_cluster


def test_exactly_once_and_batch_read_on_standalone_cluster(cluster, standalone, tmp_path):
    """The exactly-once test with the driver on the standalone master: the driver is
    SIGKILLed while batch 2 is half written, a new driver finishes from the checkpoint, then
    reads the topic in batch. Every read() ran in a Python worker under an executor of one
    of the two worker JVMs (both used), never in a driver."""
    cluster.create_topic("standalone3", 3, 1)
    produce(cluster.bootstrap, "standalone3", 3, 100)
    out, ckpt, traces = tmp_path / "out", tmp_path / "ckpt", tmp_path / "traces"
    traces.mkdir()
    cluster_args = ("--master", standalone.master_url, "--trace-dir", str(traces))
    kill_mid_batch(cluster.bootstrap, "standalone3", out, ckpt, tmp_path / "killed.log", extra_args=cluster_args)

    produce(cluster.bootstrap, "standalone3", 3, 50, start=100)
    batch_rows = tmp_path / "batch.json"
    log_path = tmp_path / "driver.log"
    command = [sys.executable, "-m", "tests.spark.file_sink_query", cluster.bootstrap, "standalone3", str(out), str(ckpt), *cluster_args]
    driver = run_driver([*command, "--batch-read", str(batch_rows)], log_path, 400)
    assert driver.returncode == 0, log_path.read_text()[-3000:]
    assert_each_record_once(out, {p: 150 for p in range(3)})
    rows = json.loads(batch_rows.read_text())
    assert sorted((p, o) for p, o, _ in rows) == [(p, o) for p in range(3) for o in range(150)]
    assert all(v == f"{p}-{o}" for p, o, v in rows)

    recorded = read_traces(traces)
    assert len(recorded) >= 6, recorded  # two stream batches before the kill, more after, the batch read
    used = [worker_of(trace, standalone.worker_pids, driver.pid) for trace in recorded]
    assert set(used) == standalone.worker_pids


def worker_of(trace: dict, worker_pids: set[int], driver_pid: int) -> int:
    """The worker JVM under which a traced read() ran; fails if it ran under the driver."""
    chain = {trace["pid"], *trace["ancestors"]}
    assert driver_pid not in chain, f"read() ran in the driver's process tree: {trace}"
    found = chain & worker_pids
    assert len(found) == 1, f"read() ran under none of the worker JVMs {sorted(worker_pids)}: {trace}"
    return found.pop()


def test_worker_check_catches_a_driver_side_read(spark, cluster, tmp_path):
    """Negative control: in local mode the traced read runs under this process (the driver),
    and `worker_of` says so."""
    spark.dataSource.register(TracedKraftlogSource)
    cluster.create_topic("traced-local", 1, 1)
    produce(cluster.bootstrap, "traced-local", 1, 5)
    reader = spark.read.format(TracedKraftlogSource.name()).option("traceDir", str(tmp_path))
    rows = reader.option("bootstrap", cluster.bootstrap).option("subscribe", "traced-local").load().collect()
    assert len(rows) == 5
    (trace,) = read_traces(tmp_path)
    with pytest.raises(AssertionError, match="driver's process tree"):
        worker_of(trace, {-1}, os.getpid())


