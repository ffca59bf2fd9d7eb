"""Transactional offset commits (KIP-447): offsets staged per producer until the marker, in
the pure core (`txn_offsets`, `offsets.txn_commit`) and through the coordinator shell over a
fake replica manager: a commit marker makes them committed, an abort drops them, an open
transaction's offsets stay staged across a reload, and a coordinator that replays the log
ends with exactly what the live one built."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from data_plane.control_batch import ControlType, decode_marker, encode_marker
from data_plane.groups import offsets, record_codec
from data_plane.groups.coordinator import TxnProducer
from data_plane.groups.membership import Refused
from data_plane.groups.state import CommittedOffset, Group, GroupEpoch, GroupRecord, RecordKey, RecordType, replay
from data_plane.groups.txn_offsets import PendingTxnOffsets
from data_plane.record_batch import decode_batch, encode_batch, iter_headers
from server_common.errors import ErrorCode
from data_plane.replication.transaction_index import TransactionIndex
from data_plane.storage import PartitionLog
from data_plane.storage.log_cleaner import CleaningPass
from tests.unit.storage.conftest import small_settings
from tests.unit.groups.test_coordinator_shell import FakeReplicas, join, loaded

ADMIN = ("", -1)


def offset_record(group_id: str, partition: int, offset: int) -> GroupRecord:
    return GroupRecord(RecordKey(RecordType.OFFSET, group_id, topic="t", partition=partition), CommittedOffset(offset))


def to_commit(*pairs: tuple[int, int]) -> list[offsets.OffsetToCommit]:
    return [offsets.OffsetToCommit("t", partition, offset) for partition, offset in pairs]


# ---------------------------------------------------------------------- the pure core

def test_a_commit_marker_applies_what_was_staged_before_it_and_keeps_the_next_transaction():
    pending, groups = PendingTxnOffsets(), {}
    pending.stage(7, 10, [offset_record("g", 0, 5), offset_record("h", 1, 6)])
    pending.stage(7, 12, [offset_record("g", 0, 8)])
    pending.stage(7, 20, [offset_record("g", 0, 99)])  # the producer's next transaction, after the marker
    assert pending.unstable("g") == {("t", 0)} and pending.unstable("h") == {("t", 1)}
    pending.on_marker(7, 15, True, groups)
    assert groups["g"].offsets[("t", 0)].offset == 8  # log order: the later commit wins
    assert groups["h"].offsets[("t", 1)].offset == 6
    assert pending.unstable("g") == {("t", 0)} and pending.unstable("h") == set()
    assert [s.record.value.offset for s in pending.by_producer[7]] == [99]


def test_a_write_logged_after_the_transactional_one_wins_over_it_at_the_marker():
    """Kafka's rule, and what compaction keeps: the latest record of a key in the log."""
    pending = PendingTxnOffsets()
    pending.stage(7, 10, [offset_record("g", 0, 5), offset_record("g", 1, 6)])
    groups = {}
    pending.replay_plain(groups, [offset_record("g", 0, 3)], 12)  # a plain commit after the transactional batch
    pending.on_marker(7, 15, True, groups)
    assert {tp: c.offset for tp, c in groups["g"].offsets.items()} == {("t", 0): 3, ("t", 1): 6}
    assert groups["g"].offsets_at == {("t", 0): 12, ("t", 1): 10}


def test_a_deletion_drops_the_offsets_staged_before_it_so_a_marker_cannot_bring_a_deleted_group_back():
    pending, groups = PendingTxnOffsets(), {}
    pending.replay_plain(groups, [offset_record("g", 0, 3)], 5)
    pending.stage(7, 10, [offset_record("g", 0, 50), offset_record("h", 0, 60)])
    deletion = [GroupRecord(RecordKey(RecordType.OFFSET, "g", topic="t", partition=0), None),
                GroupRecord(RecordKey(RecordType.TARGET_EPOCH, "g"), None), GroupRecord(RecordKey(RecordType.GROUP_EPOCH, "g"), None)]
    pending.replay_plain(groups, deletion, 12)  # DeleteGroups
    assert "g" not in groups and pending.unstable("g") == set() and pending.unstable("h") == {("t", 0)}
    pending.on_marker(7, 15, True, groups)
    assert "g" not in groups and groups["h"].offsets[("t", 0)].offset == 60


def test_batches_staged_out_of_log_order_apply_in_log_order():
    pending, groups = PendingTxnOffsets(), {}
    pending.stage(7, 12, [offset_record("g", 0, 8)])  # this round's answer came first
    pending.stage(7, 10, [offset_record("g", 0, 5)])
    pending.on_marker(7, 15, True, groups)
    assert groups["g"].offsets[("t", 0)].offset == 8


