"""Pure controller decisions about brokers: registration, heartbeats (fence, unfence,
controlled shutdown), session expiry, AlterPartition (KIP-497/903) and producer-id blocks.

Image + request + ``now_ms`` (+ the in-memory heartbeat manager, which these functions
update) in; a Decision (records for one Raft entry, response assuming they commit) out.
Answers that depend on the committed offset (a new broker epoch) are filled in by the
service. Preconditions are checked again where the entry is applied (see image.apply).
"""

from __future__ import annotations

import structlog

from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.decision import Decision
from metadata_quorum.election import Election, changes_electing_offline, changes_removing_broker
from metadata_quorum.image import NO_LEADER, BrokerImage, MetadataImage, apply_all
from metadata_quorum.records import (
    NEW_BROKER_EPOCH,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from metadata_quorum.topic_admin import partition_state
from proto import common_pb2 as common
from proto import controller_pb2 as pb

PRODUCER_ID_BLOCK_SIZE = 1000

log = structlog.get_logger("controller")


def _moves(image: MetadataImage, broker_id: int, why: str) -> list[Record]:
    """Partition changes taking ``broker_id`` out of ISRs and leaderships, logged."""
    out: list[Record] = []
    for record, election in changes_removing_broker(image, broker_id):
        _log_election(image, record, election, why)
        out.append(record)
    return out


def _log_election(image: MetadataImage, record: PartitionChangeRecord, election: Election, why: str) -> None:
    topic = image.topics_by_id[record.topic_id].name
    event = "unclean leader election: committed data may be lost" if election.unclean else "partition change"
    method = log.warning if election.unclean or election.leader == NO_LEADER else log.info
    method(event, topic_partition=f"{topic}-{record.partition}", leader=election.leader, isr=list(election.isr), reason=why)


def broker_problem(image: MetadataImage, broker_id: int, broker_epoch: int) -> tuple[int, str] | None:
    """Why a request from ``broker_id`` at ``broker_epoch`` cannot be served, or None."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return common.BROKER_NOT_REGISTERED, f"broker {broker_id} is not registered; register (restart the broker) and retry"
    if broker.epoch != broker_epoch:
        return common.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {broker_epoch} is stale (current {broker.epoch}); register again and retry"
    return None


def register_broker(image: MetadataImage, request: pb.RegisterBrokerRequest, heartbeats: BrokerHeartbeatManager, now_ms: int) -> Decision[pb.RegisterBrokerResponse]:
    """A broker process starts: a new registration (fenced until caught up) with a new epoch.
    A retry of the same incarnation gets its existing epoch; another live process with the
    same id is refused until its session expires."""
    existing = image.brokers.get(request.broker_id)
    if existing is not None and existing.incarnation_id == request.incarnation_id:
        heartbeats.touch(request.broker_id, now_ms)
        return Decision((), pb.RegisterBrokerResponse(broker_epoch=existing.epoch))
    if existing is not None and not existing.fenced and heartbeats.is_alive(request.broker_id, now_ms):
        since = heartbeats.since_last_contact_ms(request.broker_id, now_ms)
        return Decision((), pb.RegisterBrokerResponse(
            error_code=common.DUPLICATE_BROKER_REGISTRATION,
            error_message=(
                f"broker id {request.broker_id} is registered by another live process (incarnation {existing.incarnation_id}, "
                f"last heartbeat {since} ms ago); if that process is gone, retry after broker.session.timeout.ms "
                f"({heartbeats.session_timeout_ms} ms), otherwise give this broker another id"
            ),
        ))
    records: list[Record] = []
    if existing is not None and not existing.fenced:
        records += _moves(image, request.broker_id, "broker re-registered with a new incarnation")
    records.append(RegisterBrokerRecord(request.broker_id, NEW_BROKER_EPOCH, request.host, request.port, request.rack, request.incarnation_id))
    heartbeats.touch(request.broker_id, now_ms)
    return Decision(tuple(records), pb.RegisterBrokerResponse())


def _leads_any(image: MetadataImage, broker_id: int) -> bool:
    return any(p.leader == broker_id for topic in image.topics.values() for p in topic.partitions.values())


def fence_records(image: MetadataImage, broker: BrokerImage, why: str) -> list[Record]:
    """Fence ``broker`` and move its leaderships and ISR memberships."""
    return [FenceBrokerRecord(broker.broker_id, broker.epoch), *_moves(image, broker.broker_id, why)]


def _unfence_records(image: MetadataImage, broker: BrokerImage) -> list[Record]:
    unfence = UnfenceBrokerRecord(broker.broker_id, broker.epoch)
    after = apply_all(image, [unfence])
    records: list[Record] = [unfence]
    for record, election in changes_electing_offline(after):
        _log_election(after, record, election, f"broker {broker.broker_id} unfenced")
        records.append(record)
    return records


def broker_heartbeat(image: MetadataImage, request: pb.BrokerHeartbeatRequest, heartbeats: BrokerHeartbeatManager, now_ms: int) -> Decision[pb.BrokerHeartbeatResponse]:
    """Record liveness and decide: unfence once caught up, fence on request, or walk the
    controlled shutdown (leave ISRs and leaderships, then allow the broker to stop)."""
    problem = broker_problem(image, request.broker_id, request.broker_epoch)
    if problem is not None:
        return Decision((), pb.BrokerHeartbeatResponse(error_code=problem[0], error_message=problem[1], is_fenced=True))
    heartbeats.touch(request.broker_id, now_ms)
    broker = image.brokers[request.broker_id]
    caught_up = request.current_metadata_offset >= broker.epoch
    records: list[Record] = []
    if request.want_shutdown:
        if not broker.in_controlled_shutdown:
            records.append(BrokerRegistrationChangeRecord(broker.broker_id, broker.epoch, in_controlled_shutdown=True))
            records += _moves(apply_all(image, records), broker.broker_id, "controlled shutdown")
        after = apply_all(image, records)
        if not _leads_any(after, broker.broker_id) and not broker.fenced:
            records.append(FenceBrokerRecord(broker.broker_id, broker.epoch))
    elif request.want_fence and not broker.fenced:
        records = fence_records(image, broker, "broker asked to be fenced")
    elif broker.fenced and caught_up and not broker.in_controlled_shutdown:
        records = _unfence_records(image, broker)
    after = apply_all(image, records)
    now = after.brokers[broker.broker_id]
    should_shutdown = request.want_shutdown and not _leads_any(after, broker.broker_id)
    return Decision(tuple(records), pb.BrokerHeartbeatResponse(is_fenced=now.fenced, should_shutdown=should_shutdown, is_caught_up=caught_up))


def expired_broker_fencing(image: MetadataImage, heartbeats: BrokerHeartbeatManager, now_ms: int) -> Decision[int | None]:
    """Fence the first unfenced broker whose session ran out (one per entry, so partition
    changes are computed on the image that includes the previous fence). The response is the
    fenced broker id."""
    unfenced = [b.broker_id for b in image.brokers.values() if not b.fenced]
    for broker_id in heartbeats.expired(unfenced, now_ms):
        since = heartbeats.since_last_contact_ms(broker_id, now_ms)
        log.warning("fencing broker: session expired", broker_id=broker_id, broker_epoch=image.brokers[broker_id].epoch, since_last_heartbeat_ms=since)
        return Decision(tuple(fence_records(image, image.brokers[broker_id], "session expired")), broker_id)
    return Decision((), None)


def _ineligible(image: MetadataImage, replica: pb.AlterPartitionRequest.NewIsrReplica) -> str | None:
    broker = image.brokers.get(replica.broker_id)
    if broker is None:
        return "not registered"
    if broker.fenced:
        return "fenced"
    if broker.in_controlled_shutdown:
        return "in controlled shutdown"
    if replica.broker_epoch != -1 and replica.broker_epoch != broker.epoch:
        return f"on broker epoch {replica.broker_epoch}, current is {broker.epoch}"
    return None


def alter_partition(image: MetadataImage, request: pb.AlterPartitionRequest) -> Decision[pb.AlterPartitionResponse]:
    """A leader proposes a new ISR for its partitions. Each is checked against the image:
    leader epoch (FENCED_LEADER_EPOCH), partition epoch (INVALID_UPDATE_VERSION), new ISR
    members usable and on their current broker epoch (INELIGIBLE_REPLICA)."""
    problem = broker_problem(image, request.broker_id, request.broker_epoch)
    if problem is not None:
        return Decision((), pb.AlterPartitionResponse(error_code=problem[0], error_message=problem[1]))
    records: list[Record] = []
    results: list[pb.PartitionState] = []
    for wanted in request.partitions:
        name, number = wanted.topic, wanted.partition
        topic, p = image.topics.get(name), image.partition(name, number)
        if topic is None or p is None:
            results.append(pb.PartitionState(topic=name, partition=number, error_code=common.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"{name}-{number} does not exist (deleted?); stop replicating it"))
            continue
        tp = f"{name}-{number}"
        code, message = common.NONE, ""
        new_isr = tuple(r.broker_id for r in wanted.new_isr)
        ineligible = [(r.broker_id, why) for r in wanted.new_isr if r.broker_id not in p.isr and (why := _ineligible(image, r))]
        if p.leader != request.broker_id:
            code, message = common.NOT_LEADER_OR_FOLLOWER, f"broker {request.broker_id} does not lead {tp} (leader is {p.leader}); apply newer metadata"
        elif wanted.leader_epoch != p.leader_epoch:
            code, message = common.FENCED_LEADER_EPOCH, f"leader epoch {wanted.leader_epoch} for {tp} is not current ({p.leader_epoch}); apply newer metadata"
        elif wanted.partition_epoch != p.partition_epoch:
            code, message = common.INVALID_UPDATE_VERSION, f"partition epoch {wanted.partition_epoch} for {tp} is stale (current {p.partition_epoch}); apply newer metadata and propose again"
        elif request.broker_id not in new_isr or not set(new_isr) <= set(p.replicas) or len(set(new_isr)) != len(new_isr):
            code, message = common.INVALID_REQUEST, f"new ISR {list(new_isr)} for {tp} must be distinct replicas of {list(p.replicas)} including the leader"
        elif ineligible:
            code, message = common.INELIGIBLE_REPLICA, f"replicas cannot join the ISR of {tp}: " + ", ".join(f"{b} is {why}" for b, why in ineligible) + "; retry after they catch up with metadata"
        if code != common.NONE:
            results.append(partition_state(topic, p, code, message))
            continue
        if new_isr != p.isr:
            records.append(PartitionChangeRecord(topic.topic_id, number, p.partition_epoch, isr=new_isr))
        results.append(partition_state(topic, p))
    after = apply_all(image, records)
    final = [partition_state(after.topics[r.topic], after.topics[r.topic].partitions[r.partition]) if r.error_code == common.NONE else r for r in results]
    return Decision(tuple(records), pb.AlterPartitionResponse(partitions=final))


def allocate_producer_ids(image: MetadataImage, request: pb.AllocateProducerIdsRequest) -> Decision[pb.AllocateProducerIdsResponse]:
    """Hand the broker the next block of PRODUCER_ID_BLOCK_SIZE producer ids."""
    problem = broker_problem(image, request.broker_id, request.broker_epoch)
    if problem is not None:
        return Decision((), pb.AllocateProducerIdsResponse(error_code=problem[0], error_message=problem[1]))
    start = image.next_producer_id
    record = ProducerIdsRecord(request.broker_id, request.broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)
    return Decision((record,), pb.AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE))
