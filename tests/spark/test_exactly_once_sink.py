"""The exactly-once streaming sink: a query copying a topic stops right after micro-batch 1's
transactions are committed but before Spark logs the commit, is restarted and stops again
after micro-batch 2 is written but before it is committed, then is restarted to its end: a
read_committed reader of the target sees every source record exactly once. It stops by failing
(in this process, the default run) or by a SIGKILL of its process (driver script, JVM and
Python workers; the soak run). The at-least-once sink failing in the same window duplicates
micro-batch 1 (the negative control). Also: the source's kafka.isolation.level."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from data_plane.client import Consumer, Producer
from tests.spark.conftest import load, produce
from tests.spark.eos_sink_query import MAX_OFFSETS_PER_TRIGGER, KillingKraftlogSource, run_until_killed, start_copy

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 2
RECORDS = 60  # per partition: micro-batches of 20 per partition, 0 to 2


def read_values(bootstrap: str, topic: str, isolation_level: str) -> Counter:
    """Every value of `topic` below its high watermark (read_uncommitted) or its last stable
    offset (read_committed), with how often it occurs."""
    tps = [(topic, p) for p in range(PARTITIONS)]
    values: Counter = Counter()
    with Consumer(bootstrap, isolation_level=isolation_level) as consumer:
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        ends = {tp: consumer.position(tp) for tp in tps}
        consumer.seek_to_beginning(tps)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to {ends} in 60 s"
            values.update(r.value for r in consumer.poll(200))
    return values


def expected_values() -> Counter:
    return Counter(f"{p}-{i}".encode() for p in range(PARTITIONS) for i in range(RECORDS))


def kill_after_commit(cluster, source: str, target: str, checkpoint: Path, log_path: Path) -> None:
    """Runs the copy until its driver dies right after committing micro-batch 1's sink
    writes: the commit log has micro-batch 0 only, the offset log micro-batch 1 too."""
    done = run_until_killed([cluster.bootstrap, source, target, str(checkpoint), "--kill-after-commit", "1"], log_path)
    assert done.returncode == -signal.SIGKILL, log_path.read_text()[-3000:]
    assert sorted(p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit()) == ["0"]
    assert "1" in {p.name for p in (checkpoint / "offsets").iterdir()}


def finish(spark, cluster, source: str, target: str, checkpoint: Path, exactly_once: bool) -> None:
    spark.dataSource.register(KillingKraftlogSource)
    query = start_copy(spark, cluster.bootstrap, source, target, checkpoint, exactly_once, {"availableNow": True})
    assert query.awaitTermination(180)
    assert query.exception() is None


def fail_at(spark, cluster, source: str, target: str, checkpoint: Path, exactly_once: bool, option: str) -> None:
    """Runs the copy in this process until it fails where `option` ({name: micro-batch}) says."""
    spark.dataSource.register(KillingKraftlogSource)
    query = start_copy(spark, cluster.bootstrap, source, target, checkpoint, exactly_once, {"processingTime": "0 seconds"}, option)
    with pytest.raises(Exception, match=next(iter(option))):
        query.awaitTermination(180)


def test_exactly_once_across_failures_around_the_commit(spark, cluster, tmp_path):
    """The windows of the kills below, in this process (short enough for the default run): the
    query fails right after micro-batch 1's sink commit, before Spark logs it; the restart
    replays micro-batch 1 (writing nothing), writes micro-batch 2 and fails before committing
    it (Spark's abort aborts its transactions); the next restart finishes."""
    cluster.create_topic("eosf-src", PARTITIONS, 1)
    cluster.create_topic("eosf-dst", PARTITIONS, 1)
    produce(cluster.bootstrap, "eosf-src", PARTITIONS, RECORDS)
    checkpoint, per_batch = tmp_path / "ckpt", MAX_OFFSETS_PER_TRIGGER
    fail_at(spark, cluster, "eosf-src", "eosf-dst", checkpoint, True, {"failAfterCommit": 1})
    assert sorted(p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit()) == ["0"]
    assert sum(read_values(cluster.bootstrap, "eosf-dst", "read_committed").values()) == 2 * per_batch
    fail_at(spark, cluster, "eosf-src", "eosf-dst", checkpoint, True, {"failBeforeCommit": 2})
    assert sum(read_values(cluster.bootstrap, "eosf-dst", "read_uncommitted").values()) == 3 * per_batch
    assert sum(read_values(cluster.bootstrap, "eosf-dst", "read_committed").values()) == 2 * per_batch
    finish(spark, cluster, "eosf-src", "eosf-dst", checkpoint, exactly_once=True)
    assert read_values(cluster.bootstrap, "eosf-dst", "read_committed") == expected_values()


@pytest.mark.soak
def test_exactly_once_across_kills_around_the_commit(spark, cluster, tmp_path):
    """Real kills (two Spark processes, about two minutes on the shared 2-core machine: in the
    soak run, `-m soak`)."""
    cluster.create_topic("eos-src", PARTITIONS, 1)
    cluster.create_topic("eos-dst", PARTITIONS, 1)
    produce(cluster.bootstrap, "eos-src", PARTITIONS, RECORDS)
    checkpoint = tmp_path / "ckpt"
    kill_after_commit(cluster, "eos-src", "eos-dst", checkpoint, tmp_path / "run1.log")
    per_batch = MAX_OFFSETS_PER_TRIGGER
    assert sum(read_values(cluster.bootstrap, "eos-dst", "read_committed").values()) == 2 * per_batch  # 0 and 1 committed

    # The restart replays micro-batch 1 (already committed: nothing written), writes 2, dies before committing it.
    done = run_until_killed([cluster.bootstrap, "eos-src", "eos-dst", str(checkpoint), "--kill-before-commit", "2"], tmp_path / "run2.log")
    assert done.returncode == -signal.SIGKILL, (tmp_path / "run2.log").read_text()[-3000:]
    assert sum(read_values(cluster.bootstrap, "eos-dst", "read_uncommitted").values()) == 3 * per_batch
    committed = read_values(cluster.bootstrap, "eos-dst", "read_committed")
    assert sum(committed.values()) == 2 * per_batch and max(committed.values()) == 1  # micro-batch 2 is open

    finish(spark, cluster, "eos-src", "eos-dst", checkpoint, exactly_once=True)
    assert read_values(cluster.bootstrap, "eos-dst", "read_committed") == expected_values()
    # The default source isolation (read_committed) agrees; read_uncommitted also sees the aborted micro-batch 2.
    rows = load(spark.read, bootstrap=cluster.bootstrap, subscribe="eos-dst").collect()
    assert Counter(r.value for r in rows) == expected_values()
    everything = load(spark.read, bootstrap=cluster.bootstrap, subscribe="eos-dst", **{"kafka.isolation.level": "read_uncommitted"})
    assert everything.count() == PARTITIONS * RECORDS + per_batch


def test_at_least_once_sink_duplicates_a_batch_replayed_after_its_commit(spark, cluster, tmp_path):
    """The negative control: the at-least-once sink's query fails right after micro-batch 1's
    sink commit, before Spark logs it; restarted, it writes micro-batch 1 again."""
    cluster.create_topic("alo-src", PARTITIONS, 1)
    cluster.create_topic("alo-dst", PARTITIONS, 1)
    produce(cluster.bootstrap, "alo-src", PARTITIONS, RECORDS)
    checkpoint = tmp_path / "ckpt"
    fail_at(spark, cluster, "alo-src", "alo-dst", checkpoint, False, {"failAfterCommit": 1})
    assert sorted(p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit()) == ["0"]
    finish(spark, cluster, "alo-src", "alo-dst", checkpoint, exactly_once=False)
    values = read_values(cluster.bootstrap, "alo-dst", "read_committed")
    assert set(values) == set(expected_values())
    assert sum(n - 1 for n in values.values()) == MAX_OFFSETS_PER_TRIGGER  # micro-batch 1, twice


def test_tasks_of_a_partly_committed_micro_batch(cluster):
    """The tasks' side without Spark (spark_source/transactional_writer.py): the driver
    committed task 0's transaction of micro-batch 1 and died before task 1's. On replay,
    task 0 finds its marker and writes nothing; task 1's new attempt aborts the open
    transaction and writes its rows again; once committed, each row is there once."""
    import pyarrow as pa

    from spark_source.options import parse_sink
    from spark_source.transactional_writer import TaskIdentity, commit_prepared, write_transaction

    cluster.create_topic("eos-tasks", PARTITIONS, 1)
    opts = parse_sink({"bootstrap": cluster.bootstrap, "topic": "eos-tasks"}, streaming=True)

    def write(batch: int, task: int):
        rows = pa.RecordBatch.from_pydict({"value": [f"{task}-{batch}-{i}".encode() for i in range(5)],
                                           "partition": pa.array([task] * 5, pa.int32())})
        return write_transaction(opts, [rows], TaskIdentity("q-tasks", batch, task))

    commit_prepared(opts, [write(0, 0), write(0, 1)])
    first = [write(1, 0), write(1, 1)]
    commit_prepared(opts, first[:1])  # the driver dies before committing task 1's
    replay = [write(1, 0), write(1, 1)]
    assert replay[0].already_committed and replay[0].prepared is None
    assert not replay[1].already_committed and replay[1].records == 5
    assert replay[1].prepared.producer_epoch > first[1].prepared.producer_epoch  # the old attempt is fenced
    commit_prepared(opts, replay)
    expected = Counter(f"{task}-{batch}-{i}".encode() for task in range(PARTITIONS) for batch in range(2) for i in range(5))
    assert read_values(cluster.bootstrap, "eos-tasks", "read_committed") == expected
    assert sum(read_values(cluster.bootstrap, "eos-tasks", "read_uncommitted").values()) == sum(expected.values()) + 5


def test_source_isolation_level(spark, cluster):
    """A committed, an aborted and an open transaction: the default read sees the committed one
    only (and stops at the open one's first offset, the last stable offset); read_uncommitted
    sees every record."""
    cluster.create_topic("iso", 1, 1)
    with Producer(cluster.bootstrap, transactional_id="iso-writer") as producer:
        producer.init_transactions()
        for outcome, values in (("commit", [b"c1", b"c2"]), ("abort", [b"a1", b"a2"]), ("open", [b"o1"])):
            producer.begin_transaction()
            for value in values:
                producer.send("iso", value, partition=0)
            if outcome == "commit":
                producer.commit_transaction()
            elif outcome == "abort":
                producer.abort_transaction()
            else:
                producer.flush()
    try:
        committed = [r.value for r in load(spark.read, bootstrap=cluster.bootstrap, subscribe="iso").collect()]
        everything = [r.value for r in load(spark.read, bootstrap=cluster.bootstrap, subscribe="iso",
                                            **{"kafka.isolation.level": "read_uncommitted"}).collect()]
    finally:
        with Producer(cluster.bootstrap, transactional_id="iso-writer") as successor:
            successor.init_transactions()  # aborts the open transaction
    assert committed == [b"c1", b"c2"]
    assert everything == [b"c1", b"c2", b"a1", b"a2", b"o1"]
