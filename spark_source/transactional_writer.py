"""The exactly-once streaming sink: one transaction per micro-batch and task, committed by
the driver when Spark commits the micro-batch (two-phase, as Flink's Kafka sink does).

In a task (`write_transaction`): a transactional producer with the id
`<prefix>-<task partition>` (prefix: the `transactionalIdPrefix` option, else
`kraftlog-spark-<query id>`; the query id is kept in the checkpoint, so a restarted query
uses the same ids) calls `init_transactions`, which aborts and fences whatever an earlier
attempt of this task left open. It then asks whether this micro-batch was already committed
(below); if not, it writes the rows in a transaction, adds the marker, delivers everything
and hands the transaction over unended (`Producer.prepare_transaction`). The commit message
carries the transactional id, producer id and epoch.

On the driver, `commit(messages, batchId)` commits every task's transaction
(`end_prepared`) and returns; only then does Spark write the micro-batch to its commit log.
`abort` aborts them (a failed task's attempt is also aborted by the next attempt's
`init_transactions`, or by the transaction timeout).

The marker closes the window between the two: the driver committed the transactions and
died before Spark wrote its commit log, so a restarted query runs that micro-batch again.
Inside its transaction each task also commits, for the sink's own group (named like the
prefix, never joined by any consumer), the offset `batchId + 1` of the pseudo-partition
(`MARKER_TOPIC`, task partition) (TxnOffsetCommit, as consume-transform-produce does). It
counts if and only if the task's rows do. A task re-running micro-batch N reads it after its
`init_transactions` (OffsetFetch with require_stable, so an offset whose transaction is
still completing is waited for) and, if it is already past N, writes nothing.

This relies on a replayed micro-batch giving each task the same rows as the first run (the
same task count and partitioning: a source-to-sink query without a nondeterministic
shuffle), which is what the offsets Spark logged before the micro-batch guarantee for the
kraftlog source.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from data_plane.client import KraftlogError, Producer
from data_plane.client.errors import from_error_code
from data_plane.client.group_admin import GroupAdmin
from data_plane.client.group_membership import to_topic_partitions
from data_plane.client.prepared_transactions import PreparedTransaction, end_prepared
from data_plane.client.transactions import GroupMetadata
from kraftlog_proto import group_pb2
from spark_source.options import SinkOptions
from spark_source.worker_gc import freeze_long_lived
from spark_source.writer import send_rows
from server_common.errors import ErrorCode

log = logging.getLogger("spark_source")

# The sink group's offsets are keyed (MARKER_TOPIC, task partition); no such topic exists.
MARKER_TOPIC = "spark-sink-batch"
# An offset still in a completing transaction (UNSTABLE_OFFSET_COMMIT) is asked again after this.
UNSTABLE_RETRY_S = 0.05
# ... for at most this long: init_transactions has already waited for this id's transaction.
UNSTABLE_WAIT_S = 30.0


@dataclass
class TransactionalCommitMessage(WriterCommitMessage):
    records: int
    # None: nothing to commit (no rows, or the micro-batch was committed by an earlier run)
    prepared: PreparedTransaction | None
    already_committed: bool = False


@dataclass(frozen=True)
class TaskIdentity:
    query_id: str
    batch_id: int
    partition: int


def task_identity() -> TaskIdentity:
    """Who this task is, from Spark's task context: the streaming query's id and micro-batch
    (local properties Spark sets for every micro-batch's jobs) and the task's partition."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query_id = context.getLocalProperty("sql.streaming.queryId") if context else None
    batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
    if not query_id or batch_id is None:
        raise RuntimeError("the exactly-once kraftlog sink runs in streaming queries only: no query or micro-batch id in this task")
    return TaskIdentity(query_id, int(batch_id), context.partitionId())


def id_prefix(opts: SinkOptions, query_id: str) -> str:
    return opts.transactional_id_prefix or f"kraftlog-spark-{query_id}"


def write_transaction(opts: SinkOptions, batches: Iterable[pa.RecordBatch], task: TaskIdentity | None = None) -> TransactionalCommitMessage:
    """One task's share of a micro-batch, written in a transaction left open for the driver."""
    freeze_long_lived()
    task = task or task_identity()
    prefix = id_prefix(opts, task.query_id)
    with Producer(opts.bootstrap, transactional_id=f"{prefix}-{task.partition}", **opts.producer_config) as producer:
        producer.init_transactions()
        if committed_batches(opts.bootstrap, prefix, task.partition) > task.batch_id:
            for _ in batches:  # Spark hands the rows over anyway; they were written by the earlier run
                pass
            return TransactionalCommitMessage(0, None, already_committed=True)
        producer.begin_transaction()
        count = send_rows(producer, opts, batches)
        if count:
            producer.send_offsets_to_transaction({(MARKER_TOPIC, task.partition): task.batch_id + 1}, GroupMetadata(prefix, "", -1))
        return TransactionalCommitMessage(count, producer.prepare_transaction())


def committed_batches(bootstrap: str, prefix: str, partition: int) -> int:
    """How many micro-batches of this task's partition the sink committed (0 if none)."""
    request = group_pb2.OffsetFetchRequest(group_id=prefix, topics=to_topic_partitions([(MARKER_TOPIC, partition)]), require_stable=True)
    where = f"OffsetFetch of the sink's group {prefix!r}"
    deadline = time.monotonic() + UNSTABLE_WAIT_S
    with GroupAdmin(bootstrap) as admin:
        link = admin.link(prefix)
        while True:
            answer = link.call("OffsetFetch", request)
            if answer.error_code != ErrorCode.NONE:
                raise from_error_code(answer.error_code, answer.error_message, where)
            found = [p for t in answer.topics for p in t.partitions if p.partition == partition]
            if not found:
                return 0
            if found[0].error_code == ErrorCode.NONE:
                return max(found[0].committed_offset, 0)
            if found[0].error_code != ErrorCode.UNSTABLE_OFFSET_COMMIT or time.monotonic() > deadline:
                raise from_error_code(found[0].error_code, found[0].error_message, where)
            time.sleep(UNSTABLE_RETRY_S)


def _prepared(messages) -> list[PreparedTransaction]:
    return [m.prepared for m in messages if isinstance(m, TransactionalCommitMessage) and m.prepared is not None]


def commit_prepared(opts: SinkOptions, messages) -> None:
    """The driver's commit of a micro-batch: every task's transaction, before Spark's commit log."""
    end_prepared(opts.bootstrap, _prepared(messages), commit=True)


def abort_prepared(opts: SinkOptions, messages) -> None:
    """The driver's abort of a failed micro-batch: the tasks' transactions that were prepared,
    each on its own (one already aborted by a newer attempt, or a coordinator that does not
    answer, leaves the rest to be aborted; what is left open the next attempt of its task
    aborts, or the transaction timeout)."""
    for prepared in _prepared(messages):
        try:
            end_prepared(opts.bootstrap, [prepared], commit=False)
        except KraftlogError as error:
            log.warning("could not abort %s: %s", prepared.transactional_id, error)
