"""Replica comparisons: wait for a partition's replicas to come back together, then record
each replica's log for the checker.

``compare_replicas`` waits, up to a deadline, until every replica of every partition is in
the ISR and holds at least what the leader held when every replica first answered (its log
end; after healing, with no writes, its HW, and until every replica reports the same HW and
log end too), so a restarted follower passes only by fetching. It asks each replica's
broker on its own (DescribeLogs) so that one broker's silence is recorded against it rather
than shrinking the comparison. It records what it saw at the end, settled or not: one
``ConvergenceOp`` per partition and one ``ReplicaOp`` per replica that answered, with a CRC
of its bytes below a common offset. The checker judges (``chaos.checker.replica_checks``);
the waiting uses the same rule.

``read_replica_files`` reads the segment files of a stopped local cluster and adds each
replica's records below the compared offset, so the checker can say where two replicas
differ.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chaos.checker.replica_checks import came_back
from chaos.history import FINAL, ConvergenceOp, History, Op, Read, ReplicaOp
from data_plane import record_batch
from data_plane.client import Admin
from kraftlog_proto import broker_pb2
from server_common.errors import ErrorCode, error_code_name
from server_common.waiting import wait_for

Assignment = dict[int, list[int]]  # partition -> the brokers holding its replicas
REQUEST_TIMEOUT_MS = 2_000
POLL_INTERVAL_S = 0.5
ANSWER_DEADLINE_S = 60.0  # a broker that has not answered this long after its start has failed


def replica_assignment(bootstrap: str, topic: str) -> Assignment:
    """Which brokers hold each partition's replicas: what every comparison expects to hear
    from, whatever metadata says later."""
    with Admin(bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as admin:
        partitions = admin.describe_topics([topic])[topic].partitions
    return {index: sorted(p.replicas) for index, p in sorted(partitions.items())}


def compare_replicas(
    bootstrap: str,
    topic: str,
    assignment: Assignment,
    history: History,
    deadline_s: float,
    quiescent: bool,
    label: str = FINAL,
    restart: int | None = None,
) -> list[Op]:
    """Waits up to ANSWER_DEADLINE_S for every replica's broker to answer, then up to
    ``deadline_s`` more for the replicas to come back, and returns the comparison
    (ConvergenceOps, and ReplicaOps with checksums) as it stands, settled or not.

    The deadline counts from the moment every restarted broker answers, not from its
    process start: it measures replication's recovery, not how long a loaded machine takes
    to start a Python process."""
    targets: dict[int, int] = {}  # partition -> what every replica must hold (set once all answered)
    last: list[list[Op]] = []

    def looked(started_s: float) -> list[Op]:
        ops = _snapshot(bootstrap, topic, assignment, history, targets, label, restart, started_s, quiescent)
        last[:] = [ops]
        return ops

    def all_answered() -> list[Op] | None:
        ops = looked(asked_s)
        return ops if not any(op.unanswered for op in ops if isinstance(op, ConvergenceOp)) else None

    def settled(started_s: float) -> list[Op] | None:
        ops = looked(started_s)
        return ops if _has_settled(ops, quiescent) else None

    asked_s = history.now()  # the wait for answers starts here, the deadline once all answered
    try:
        wait_for(all_answered, ANSWER_DEADLINE_S, f"every replica's broker of {topic} to answer ({label})", interval_s=POLL_INTERVAL_S)
        answered_s = history.now()
        wait_for(lambda: settled(answered_s), deadline_s, f"every replica of {topic} back in the ISR ({label})", interval_s=POLL_INTERVAL_S)
    except TimeoutError:
        pass  # what stands at the deadline is recorded: the checker names the stuck replicas
    ops = last[0] if last else looked(asked_s)
    return _with_checksums(bootstrap, topic, ops)


def settled_partitions(ops: list[Op]) -> tuple[int, int]:
    """(partitions whose replicas all came back, partitions) in a comparison's ops."""
    convergence = [op for op in ops if isinstance(op, ConvergenceOp)]
    return sum(1 for c in convergence if _came_back(c, ops)), len(convergence)


def _came_back(convergence: ConvergenceOp, ops: list[Op]) -> bool:
    replicas = [op for op in ops if isinstance(op, ReplicaOp) and op.partition == convergence.partition]
    return came_back(convergence, replicas)


def _has_settled(ops: list[Op], quiescent: bool) -> bool:
    """Every replica answered and came back; when quiescent, every replica of a partition
    reports the same HW and log end too (so the records compared are the whole log)."""
    if not all(_came_back(c, ops) for c in ops if isinstance(c, ConvergenceOp)):
        return False
    ends: dict[int, set[tuple[int, int]]] = {}
    for r in ops:
        if isinstance(r, ReplicaOp):
            ends.setdefault(r.partition, set()).add((r.high_watermark, r.log_end))
    return not quiescent or all(len(e) == 1 for e in ends.values())


