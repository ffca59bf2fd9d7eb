"""A transaction marker is answered acks=all (`ReplicaManager.wait_replicated`, what
WriteTxnMarkers awaits): only once the HW covers it while the broker still leads at the epoch
it was written under. A leadership change first fails the wait (NOT_LEADER_OR_FOLLOWER), so the
coordinator writes the marker again instead of counting one a truncation could remove."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from immutables import Map

from data_plane.partition_errors import PartitionError
from data_plane.control_batch import ControlType, encode_marker
from server_common.errors import ErrorCode
from metadata_quorum.delta import MetadataDelta
from metadata_quorum.image import MetadataImage
from tests.unit.broker.test_stale_metadata import at_epoch, broker, with_partition

TP = ("t", 0)
MARKER = encode_marker(ControlType.COMMIT, 5, 1, 0, 1_767_225_600_000)


async def apply(replicas, image) -> None:
    previous = replicas.image or MetadataImage.empty(image.cluster_id)
    await replicas.on_metadata(MetadataDelta.from_snapshot(previous, image), image)


async def written_and_waiting(replicas) -> asyncio.Future:
    """Broker 1 leads t-0 at epoch 1 with broker 2 in the ISR (it never fetches): a marker is
    appended and its wait parked, still pending."""
    await apply(replicas, at_epoch(1, 1))
    offset = replicas.write_marker(*TP, MARKER)
    waiting = asyncio.ensure_future(replicas.wait_replicated(*TP, offset + 1, 10_000))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done() and replicas.partitions[TP].high_watermark <= offset
    return waiting


def test_a_marker_is_answered_once_the_hw_covers_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = broker(tmp_path)
        waiting = await written_and_waiting(replicas)
        part = at_epoch(1, 1).topics["t"].partitions[0]
        await apply(replicas, with_partition(at_epoch(1, 1), replace(part, isr=(1,), partition_epoch=part.partition_epoch + 1)))
        await asyncio.wait_for(waiting, 5)  # the ISR is the leader alone: the HW covers the marker
        assert replicas.partitions[TP].high_watermark == replicas.partitions[TP].log_end_offset
    asyncio.run(scenario())


def test_a_leader_change_before_the_hw_covers_the_marker_fails_its_wait(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = broker(tmp_path)
        waiting = await written_and_waiting(replicas)
        await apply(replicas, at_epoch(2, 2))  # broker 2 leads now: the marker may be truncated
        try:
            await asyncio.wait_for(waiting, 5)
            raise AssertionError("the marker was not committed at the epoch it was written under: its wait must fail")
        except PartitionError as refused:
            assert refused.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and "lost leadership" in refused.message
    asyncio.run(scenario())


def test_a_marker_the_hw_does_not_reach_in_time_is_answered_timed_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = broker(tmp_path)
        await apply(replicas, at_epoch(1, 1))
        offset = replicas.write_marker(*TP, MARKER)
        try:
            await replicas.wait_replicated(*TP, offset + 1, 50)
            raise AssertionError("broker 2 never fetched: the wait must time out")
        except PartitionError as refused:
            assert refused.code == ErrorCode.REQUEST_TIMED_OUT
    asyncio.run(scenario())


def test_a_marker_is_refused_before_it_is_appended_while_the_isr_is_below_min_insync(tmp_path: Path) -> None:
    """As an acks=all produce: NOT_ENOUGH_REPLICAS, and nothing in the log (the coordinator
    retries; a marker appended and then failed would be left behind at every retry)."""
    async def scenario() -> None:
        replicas = broker(tmp_path)
        image = at_epoch(1, 1)
        part = image.topics["t"].partitions[0]
        alone = with_partition(image, replace(part, isr=(1,)))
        await apply(replicas, replace(alone, configs=Map({"t": Map({"min.insync.replicas": "2"})})))
        end = replicas.partitions[TP].log_end_offset
        try:
            replicas.write_marker(*TP, MARKER)
            raise AssertionError("one in-sync replica of min.insync.replicas=2: the marker must be refused")
        except PartitionError as refused:
            assert refused.code == ErrorCode.NOT_ENOUGH_REPLICAS and "nothing was written" in refused.message
        assert replicas.partitions[TP].log_end_offset == end
    asyncio.run(scenario())