def test_an_abort_marker_drops_the_staged_offsets_and_touches_no_group():
    pending, groups = PendingTxnOffsets(), replay([offset_record("g", 0, 3)])
    pending.stage(7, 10, [offset_record("g", 0, 5)])
    pending.stage(8, 11, [offset_record("g", 1, 4)])
    pending.on_marker(7, 12, False, groups)
    assert groups["g"].offsets == {("t", 0): CommittedOffset(3)}
    assert pending.unstable("g") == {("t", 1)}  # producer 8's transaction is still open


def test_a_txn_commit_checks_the_member_epoch_and_applies_nothing():
    change, errors = offsets.txn_commit(Group("g"), "g", *ADMIN, to_commit((0, 5), (1, -1)), now_ms=1)
    assert errors[("t", 0)][0] == ErrorCode.NONE and errors[("t", 1)][0] == ErrorCode.INVALID_COMMIT_OFFSET
    assert [r.key.partition for r in change.records] == [0]  # written...
    assert not change.group.offsets and not change.applied  # ...but not applied
    with pytest.raises(Refused) as unknown:
        offsets.txn_commit(None, "g", "m", 3, to_commit((0, 5)), now_ms=1)
    assert unknown.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    with pytest.raises(Refused) as absent:  # the group's creation (a plain round before) failed: retriable, nothing staged
        offsets.txn_commit(None, "g", *ADMIN, to_commit((0, 5)), now_ms=1)
    assert absent.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert not offsets.create_for_txn_commit(Group("g"), "g", *ADMIN).records
    assert not offsets.create_for_txn_commit(None, "g", "m", 3).records
    [created] = offsets.create_for_txn_commit(None, "g", *ADMIN).records
    assert created.key.type is RecordType.GROUP_EPOCH and created.value is not None


# ---------------------------------------------------------------------- through the shell

def write_marker(replicas: FakeReplicas, coordinator, producer_id: int, commit: bool) -> asyncio.Task:
    """Append a marker as WriteTxnMarkers does, and tell the coordinator as the replica manager does."""
    offset = replicas.partition.log_end_offset
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    replicas.partition.append(encode_marker(kind, producer_id, 0, 0, 1000))
    return coordinator.on_marker("__consumer_offsets", 0, producer_id, commit, offset)


def committed(coordinator, group_id: str) -> dict:
    group = coordinator.group(group_id)
    return {} if group is None else {tp: c.offset for tp, c in group.offsets.items()}


def test_txn_offsets_count_after_the_commit_marker_and_vanish_with_an_abort():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.commit("g", *ADMIN, to_commit((0, 1)))
        await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), *ADMIN, to_commit((0, 5), (1, 6)))
        assert committed(coordinator, "g") == {("t", 0): 1}  # not before the marker
        assert coordinator.unstable("g") == {("t", 0), ("t", 1)}
        await write_marker(replicas, coordinator, 7, commit=True)
        assert committed(coordinator, "g") == {("t", 0): 5, ("t", 1): 6}
        assert coordinator.unstable("g") == set()
        await coordinator.txn_commit("g", TxnProducer(8, 0, "tx"), *ADMIN, to_commit((0, 50)))
        await write_marker(replicas, coordinator, 8, commit=False)
        assert committed(coordinator, "g") == {("t", 0): 5, ("t", 1): 6} and coordinator.unstable("g") == set()
        await coordinator.txn_commit("g", TxnProducer(9, 0, "tx"), *ADMIN, to_commit((1, 60)))  # left open
        successor = await loaded(replicas)
        assert successor.group("g") == coordinator.group("g") and successor.unstable("g") == {("t", 1)}
        await write_marker(replicas, successor, 9, commit=True)
        assert committed(successor, "g") == {("t", 0): 5, ("t", 1): 60}
    asyncio.run(scenario())


def epoch_records(replicas: FakeReplicas, group_id: str) -> list[GroupEpoch | None]:
    """The group's GROUP_EPOCH records in the log, in order (None: a tombstone)."""
    found = []
    for raw in replicas.partition.batches:
        batch = decode_batch(raw)
        if batch.header.is_control:
            continue
        records = [record_codec.decode(k, v) for k, v in zip(batch.keys, batch.values)]
        found += [r.value for r in records if r.key.type is RecordType.GROUP_EPOCH and r.key.group_id == group_id]
    return found