def _snapshot(
    bootstrap: str,
    topic: str,
    assignment: Assignment,
    history: History,
    targets: dict[int, int],
    label: str,
    restart: int | None,
    started_s: float,
    quiescent: bool,
) -> list[Op]:
    """One look at leaders, ISRs and every replica's log state."""
    with Admin(bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as admin:
        try:
            described = admin.describe_topics([topic])[topic].partitions
        except Exception:  # no broker answered metadata: every partition is recorded leaderless
            described = {}
        states, errors = _log_states(admin, topic, sorted({b for replicas in assignment.values() for b in replicas}))
    now = history.now()
    ops: list[Op] = []
    for partition, replicas in sorted(assignment.items()):
        answered = {b: states[b][partition] for b in replicas if partition in states.get(b, {})}
        metadata = described.get(partition)
        leader = answered.get(metadata.leader) if metadata else None
        if partition not in targets and leader is not None and len(answered) == len(replicas):
            targets[partition] = leader.high_watermark if quiescent else leader.log_end_offset
        ops.append(
            ConvergenceOp(
                partition,
                label,
                now,
                now - started_s,
                metadata.leader if metadata else -1,
                list(replicas),
                sorted(metadata.isr) if metadata else [],
                targets.get(partition, 0),
                quiescent,
                restart,
                {b: _why(errors, b, partition) for b in replicas if b not in answered},
            )
        )
        ops.extend(
            ReplicaOp(b, partition, now, s.log_start_offset, s.high_watermark, s.log_end_offset, label=label) for b, s in sorted(answered.items())
        )
    return ops


def _log_states(
    admin: Admin, topic: str, brokers: list[int], checksum_upto_offset: int | None = None
) -> tuple[dict[int, dict[int, broker_pb2.PartitionLogState]], dict[tuple[int, int | None], str]]:
    """Each broker's log state per partition of ``topic``, asked of each broker on its own
    (with checksums below ``checksum_upto_offset`` when given); and why a broker (partition
    None) or one of its replicas gave none."""
    states: dict[int, dict[int, broker_pb2.PartitionLogState]] = {}
    errors: dict[tuple[int, int | None], str] = {}
    for broker in brokers:
        try:
            answer = admin.describe_logs(
                broker_id=broker, topics=[topic], include_checksums=checksum_upto_offset is not None, checksum_upto_offset=checksum_upto_offset
            )[broker]
        except Exception as error:  # recorded against the broker: the checker reports it
            errors[(broker, None)] = f"DescribeLogs failed: {error}"
            continue
        states[broker] = {}
        for p in answer.partitions:
            if p.topic != topic:
                continue
            if p.error_code == ErrorCode.NONE:
                states[broker][p.partition] = p
            else:
                errors[(broker, p.partition)] = f"its replica answered {error_code_name(p.error_code)}"
    return states, errors


def _why(errors: dict[tuple[int, int | None], str], broker: int, partition: int) -> str:
    return errors.get((broker, partition)) or errors.get((broker, None)) or "its answer held no replica of this partition"


def _with_checksums(bootstrap: str, topic: str, ops: list[Op]) -> list[Op]:
    """``ops`` with each ReplicaOp's CRC below its partition's common offset: the target,
    or the shortest replica's log end when one is short (that replica is judged stuck, and
    the rest are still compared). A replica whose broker does not answer now is moved to
    its ConvergenceOp's ``unanswered``."""
    replicas = [op for op in ops if isinstance(op, ReplicaOp)]
    upto: dict[int, int] = {}
    for c in ops:
        if isinstance(c, ConvergenceOp):
            ends = [r.log_end for r in replicas if r.partition == c.partition]
            upto[c.partition] = min([c.target_offset, *ends])
    checksums: dict[tuple[int, int], int] = {}
    errors: dict[tuple[int, int | None], str] = {}
    with Admin(bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as admin:
        for offset in sorted(set(upto.values())):
            partitions = {p for p, o in upto.items() if o == offset}
            brokers = sorted({r.broker for r in replicas if r.partition in partitions})
            states, failed = _log_states(admin, topic, brokers, checksum_upto_offset=offset)
            errors |= failed
            checksums |= {(b, p): s.checksum_below_hw for b, by_partition in states.items() for p, s in by_partition.items() if p in partitions}
    result: list[Op] = []
    for op in ops:
        if isinstance(op, ReplicaOp):
            if (op.broker, op.partition) in checksums:
                result.append(replace(op, checksum=checksums[(op.broker, op.partition)], upto_offset=upto[op.partition]))
        elif isinstance(op, ConvergenceOp):
            lost = {r.broker for r in replicas if r.partition == op.partition and (r.broker, r.partition) not in checksums}
            result.append(replace(op, unanswered={**op.unanswered, **{b: _why(errors, b, op.partition) for b in lost}}))
        else:
            result.append(op)
    return result


def read_replica_files(replicas: list[Op], data_dirs: dict[int, Path], topic: str) -> list[Op]:
    """``replicas`` (a comparison's ops) with each replica's records below its compared
    offset read from its broker's data dir (the brokers must be stopped: the files are read
    as they lie)."""
    return [
        replace(r, reads=[(o, v) for o, v in _log_records(data_dirs[r.broker] / f"{topic}-{r.partition}") if o < r.compared_upto])
        if isinstance(r, ReplicaOp) else r
        for r in replicas
    ]


def _log_records(partition_dir: Path) -> list[Read]:
    """The records of a partition directory's segments, in offset order, up to the first
    batch that does not validate (a torn tail left by a kill)."""
    records: list[Read] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        try:
            for batch in record_batch.decode_batches(data):
                records.extend((o, v.decode()) for o, v in zip(batch.offsets, batch.values))
        except record_batch.CorruptBatchError:
            break
    return records
