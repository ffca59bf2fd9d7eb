"""Where reads start: startingTimestamp (ListOffsets by time) and failOnDataLoss against
offsets that retention really deleted."""

import time

import pytest

from data_plane.client import Admin, Producer
from server_common.waiting import wait_for
from tests.spark.conftest import load, produce, run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _batch(spark, bootstrap: str, topic: str, **options) -> list[tuple[int, int]]:
    df = load(spark.read, bootstrap=bootstrap, subscribe=topic, **options)
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def _stream(spark, bootstrap: str, topic: str, checkpoint, **options) -> list[tuple[int, int]]:
    """(partition, offset) of every row an availableNow query reads; raises what the query raised."""
    rows: list[tuple[int, int]] = []
    df = load(spark.readStream, bootstrap=bootstrap, subscribe=topic, **options)
    run_available_now(df, checkpoint, lambda batch, _: rows.extend((r.partition, r.offset) for r in batch.collect()))
    return sorted(rows)


def test_starting_timestamp(spark, cluster, tmp_path):
    """Partition 0 has records stamped every second for 20 s, partition 1 only for the first
    5 s: from second 10, partition 0 starts at offset 10 and partition 1 has no such record."""
    cluster.create_topic("stamped", 2, 1)
    t0 = time.time_ns() // 1_000_000 - 60_000  # recent: retention by time never applies
    produce(cluster.bootstrap, "stamped", 1, 20, timestamp_ms=lambda p, i: t0 + 1000 * i)
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(5):
            producer.send("stamped", f"1-{i}".encode(), partition=1, timestamp_ms=t0 + 1000 * i)
        producer.flush()
    start = t0 + 10_000

    with pytest.raises(Exception, match=r"(?s)no record at or after startingTimestamp=\d+ in stamped-1.*startingOffsetsByTimestampStrategy"):
        _batch(spark, cluster.bootstrap, "stamped", startingTimestamp=start)
    latest = {"startingTimestamp": start, "startingOffsetsByTimestampStrategy": "latest"}
    expected = [(0, o) for o in range(10, 20)]
    assert _batch(spark, cluster.bootstrap, "stamped", **latest) == expected
    assert _stream(spark, cluster.bootstrap, "stamped", tmp_path / "ckpt", **latest) == expected
    assert _batch(spark, cluster.bootstrap, "stamped", startingTimestamp=t0 - 1000) == (
        [(0, o) for o in range(20)] + [(1, o) for o in range(5)]
    )


def test_fail_on_data_loss_after_retention(spark, cluster, tmp_path):
    """Small segments and retention.bytes: the broker deletes the oldest segments. A query
    asked to start at offset 0 fails naming the lost offsets, or skips them with
    failOnDataLoss=false."""
    cluster.create_topic("retained", 1, 1, {"segment.bytes": "1024"})
    with Producer(cluster.bootstrap, acks="all") as producer:
        for first in range(0, 300, 10):  # one batch per call: segments roll between batches
            producer.send_batch("retained", 0, [f"0-{i}".encode() for i in range(first, first + 10)]).result()
    # Size retention set once every segment exists: one retention pass deletes the whole
    # prefix, so the log start offset seen next is final.
    with cluster.controller_client() as controllers:
        controllers.alter_configs("retained", {"retention.bytes": "2048"})
    log_start = wait_for(lambda: _log_start(cluster.bootstrap, ("retained", 0)), 30, "retention to delete segments")
    assert 0 < log_start < 300
    from_zero = {"startingOffsets": '{"retained":{"0":0}}'}

    lost = rf"(?s)retained-0: offsets 0\.\.{log_start - 1} are no longer available \(log start offset is {log_start}\)"
    with pytest.raises(Exception, match=lost):
        _batch(spark, cluster.bootstrap, "retained", **from_zero)
    with pytest.raises(Exception, match=lost):
        _stream(spark, cluster.bootstrap, "retained", tmp_path / "fail", **from_zero)
    kept = [(0, o) for o in range(log_start, 300)]
    assert _stream(spark, cluster.bootstrap, "retained", tmp_path / "skip", failOnDataLoss="false", **from_zero) == kept
    assert _batch(spark, cluster.bootstrap, "retained", failOnDataLoss="false", **from_zero) == kept
    assert _log_start(cluster.bootstrap, ("retained", 0)) == log_start  # nothing moved under the checks


def _log_start(bootstrap: str, tp: tuple[str, int]) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({tp: -2})[tp].offset
