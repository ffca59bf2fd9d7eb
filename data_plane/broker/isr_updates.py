"""Sends leaders' ISR proposals to the controller (Kafka's `AlterPartitionManager`).

Proposals from every partition this broker leads are batched into one AlterPartition request
with at most one request in flight, so a burst of ISR changes (a follower broker dying with
a thousand partitions) costs one round trip, not a thousand. Each answer goes back to the
partition (through ``deliver``: the replica manager, which carries out what it decides),
whose core forgets the proposal either way; a refused or failed proposal is re-derived by
the core from fresh state on its next event, after a short backoff here.
"""

from __future__ import annotations

import asyncio
from typing import Callable

import structlog

from data_plane.partition_errors import from_wire
from data_plane.broker.partition import Partition
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import AlterPartitionCommitted, AlterPartitionRefused, IsrProposal
from kraftlog_proto import controller_pb2
from server_common.errors import error_code_name

log = structlog.get_logger("broker.isr")

RETRY_BACKOFF_S = 0.1


class AlterPartitionSender:
    def __init__(self, broker_id: int, lifecycle, deliver: Callable[[Partition, IsrProposal, AlterPartitionCommitted | AlterPartitionRefused], None]) -> None:
        self._lifecycle = lifecycle
        self._deliver = deliver
        self._pending: dict[tuple[str, int], tuple[Partition, IsrProposal]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._log = log.bind(broker_id=broker_id)

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        self._pending[(partition.topic, partition.partition)] = (partition, proposal)
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, {}
            if not await self._send(list(batch.values())):
                await asyncio.sleep(RETRY_BACKOFF_S)  # a backoff, not synchronisation: the controller is busy or gone

    async def _send(self, batch: list[tuple[Partition, IsrProposal]]) -> bool:
        """One AlterPartition for ``batch``; returns False when it failed as a whole."""
        states = [_partition_state(p, proposal) for p, proposal in batch]
        # One line per request; each partition's at debug (the controller logs each change it
        # commits, with its reason): 50,000 new partitions filling their ISRs made 100,000 lines
        # and more per broker.
        self._log.info("proposing ISR changes", partitions=len(batch),
                       expanding=sum(len(proposal.new_isr) > len(p.state.isr) for p, proposal in batch),
                       shrinking=sum(len(proposal.new_isr) < len(p.state.isr) for p, proposal in batch))
        for p, proposal in batch:
            self._log.debug("proposing ISR change", topic=p.topic, partition=p.partition, leader_epoch=proposal.leader_epoch,
                            partition_epoch=proposal.partition_epoch, isr=sorted(p.state.isr), new_isr=sorted(proposal.new_isr))
        try:
            response = await self._lifecycle.alter_partition(states)
        except Exception as exc:  # controller unreachable or failing over: every proposal is dropped and re-derived
            self._log.warning("AlterPartition failed; proposals will be retried", error=str(exc), partitions=len(batch))
            self._answer_all(batch, AlterPartitionRefused(ErrorCode.REQUEST_TIMED_OUT))
            return False
        if response.error_code != ErrorCode.NONE:
            self._log.warning("AlterPartition refused", error=error_code_name(response.error_code),
                              message=response.error_message)
            self._answer_all(batch, AlterPartitionRefused(from_wire(response.error_code, response.error_message).code))
            return False
        answers = {(a.topic, a.partition): a for a in response.partitions}
        refused = False
        for p, proposal in batch:
            answer = answers.get((p.topic, p.partition))
            if answer is None or answer.error_code != ErrorCode.NONE:
                code = answer.error_code if answer is not None else ErrorCode.UNKNOWN_SERVER_ERROR
                self._log.info("ISR change refused", topic=p.topic, partition=p.partition,
                               error=error_code_name(code), message=answer.error_message if answer else "")
                self._deliver(p, proposal, AlterPartitionRefused(from_wire(code, answer.error_message if answer else "").code))
                refused = True
            else:
                self._deliver(p, proposal, AlterPartitionCommitted(answer.leader_epoch, answer.partition_epoch, frozenset(answer.isr)))
        return not refused

    def _answer_all(self, batch: list[tuple[Partition, IsrProposal]], result: AlterPartitionRefused) -> None:
        for p, proposal in batch:
            self._deliver(p, proposal, result)


def _partition_state(partition: Partition, proposal: IsrProposal) -> controller_pb2.AlterPartitionRequest.PartitionState:
    """The proposal as the controller reads it; members added now carry the broker epoch
    they fetched with (KIP-903), the others -1 (not checked)."""
    added = dict(proposal.added_broker_epochs)
    return controller_pb2.AlterPartitionRequest.PartitionState(
        topic=partition.topic,
        partition=partition.partition,
        leader_epoch=proposal.leader_epoch,
        partition_epoch=proposal.partition_epoch,
        new_isr=[
            controller_pb2.AlterPartitionRequest.NewIsrReplica(broker_id=r, broker_epoch=added.get(r, -1))
            for r in sorted(proposal.new_isr)
        ],
    )