def test_an_admin_txn_commit_queued_behind_a_group_deletion_recreates_the_group_with_its_epoch_record():
    """DeleteGroups, then an admin TxnOffsetCommit queued behind it: the commit lands after the
    deletion in the log, so its marker makes the offsets count (the latest write wins), and
    the group it brings back has an epoch record logged after the deletion's tombstone, as an
    admin OffsetCommit's group does; a coordinator replaying the log agrees."""
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.commit("g", *ADMIN, to_commit((0, 1)))
        deleting = asyncio.ensure_future(coordinator.delete_group("g"))
        committing = asyncio.ensure_future(coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), *ADMIN, to_commit((0, 5))))
        await asyncio.gather(deleting, committing)
        await write_marker(replicas, coordinator, 7, commit=True)
        assert committed(coordinator, "g") == {("t", 0): 5}
        records = epoch_records(replicas, "g")
        assert records[1] is None and records[-1] is not None, records  # created, deleted, created again
        assert (await loaded(replicas)).group("g") == coordinator.group("g")
    asyncio.run(scenario())


def test_a_marker_appended_while_the_offsets_write_waits_for_replication_still_commits_it():
    """The marker lands in the log after the transactional batch but before that batch's round
    is answered (and staged): the marker's application queues behind the round."""
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.commit("g", *ADMIN, to_commit((0, 1)))  # the group exists: the txn commit is one write
        replicas.replicated = asyncio.Event()
        replicas.appended.clear()
        writing = asyncio.ensure_future(coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), *ADMIN, to_commit((0, 5))))
        await asyncio.wait_for(replicas.appended.wait(), 5)  # the round appended its batch and waits for the HW
        marker = write_marker(replicas, coordinator, 7, commit=True)
        queue = coordinator.shards[0].queues["g"]
        for _ in range(100):  # bounded: the marker's task gets its turn within a few loop iterations
            if marker.done() or len(queue) > 1:  # done without the group, or queued behind the round
                break
            await asyncio.sleep(0)
        replicas.replicated.set()
        await writing
        await marker
        assert committed(coordinator, "g") == {("t", 0): 5} and coordinator.unstable("g") == set()
        assert (await loaded(replicas)).group("g") == coordinator.group("g")
    asyncio.run(scenario())


def test_a_txn_commit_from_a_stale_member_epoch_is_refused_and_writes_nothing():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        answer = await coordinator.heartbeat(join("a"))
        batches = len(replicas.partition.batches)
        with pytest.raises(Refused) as stale:
            await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), "a", answer.member_epoch - 1, to_commit((0, 5)))
        assert stale.value.code == ErrorCode.STALE_MEMBER_EPOCH and len(replicas.partition.batches) == batches
        await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), "a", answer.member_epoch, to_commit((0, 5)))
        assert coordinator.unstable("g") == {("t", 0)}
    asyncio.run(scenario())


def test_an_older_producer_epoch_refused_at_the_partition_is_producer_fenced():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.commit("g", *ADMIN, to_commit((1, 0)))  # the group exists: only the transactional write fails
        replicas.fail_with = ErrorCode.INVALID_PRODUCER_EPOCH
        with pytest.raises(Refused) as fenced:
            await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), *ADMIN, to_commit((0, 5)))
        assert fenced.value.code == ErrorCode.PRODUCER_FENCED and coordinator.unstable("g") == set()
    asyncio.run(scenario())


def test_offsets_the_partition_refuses_as_not_in_the_transaction_are_invalid_txn_state_and_not_staged():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.commit("g", *ADMIN, to_commit((1, 0)))  # the group exists: only the transactional write fails
        replicas.fail_with = ErrorCode.INVALID_TXN_STATE  # the leader's KIP-890 verification
        with pytest.raises(Refused) as refused:
            await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), *ADMIN, to_commit((0, 5)))
        assert refused.value.code == ErrorCode.INVALID_TXN_STATE and coordinator.unstable("g") == set()
        assert all(part in refused.value.message for part in ("'tx'", "__consumer_offsets-0", "AddPartitionsToTxn")), refused.value
    asyncio.run(scenario())


# Random histories: plain commits, transactional commits of three producers to two groups,
# markers, offset and group deletions. The live coordinator and one replaying its log must
# agree on the groups and on what is still staged.
ops = st.lists(st.tuples(st.sampled_from(["plain", "txn", "commit", "abort", "txn", "delete", "drop"]), st.sampled_from([7, 8, 9]),
                         st.sampled_from(["g", "h"]), st.integers(0, 1), st.integers(0, 100)), max_size=25)


