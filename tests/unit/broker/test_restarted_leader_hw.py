"""A broker restarted after a crash may lead again in the very epoch it led before: the
metadata it replays says so until its new registration moves the leadership. Its HW then
comes from the HW checkpoint, written every few seconds, so it is below the HW it had
published; answering with it would show consumers the HW going down. Until its HW reaches
the log end it had when it took the leadership, it answers OFFSET_NOT_AVAILABLE."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from data_plane.broker.fetch_serving import LATEST
from data_plane.requests import ProduceItem
from metadata_quorum.image import MetadataImage
from tests.unit.broker.test_stale_metadata import apply, at_epoch, broker, with_partition
from tests.unit.storage.conftest import batch

TP = ("t", 0)


def with_isr(image: MetadataImage, isr: tuple[int, ...]) -> MetadataImage:
    """``image`` with t-0's ISR changed in a later partition epoch, the leader epoch kept."""
    part = image.topics["t"].partitions[0]
    return with_partition(image, replace(part, isr=isr, partition_epoch=part.partition_epoch + 1))


def latest(replicas) -> tuple[str, int]:
    [answer] = replicas.reads.list_offsets([(*TP, LATEST, -1)])
    return answer.error.code.name, answer.offset


def test_a_leader_continuing_its_epoch_after_a_crash_hides_its_checkpointed_hw(tmp_path: Path) -> None:
    first = broker(tmp_path)
    alone = with_isr(at_epoch(1, 3), (1,))
    apply(first, alone)
    [answer] = asyncio.run(first.produce(1, 1000, [ProduceItem(*TP, batch(5))]))
    assert not answer.failed, answer.error

    assert latest(first) == ("NONE", 5)  # published
    first.logs.checkpoint_high_watermarks({TP: 2})  # the last checkpoint, written earlier
    first.logs.close()  # the crash: nothing more is written

    restarted = broker(tmp_path)
    apply(restarted, at_epoch(1, 3))  # replayed metadata: the same epoch, the old ISR
    partition = restarted.partitions[TP]
    assert partition.is_leader and partition.high_watermark == 2
    error, _ = latest(restarted)
    assert error == "OFFSET_NOT_AVAILABLE"
    apply(restarted, with_isr(at_epoch(1, 3), (1,)))  # alone in the ISR: the HW reaches the log end
    assert latest(restarted) == ("NONE", 5)
