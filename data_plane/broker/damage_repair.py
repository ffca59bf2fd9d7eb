"""Repairs damaged ranges of this broker's replicas from the other replicas' copies.

Reads and the scrub (``PartitionLog``) find damaged batches and take them out of service;
this loop, a few times a second while anything is damaged (once a second otherwise), asks the other replicas for
their copy of each range (the leader first, then in-sync followers) with a ``repair_read``
Fetch, and hands it to the replica manager, which checks offsets, lengths, epochs and CRCs
before writing it over the damage. The bytes fit exactly: every replica of a leader epoch
holds the leader's batches byte for byte. A range no other replica can ever give back (no
other replica, or, on the leader, every other replica's log holds nothing there) is declared
lost: logged as an error, skipped by readers, never reused.
"""

from __future__ import annotations

import asyncio
from typing import Callable

import grpc
import structlog

from data_plane.broker.partition import Partition
from data_plane.broker.log_maintenance import LogMaintenance
from data_plane.storage import DamagedRange
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.channel_pool import open_aio_channel
from server_common.errors import ErrorCode

log = structlog.get_logger("broker.repair")

REPAIR_INTERVAL_S = 0.2  # between rounds while anything is damaged
# Between rounds while nothing is: each round looks at every replica of the broker, which on
# an idle broker with thousands of replicas is most of what it does.
SCAN_INTERVAL_S = 1.0
REPAIR_RPC_TIMEOUT_S = 5.0


def unrepairable(answers: list[bytes | None], is_leader: bool) -> str | None:
    """Why a damaged range can never come back, given every other replica's answer (None:
    no answer; b"": its log holds nothing there; bytes: a copy that did not fit), or None
    while one may still. A leader is the only source its followers have, so when all of
    them hold nothing there, nobody ever will; a follower keeps asking."""
    if not answers:
        return "no other replica"
    if is_leader and all(answer == b"" for answer in answers):
        return "no other replica holds it"
    return None


class DamageRepairer:
    def __init__(self, maintenance: LogMaintenance, address_of: Callable[[int], str | None]) -> None:
        self._maintenance = maintenance
        self._address_of = address_of
        self._reported: set[tuple[str, int, int]] = set()  # (topic, partition, first offset) already logged
        self._log = log.bind(broker_id=maintenance.config.broker_id)

    async def run(self) -> None:
        """Repair rounds forever (the broker cancels the task on shutdown)."""
        while True:
            await asyncio.sleep(REPAIR_INTERVAL_S if self._reported else SCAN_INTERVAL_S)  # a polling period, not synchronisation
            try:
                await self.repair_round()
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must outlive any single bad answer
                self._log.exception("damage repair round failed")

    async def repair_round(self) -> None:
        damaged = self._maintenance.damaged()
        current = {(p.topic, p.partition, d.first_offset) for p, d in damaged}
        for partition, damage in damaged:
            sources = self._maintenance.repair_sources(partition)
            if (partition.topic, partition.partition, damage.first_offset) not in self._reported:
                self._log.warning("damaged range out of service: asking other replicas for their copy", topic=partition.topic,
                                  partition=partition.partition, leader_epoch=partition.state.leader_epoch,
                                  first_offset=damage.first_offset, next_offset=damage.next_offset, sources=sources)
            answers: list[bytes | None] = []
            for source in sources:
                copy = await self._copy_from(source, partition, damage)
                if copy and self._maintenance.repair(partition, damage, copy, source):
                    break
                answers.append(copy)
            else:
                why = unrepairable(answers, partition.is_leader)
                if why is not None:
                    self._maintenance.declare_lost(partition, damage, why)
        self._reported = current

    async def _copy_from(self, source: int, partition: Partition, damage: DamagedRange) -> bytes | None:
        """``source``'s batches from the range's first offset, at most the range's size; b""
        when it answered that it holds none there; None when it could not answer."""
        address = self._address_of(source)
        if address is None:
            return None
        length = damage.end_position - damage.position
        request = broker_pb2.FetchRequest(
            max_bytes=length,
            repair_read=True,
            topics=[broker_pb2.FetchTopic(topic=partition.topic, partitions=[
                broker_pb2.FetchPartition(partition=partition.partition, fetch_offset=damage.first_offset, partition_max_bytes=length),
            ])],
        )
        options = [("grpc.max_receive_message_length", self._maintenance.config.request_max_bytes)]
        try:
            async with open_aio_channel(address, self._maintenance.config.peer_credentials(), options) as channel:
                response = await broker_pb2_grpc.BrokerStub(channel).Fetch(request, timeout=REPAIR_RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            self._log.info("replica did not answer a repair read", topic=partition.topic, partition=partition.partition,
                           source=source, code=exc.code().name)
            return None
        answer = response.topics[0].partitions[0] if response.topics and response.topics[0].partitions else None
        if answer is not None and answer.error_code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
            return answer.batches if answer.error_code == ErrorCode.NONE else b""
        self._log.info("replica cannot give its copy of a damaged range", topic=partition.topic, partition=partition.partition,
                       source=source, error=answer.error_message if answer else "no answer")
        return None