async def run_history(coordinator, replicas: FakeReplicas, history) -> None:
    for kind, producer_id, group_id, partition, offset in history:
        if kind == "plain":
            await coordinator.commit(group_id, *ADMIN, to_commit((partition, offset)))
        elif kind in ("delete", "drop"):
            with contextlib.suppress(Refused):  # GROUP_ID_NOT_FOUND
                if kind == "delete":
                    await coordinator.delete_offsets(group_id, [("t", partition)])
                else:
                    await coordinator.delete_group(group_id)
        elif kind == "txn":
            await coordinator.txn_commit(group_id, TxnProducer(producer_id, 0, "tx"), *ADMIN, to_commit((partition, offset)))
        else:
            await write_marker(replicas, coordinator, producer_id, kind == "commit")


@settings(max_examples=60, deadline=None)
@given(ops)
def test_replaying_the_log_rebuilds_what_the_live_coordinator_holds(history):
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await run_history(coordinator, replicas, history)
        successor = await loaded(replicas)
        for group_id in ("g", "h"):
            assert successor.group(group_id) == coordinator.group(group_id)
            assert successor.unstable(group_id) == coordinator.unstable(group_id)
    asyncio.run(scenario())


def test_negative_control_replaying_transactional_records_as_plain_ones_keeps_an_aborted_offset():
    """What the replay must not do: without the markers, an aborted commit would count."""
    pending, groups = PendingTxnOffsets(), {}
    records = [offset_record("g", 0, 5)]
    pending.stage(7, 0, records)
    pending.on_marker(7, 1, False, groups)
    assert "g" not in groups
    assert replay(records)["g"].offsets[("t", 0)].offset == 5


def test_offset_fetch_require_stable_answers_unstable_while_the_transaction_is_open():
    from data_plane.groups.service import GroupCoordinatorService
    from kraftlog_proto import group_pb2

    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        service = GroupCoordinatorService(coordinator, offsets_topic=None)
        await coordinator.commit("g", *ADMIN, to_commit((0, 1)))
        await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), *ADMIN, to_commit((0, 5)))

        async def fetched(require_stable: bool):
            request = group_pb2.OffsetFetchRequest(group_id="g", require_stable=require_stable)
            [topic] = (await service.OffsetFetch(request, None)).topics
            [partition] = topic.partitions
            return partition.error_code, partition.committed_offset
        assert await fetched(True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert await fetched(False) == (ErrorCode.NONE, 1)  # without require_stable: the last committed offset
        await write_marker(replicas, coordinator, 7, commit=True)
        assert await fetched(True) == (ErrorCode.NONE, 5)
    asyncio.run(scenario())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
@example([("txn", 7, "g", 0, 5), ("plain", 7, "g", 0, 3), ("commit", 7, "g", 0, 0)])  # the plain commit is logged later: it wins
def test_a_coordinator_replaying_the_cleaned_log_agrees_with_the_live_one(tmp_path_factory, history):
    """The log the live coordinator wrote, cleaned by the real log cleaner (aborted
    transactions, superseded records, markers left without records all removed), replays to
    the same offsets and staged offsets: compaction keeps what the latest-write rule keeps."""
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await run_history(coordinator, replicas, history)
        cleaned = FakeReplicas()
        cleaned.partition.batches, cleaned.partition.log_end_offset = clean(replicas.partition.batches, tmp_path_factory.mktemp("log"))
        successor = await loaded(cleaned)
        for group_id in ("g", "h"):
            assert committed(successor, group_id) == committed(coordinator, group_id)
            assert successor.unstable(group_id) == coordinator.unstable(group_id)
    asyncio.run(scenario())


def clean(batches: list[bytes], directory) -> tuple[list[bytes], int]:
    """The batches as a replica's compacted log holds them after every due cleaning pass
    (the LSO bounds it), with filler so that the log's segments close."""
    key, value = record_codec.encode(GroupRecord(RecordKey(RecordType.GROUP_EPOCH, "filler"), GroupEpoch()))
    filler = encode_batch([value] * 8, [key] * 8, timestamps_ms=0)
    plog = PartitionLog.open(directory / "__consumer_offsets-0", small_settings(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0), 0)
    index = TransactionIndex()
    for batch in batches + [filler] * 40:
        appended = plog.append(batch, assign_offsets=batch is filler, leader_epoch=1, now_ms=0)
        for header in appended.headers:
            index.on_batch(header, decode_marker(decode_batch(batch)).commit if header.is_control else None)
    stable = index.last_stable_offset(plog.log_end_offset)
    while (due := plog.cleaning_candidates(stable, 10_000)) is not None:
        result = CleaningPass(plog.directory, *due, map_entries=1000, tombstone_horizon_ms=10_000,
                              aborted=index.aborted_between(0, stable)).run()
        plog.install_cleaned(result)
    data = plog.read(0, 1 << 30).data
    kept = [bytes(data[pos:pos + header.batch_length]) for pos, header in iter_headers(data)]
    end = plog.log_end_offset
    plog.close()
    return kept, end
