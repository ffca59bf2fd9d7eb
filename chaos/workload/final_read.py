"""After the faults heal: read each partition from its log start up to its high watermark.

The final read is the checker's ground truth for what the log holds; it runs once the
replicas have been given their deadline to come back, and says whether it got all the way
to the HW (a partition with no leader to answer gives an empty, incomplete read).
"""

from __future__ import annotations

import time

from chaos.history import FinalReadOp, History, Read
from chaos.workload.settings import WorkloadSettings
from data_plane.client import Admin, Consumer, KraftlogError
from data_plane.client.offset_lookup import EARLIEST, LATEST
from server_common.waiting import wait_for


def wait_for_leaders(bootstrap: str, settings: WorkloadSettings, timeout_s: float) -> None:
    """Every partition led, with its full replica set in sync (as far as the deadline allows)."""

    def healthy() -> bool:
        with Admin(bootstrap, request_timeout_ms=2_000) as admin:
            topic = admin.describe_topics([settings.topic])[settings.topic]
        return all(p.leader >= 0 and len(p.isr) == len(p.replicas) for p in topic.partitions.values())

    wait_for(healthy, timeout_s, f"every partition of {settings.topic} led with a full ISR")


def final_reads(bootstrap: str, settings: WorkloadSettings, history: History, timeout_s: float) -> list[FinalReadOp]:
    """One FinalReadOp per partition, each read within ``timeout_s``."""
    return [_read_partition(bootstrap, settings, partition, history, timeout_s) for partition in range(settings.partitions)]


def _read_partition(bootstrap: str, settings: WorkloadSettings, partition: int, history: History, timeout_s: float) -> FinalReadOp:
    tp = (settings.topic, partition)
    deadline = time.monotonic() + timeout_s
    try:
        with Admin(bootstrap, request_timeout_ms=int(timeout_s * 1000)) as admin:
            log_start = admin.list_offsets({tp: EARLIEST})[tp].offset
            high_watermark = admin.list_offsets({tp: LATEST})[tp].offset
    except KraftlogError:  # no leader answered: a read that got nothing (acknowledged writes are then unseen)
        return FinalReadOp(partition, history.now(), 0, 0, [], complete=False)
    reads: list[Read] = []
    with Consumer(bootstrap, fetch_max_wait_ms=200, client_id="final-read", isolation_level=settings.isolation_level,
                  fetch_mode=settings.fetch_mode) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, log_start)
        while consumer.position(tp) < high_watermark and time.monotonic() < deadline:
            try:
                polled = consumer.poll_batches(200).get(tp, [])
            except KraftlogError as error:
                if not error.retriable:
                    raise
                continue  # the consumer backs off on its own; the deadline bounds this
            reads.extend((o, v.decode()) for b in polled for o, v in zip(b.offsets, b.values))
        complete = consumer.position(tp) >= high_watermark
    return FinalReadOp(partition, history.now(), log_start, high_watermark, reads, complete)
