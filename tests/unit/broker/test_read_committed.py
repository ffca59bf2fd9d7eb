"""read_committed on a real broker's replica manager and partition log: transactional batches
and markers appended, the LSO and the aborted transactions as Fetch and ListOffsets answer
them, the records path leaving markers and aborted records out, and all of it rebuilt from
the log after a restart."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from data_plane import record_batch
from data_plane.broker.fetch_serving import LATEST
from data_plane.broker.isolation import ReadEnd, read_end, readable_bytes
from data_plane.requests import FetchItem, ProduceItem
from data_plane.broker.service import batches_to_records
from data_plane.control_batch import ControlType, encode_marker
from data_plane.replication.transaction_index import AbortedTxn
from tests.unit.broker.test_stale_metadata import apply, at_epoch, broker, with_partition

TP = ("t", 0)
T0 = 1_767_225_600_000


def txn_batch(pid: int, seq: int, values: list[bytes]) -> bytes:
    return record_batch.encode_batch(values, timestamps_ms=T0, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                     transactional=True)


def produce(replicas, data: bytes) -> None:
    [answer] = asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, data)]))
    assert not answer.failed, answer.error


def mark(replicas, pid: int, control_type: ControlType) -> None:
    partition = replicas.partitions[TP]
    replicas.carry_out(partition, partition.append_markers_as_leader(encode_marker(control_type, pid, 1, 0, T0), T0))


def fetch(replicas, read_committed: bool):
    [result] = asyncio.run(replicas.reads.fetch(0, 0, 1 << 20, [FetchItem(*TP, 0, 0)], read_committed))
    assert not result.failed, result.error
    return result


def latest(replicas, read_committed: bool) -> int:
    [answer] = replicas.reads.list_offsets([(*TP, LATEST, -1)], read_committed)
    return answer.offset


def values(result) -> list[bytes]:
    return [r.value for r in batches_to_records(result.data, 0, aborted=result.aborted)]


def leader_alone(tmp_path: Path):
    replicas = broker(tmp_path)
    image = at_epoch(1, 3)
    part = image.topics["t"].partitions[0]
    apply(replicas, with_partition(image, replace(part, isr=(1,), partition_epoch=part.partition_epoch + 1)))
    return replicas


def test_read_committed_sees_only_committed_data_below_the_lso(tmp_path: Path) -> None:
    replicas = leader_alone(tmp_path)
    produce(replicas, record_batch.encode_batch([b"plain"], timestamps_ms=T0))   # 0
    produce(replicas, txn_batch(11, 0, [b"a1", b"a2"]))                            # 1-2 producer 11 (will abort)
    produce(replicas, txn_batch(22, 0, [b"c1"]))                                   # 3   producer 22 (will commit)
    assert latest(replicas, False) == 4 and latest(replicas, True) == 1
    assert values(fetch(replicas, True)) == [b"plain"]
    assert values(fetch(replicas, False)) == [b"plain", b"a1", b"a2", b"c1"]      # read_uncommitted as today

    mark(replicas, 11, ControlType.ABORT)                                          # 4
    assert latest(replicas, True) == 3                                             # producer 22 still open
    mark(replicas, 22, ControlType.COMMIT)                                         # 5
    assert latest(replicas, True) == latest(replicas, False) == 6
    committed = fetch(replicas, True)
    assert committed.last_stable_offset == 6
    assert committed.aborted == [AbortedTxn(1, 4, 11)]
    assert values(committed) == [b"plain", b"c1"]                                  # aborted and markers left out
    uncommitted = fetch(replicas, False)
    assert uncommitted.aborted == [] and values(uncommitted) == [b"plain", b"a1", b"a2", b"c1"]  # markers never records
    assert sum(1 for b in record_batch.decode_batches(uncommitted.data) if b.header.is_control) == 2

    replicas.logs.close()
    restarted = leader_alone(tmp_path)                                             # rebuilt from the log
    again = fetch(restarted, True)
    assert (again.last_stable_offset, again.aborted, values(again)) == (6, [AbortedTxn(1, 4, 11)], [b"plain", b"c1"])


def test_an_open_transaction_survives_a_restart_and_holds_the_lso(tmp_path: Path) -> None:
    replicas = leader_alone(tmp_path)
    produce(replicas, txn_batch(11, 0, [b"x"]))
    produce(replicas, record_batch.encode_batch([b"later"], timestamps_ms=T0))
    replicas.logs.close()
    restarted = leader_alone(tmp_path)
    assert latest(restarted, True) == 0 and latest(restarted, False) == 2
    assert values(fetch(restarted, True)) == []


def test_coordinator_writes_are_checked_by_epoch_not_sequence_and_markers_reach_the_listeners(tmp_path: Path) -> None:
    """KIP-447's offset writes carry the producer's id and epoch but no sequence of its own:
    two at sequence 0 both append (a client's second batch at 0 is a duplicate), an older
    epoch is refused; every marker the broker writes is told to ``marker_listeners``."""
    replicas = leader_alone(tmp_path)
    heard = []
    replicas.marker_listeners.append(lambda *marker: heard.append(marker))

    def coordinator_write(epoch: int, from_coordinator: bool = True):
        batch = record_batch.encode_batch([b"o"], timestamps_ms=T0, producer_id=5, producer_epoch=epoch, base_sequence=0,
                                          transactional=True)
        [answer] = asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch, from_coordinator=from_coordinator)]))
        return answer

    assert [coordinator_write(1).base_offset, coordinator_write(1).base_offset] == [0, 1]
    client_retry = coordinator_write(1, from_coordinator=False)
    assert client_retry.base_offset == 1  # negative control: a client's batch at sequence 0 again is a duplicate
    assert coordinator_write(0).error.code.name == "INVALID_PRODUCER_EPOCH"
    offset = replicas.write_marker(*TP, encode_marker(ControlType.COMMIT, 5, 1, 0, T0))
    assert heard == [("t", 0, 5, True, offset)] and offset == 2


def test_a_fetch_at_a_marker_waits_for_readable_data_and_says_where_to_continue(tmp_path: Path) -> None:
    """A marker counted towards min_bytes: a Fetch at it answered at once with no records
    (RECORDS) and nothing saying where to continue, so a long-polling client spun on it."""
    replicas = leader_alone(tmp_path)
    produce(replicas, txn_batch(11, 0, [b"a"]))                                    # 0
    mark(replicas, 11, ControlType.COMMIT)                                         # 1
    [at_once] = asyncio.run(replicas.reads.fetch(0, 1, 1 << 20, [FetchItem(*TP, 1, 0)], True))  # no wait: the marker, and past it
    assert (values(at_once), at_once.next_offset) == ([], 2)

    async def long_poll_while_a_record_arrives():
        poll = asyncio.ensure_future(replicas.reads.fetch(30_000, 1, 1 << 20, [FetchItem(*TP, 1, 0)], True))
        for _ in range(3):
            await asyncio.sleep(0)  # let the poll read and start waiting
        assert not poll.done(), "a marker alone ended the long poll"
        [produced] = await replicas.produce(1, 1000, [ProduceItem(*TP, record_batch.encode_batch([b"b"], timestamps_ms=T0))])
        assert not produced.failed, produced.error
        return await asyncio.wait_for(poll, 10)

    [result] = asyncio.run(long_poll_while_a_record_arrives())
    assert (values(result), result.next_offset) == ([b"b"], 3)


def test_readable_bytes_leave_out_markers_and_aborted_batches_and_the_next_offset_passes_them() -> None:
    def at(data: bytes, base_offset: int) -> bytes:
        stamped = bytearray(data)
        record_batch.stamp_batch(stamped, 0, base_offset=base_offset, leader_epoch=0)
        return bytes(stamped)

    plain = at(record_batch.encode_batch([b"p"], timestamps_ms=T0), 10)
    aborted = at(txn_batch(11, 0, [b"x", b"y"]), 11)
    marker = at(encode_marker(ControlType.ABORT, 11, 0, 0, T0), 13)
    data = plain + aborted + marker
    assert readable_bytes(data, [AbortedTxn(11, 13, 11)]) == len(plain)
    assert readable_bytes(data, []) == len(plain) + len(aborted)                  # read_uncommitted: aborted records are read
    assert readable_bytes(marker, []) == 0
    assert read_end(data, 10) == ReadEnd(14, 0) and read_end(b"", 11) == ReadEnd(11, -1)
