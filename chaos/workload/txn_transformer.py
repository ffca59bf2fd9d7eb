"""A consume-transform-produce thread: a read_committed member of a consumer group reads the
transactional producers' topic and, in one transaction per poll, writes each value ``v`` it
read as ``v>txn`` (``transformed``) to the same partition of an output topic and commits the group's offsets past
what it read (``send_offsets_to_transaction``), as an exactly-once application does.

Each transaction is a ``TxnOp`` (its records are the outputs, on the output's partition keys:
``key_base`` + partition, so one history holds both topics; each output names its input);
each poll is a ``TxnPoll`` of its own session (a member's position may move back when a
rebalance hands a partition back, so its polls are not held to increasing offsets). After
any failure the member and the producer are replaced: the new member (the same static
member, ``group_instance_id``) resumes from the group's committed offsets, the new
producer's init aborts what was left open.
"""

from __future__ import annotations

import itertools
import threading

from chaos.txn_history import TxnOp, TxnPoll, TxnWrite, transformed
from chaos.workload.txn_producer import delivered_offsets, new_producer, outcome_after_failure
from data_plane.client import Consumer, KraftlogError, Producer

POLL_MS = 200


class TxnTransformerWorker(threading.Thread):
    """Transforms ``source`` into ``sink`` in group ``group`` until stopped."""

    def __init__(self, name: str, bootstrap: str, source: str, sink: str, group: str, key_base: int, clock) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.source, self.sink, self.group, self.key_base, self.clock = bootstrap, source, sink, group, key_base, clock
        self.txns: list[TxnOp] = []
        self.polls: list[TxnPoll] = []
        self.stopping = threading.Event()
        self._sessions = itertools.count()

    def run(self) -> None:
        n, settled = 0, False
        while not (self.stopping.is_set() and settled):
            producer = new_producer(self.bootstrap, self.name)
            settled = producer is not None
            # A static member: the replacement takes over the old member's partitions at once,
            # where a new dynamic member would wait out the old one's session (45 s) whenever
            # its leave did not reach the coordinator (a cut client link, a killed broker).
            consumer = Consumer(self.bootstrap, group_id=self.group, group_instance_id=self.name, isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100, fetch_mode="fetch",
                                client_id=self.name)
            try:
                consumer.subscribe([self.source])
                while producer is not None and not self.stopping.is_set():
                    op = self._transform(consumer, producer, n)
                    if op is None:
                        continue
                    self.txns.append(op)
                    n += 1
                    if op.error:
                        settled = False
                        break  # a new member (from the committed offsets) and a new producer
            except KraftlogError:
                settled = False  # the poll failed: start over the same way
            finally:
                consumer.close()
                if producer is not None:
                    producer.close(timeout=5)
            if not settled:
                self.stopping.wait(0.2)  # the cluster is failing over: try again shortly

    def _transform(self, consumer: Consumer, producer: Producer, n: int) -> TxnOp | None:
        invoked = self.clock()
        records = consumer.poll(POLL_MS)
        if not records:
            return None
        reads: dict[int, list] = {}
        for r in records:
            reads.setdefault(r.partition, []).append((r.offset, r.value.decode()))
        self.polls.append(TxnPoll(self.name, next(self._sessions), invoked, self.clock(), reads))
        txn = f"{self.name}-t{n}"
        outputs = [(r.partition, transformed(r.value.decode(), txn)) for r in records]
        futures, commit_s, error = [], None, ""
        try:
            producer.begin_transaction()
            for partition, value in outputs:
                futures.append(producer.send(self.sink, value.encode(), partition=partition))
            positions = {(self.source, p): max(o for o, _ in rs) + 1 for p, rs in reads.items()}
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            commit_s = self.clock()
            producer.commit_transaction()
            outcome = "committed"
        except KraftlogError as failure:
            error = failure.code
            outcome = outcome_after_failure(producer, futures, len(outputs), commit_s)
        offsets = delivered_offsets(futures, len(outputs))
        writes = tuple(TxnWrite(self.key_base + p, v, o) for (p, v), o in zip(outputs, offsets))
        return TxnOp(self.name, txn, "commit", outcome, invoked, self.clock(), writes, commit_s, error)
