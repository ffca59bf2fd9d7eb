"""Pure controller decisions about brokers: registration, heartbeats (fence, unfence,
controlled shutdown), session expiry, AlterPartition (KIP-497/903, completing partition
reassignments whose new replicas joined the ISR) and producer-id blocks.

Image + request + ``now_ms`` (+ the in-memory heartbeat manager, which these functions
update) in; a Decision (records for one Raft entry, response assuming they commit) out.
Answers that depend on the committed offset (a new broker epoch) are filled in by the
service. Preconditions are checked again where the entry is applied (see delta.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Collection, TypeVar

from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.decision import Decision, Happened
from metadata_quorum.election import PARTITION_CHANGES_PER_ENTRY_MAX, changes_electing_offline, changes_removing_broker
from metadata_quorum.delta import apply_all
from metadata_quorum.image import BrokerImage, MetadataImage
from metadata_quorum.reassignment import settle
from metadata_quorum.records import (
    NEW_BROKER_EPOCH,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from metadata_quorum.topic_admin import lookup_partition, partition_state, states_after
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode

PRODUCER_ID_BLOCK_SIZE = 1000
R = TypeVar("R")



def _moves(image: MetadataImage, broker_id: int, why: str, unclean_shutdown: bool = False,
           only: Collection[tuple[str, int]] | None = None) -> tuple[list[Record], list[Happened]]:
    """Partition changes taking ``broker_id`` out of ISRs and leaderships (and, after an
    unclean shutdown, out of every ELR), and their log lines; ``only`` these partitions when given."""
    changes = changes_removing_broker(image, broker_id, unclean_shutdown, only)
    return [change.record() for change in changes], [change.happened(why) for change in changes]


def broker_problem(image: MetadataImage, broker_id: int, broker_epoch: int) -> tuple[int, str] | None:
    """Why a request from ``broker_id`` at ``broker_epoch`` cannot be served, or None.

    An epoch older than the registration's means a newer process took the id over (each
    incarnation keeps one epoch): that process must stop, not register again and take the
    id back, so it is told DUPLICATE_BROKER_REGISTRATION rather than STALE_BROKER_EPOCH."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return ErrorCode.BROKER_NOT_REGISTERED, f"broker {broker_id} is not registered; register (restart the broker) and retry"
    if broker_epoch < 0:
        return ErrorCode.STALE_BROKER_EPOCH, f"broker {broker_id} has no broker epoch yet (current registration {broker.epoch}); retry once it has registered"
    if broker_epoch < broker.epoch:
        return ErrorCode.DUPLICATE_BROKER_REGISTRATION, (
            f"broker {broker_id} epoch {broker_epoch} was replaced by a newer process with the same id (incarnation "
            f"{broker.incarnation_id}, epoch {broker.epoch}): stop this process, or give it another --broker-id"
        )
    if broker.epoch != broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {broker_epoch} is stale (current {broker.epoch}); register again and retry"
    return None


def register_broker(image: MetadataImage, request: pb.RegisterBrokerRequest, heartbeats: BrokerHeartbeatManager, now_ms: int) -> Decision[pb.RegisterBrokerResponse]:
    """A broker process starts: a new registration (fenced until caught up) with a new epoch.

    A retry of the same incarnation gets its existing epoch and changes nothing. A new
    incarnation replaces the registration at once (KIP-903's broker epochs make that safe):
    a process restarting with the same id must not wait out the old one's session, which a
    newly active controller grants in full to every broker. The old registration's epoch is
    fenced with it, and its leaderships and ISR memberships move in the same entry; should
    the old process still run, its requests carry that epoch and are refused from then on
    (see broker_problem), so two processes never take the id from each other in turn.

    Unless the request's ``previous_broker_epoch`` is the epoch of the registration it
    replaces (the broker shut down cleanly in it: KIP-966), the shutdown was unclean and its
    unflushed tail may be gone: the broker leaves every ISR and ELR in the same entry (for the
    last-known ELR) and must catch up into the ISR again like any follower."""
    if not request.incarnation_id:
        return Decision((), pb.RegisterBrokerResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"broker {request.broker_id} registered without an incarnation id: send a fresh one per process start",
        ))
    existing = image.brokers.get(request.broker_id)
    if existing is not None and existing.incarnation_id == request.incarnation_id:
        heartbeats.touch(request.broker_id, now_ms)
        return Decision((), pb.RegisterBrokerResponse(broker_epoch=existing.epoch))
    records: list[Record] = []
    happened: list[Happened] = []
    clean = existing is not None and request.previous_broker_epoch == existing.epoch
    if existing is not None and not existing.fenced:
        happened.append(Happened("warning", "new broker incarnation replaces a live registration", {
            "broker_id": request.broker_id, "broker_epoch": existing.epoch,
            "incarnation_id": request.incarnation_id, "replaced_incarnation_id": existing.incarnation_id,
            "since_last_heartbeat_ms": heartbeats.since_last_contact_ms(request.broker_id, now_ms),
        }))
    if existing is not None and not clean:
        happened.append(Happened("warning", "broker registers after an unclean shutdown: out of every ISR and ELR", {
            "broker_id": request.broker_id, "broker_epoch": existing.epoch, "previous_broker_epoch": request.previous_broker_epoch,
        }))
    if existing is not None and (not clean or not existing.fenced):
        why = "broker re-registered with a new incarnation" + ("" if clean else " after an unclean shutdown")
        moves, moved = _moves(image, request.broker_id, why, unclean_shutdown=not clean)
        records += moves
        happened += moved
    records.append(RegisterBrokerRecord(request.broker_id, NEW_BROKER_EPOCH, request.host, request.port, request.rack, request.incarnation_id,
                                       max_replicas=request.max_replicas, kafka_endpoint=request.kafka_endpoint))
    heartbeats.touch(request.broker_id, now_ms)
    return Decision(tuple(records), pb.RegisterBrokerResponse(), happened=tuple(happened))


def _fencing(image: MetadataImage, broker: BrokerImage, why: str, response: R, happened: tuple[Happened, ...] = ()) -> Decision[R]:
    """Move ``broker``'s leaderships and ISR memberships, then fence it, in entries of at most
    PARTITION_CHANGES_PER_ENTRY_MAX records: a broker in 10,000 ISRs is not fenced in one entry
    too large to replicate and apply within Raft's election timeout (one such entry stalled
    every controller for seconds and set off more fencing). Every prefix is consistent: the
    moves only take the broker out, and it stays unfenced until the last entry, so a controller
    that stops half way leaves a live registration, which the next one fences again, moving
    what is left. ``happened``: what the caller saw first (why the broker is fenced)."""
    moves, moved = _moves(image, broker.broker_id, why)
    records = [*moves, FenceBrokerRecord(broker.broker_id, broker.epoch)]
    return Decision(tuple(records), response, _bounded_entries(records), (*happened, *moved))


def _bounded_entries(records: list[Record]) -> tuple[int, ...]:
    """Entry starts cutting ``records`` into entries of at most PARTITION_CHANGES_PER_ENTRY_MAX."""
    return tuple(range(PARTITION_CHANGES_PER_ENTRY_MAX, len(records), PARTITION_CHANGES_PER_ENTRY_MAX))


def _unfence_records(image: MetadataImage, broker: BrokerImage) -> tuple[list[Record], list[Happened]]:
    unfence = UnfenceBrokerRecord(broker.broker_id, broker.epoch)
    changes = changes_electing_offline(apply_all(image, [unfence]))
    return [unfence, *(change.record() for change in changes)], [change.happened(f"broker {broker.broker_id} unfenced") for change in changes]


def broker_heartbeat(image: MetadataImage, request: pb.BrokerHeartbeatRequest, heartbeats: BrokerHeartbeatManager, now_ms: int) -> Decision[pb.BrokerHeartbeatResponse]:
    """Record liveness and decide: unfence once caught up, fence on request, or walk the
    controlled shutdown (leave ISRs and leaderships, then allow the broker to stop). A
    heartbeat that changes nothing else takes the replicas it reports offline (a failed log:
    full disk, I/O error) out of their ISR and ELR and moves their leadership; the broker
    reports them with every heartbeat until it restarts, so this repeats until it holds."""
    problem = broker_problem(image, request.broker_id, request.broker_epoch)
    if problem is not None:
        return Decision((), pb.BrokerHeartbeatResponse(error_code=problem[0], error_message=problem[1], is_fenced=True))
    heartbeats.touch(request.broker_id, now_ms)
    broker = image.brokers[request.broker_id]
    caught_up = request.current_metadata_offset >= broker.epoch
    records: list[Record] = []
    happened: list[Happened] = []
    entry_starts: tuple[int, ...] = ()
    should_shutdown = False
    if request.want_shutdown:
        records, should_shutdown, happened = _controlled_shutdown_step(image, broker)
    elif request.want_fence and not broker.fenced:
        fencing = _fencing(image, broker, "broker asked to be fenced", None)
        records, entry_starts, happened = list(fencing.records), fencing.entry_starts, list(fencing.happened)
    elif broker.fenced and caught_up and not broker.in_controlled_shutdown:
        records, happened = _unfence_records(image, broker)
    if not records and request.offline_replicas:
        offline = {(r.topic, r.partition) for r in request.offline_replicas}
        records, happened = _moves(image, broker.broker_id, "its log for the partition is offline (storage error)", unclean_shutdown=True, only=offline)
        entry_starts = _bounded_entries(records)
    now = apply_all(image, records).brokers[broker.broker_id]
    return Decision(tuple(records), pb.BrokerHeartbeatResponse(is_fenced=now.fenced, should_shutdown=should_shutdown, is_caught_up=caught_up),
                    entry_starts, tuple(happened))


def _controlled_shutdown_step(image: MetadataImage, broker: BrokerImage) -> tuple[list[Record], bool, list[Happened]]:
    """One heartbeat's share of a controlled shutdown, whether the broker may stop now, and
    what happened.

    The broker heartbeats every 100 ms while it waits, and each heartbeat moves up to
    PARTITION_CHANGES_PER_ENTRY_MAX of its leaderships and ISR places (leaderships first):
    a broker in 10,000 ISRs leaves them in bounded entries, as Kafka's controller does,
    instead of in one entry too large to replicate and apply within Raft's election timeout.
    The step after the last move fences the broker and lets it stop; a broker left as the
    last ISR member of a partition stays in that ISR (the partition waits for it, leaderless)."""
    records: list[Record] = []
    if not broker.in_controlled_shutdown:
        records.append(BrokerRegistrationChangeRecord(broker.broker_id, broker.epoch, in_controlled_shutdown=True))
    moves = changes_removing_broker(apply_all(image, records), broker.broker_id)
    moves.sort(key=lambda change: change.before.leader != broker.broker_id)  # stable: leaderships first, then ISR places
    assert all(change.after.leader != broker.broker_id for change in moves), "a broker in controlled shutdown is never elected"
    happened = [change.happened("controlled shutdown") for change in moves[:PARTITION_CHANGES_PER_ENTRY_MAX]]
    records += [change.record() for change in moves[:PARTITION_CHANGES_PER_ENTRY_MAX]]
    done = len(moves) <= PARTITION_CHANGES_PER_ENTRY_MAX
    if done and not broker.fenced:
        records.append(FenceBrokerRecord(broker.broker_id, broker.epoch))
    if records:  # the heartbeats that follow (the broker keeps sending them while it stops) change nothing: not logged
        happened.append(Happened("info", "controlled shutdown step", {
            "broker_id": broker.broker_id, "broker_epoch": broker.epoch, "partitions_moved": min(len(moves), PARTITION_CHANGES_PER_ENTRY_MAX),
            "partitions_left": max(0, len(moves) - PARTITION_CHANGES_PER_ENTRY_MAX), "may_stop": done,
        }))
    return records, done, happened


def expired_broker_fencing(image: MetadataImage, heartbeats: BrokerHeartbeatManager, now_ms: int) -> Decision[int | None]:
    """Fence the first unfenced broker whose session ran out (one per decision, so partition
    changes are computed on the image that includes the previous fence). The response is the
    fenced broker id."""
    unfenced = [b.broker_id for b in image.brokers.values() if not b.fenced]
    for broker_id in heartbeats.expired(unfenced, now_ms):
        since = heartbeats.since_last_contact_ms(broker_id, now_ms)
        why = Happened("warning", "fencing broker: session expired",
                       {"broker_id": broker_id, "broker_epoch": image.brokers[broker_id].epoch, "since_last_heartbeat_ms": since})
        return _fencing(image, image.brokers[broker_id], "session expired", broker_id, (why,))
    return Decision((), None)


def disconnected_broker_fencing(image: MetadataImage, broker_id: int, broker_epoch: int) -> Decision[bool]:
    """A broker's session stream closed without a controlled shutdown: its process is gone,
    so fence it now rather than after the session timeout. Only the registration that opened
    the stream is fenced (a broker that already restarted has a newer epoch)."""
    broker = image.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch or broker.fenced or broker.in_controlled_shutdown:
        return Decision((), False)
    why = Happened("warning", "fencing broker: its session connection closed", {"broker_id": broker_id, "broker_epoch": broker_epoch})
    return _fencing(image, broker, "session connection closed", True, (why,))


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
    members usable and on their current broker epoch (INELIGIBLE_REPLICA). A new ISR that
    holds every replica a reassignment adds completes the reassignment in the same record
    (see reassignment.settle), which may move leadership away from the proposer."""
    problem = broker_problem(image, request.broker_id, request.broker_epoch)
    if problem is not None:
        return Decision((), pb.AlterPartitionResponse(error_code=problem[0], error_message=problem[1]))
    records: list[Record] = []
    happened: list[Happened] = []
    results: list[pb.PartitionState] = []
    for wanted in request.partitions:
        name, number = wanted.topic, wanted.partition
        found = lookup_partition(image, name, number, "it was deleted: stop replicating it")
        if isinstance(found, pb.PartitionState):
            results.append(found)
            continue
        topic, p = found
        tp = f"{name}-{number}"
        code, message = ErrorCode.NONE, ""
        new_isr = tuple(r.broker_id for r in wanted.new_isr)
        ineligible = [(r.broker_id, why) for r in wanted.new_isr if r.broker_id not in p.isr and (why := _ineligible(image, r))]
        if p.leader != request.broker_id:
            code, message = ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {request.broker_id} does not lead {tp} (leader is {p.leader}); apply newer metadata"
        elif wanted.leader_epoch != p.leader_epoch:
            code, message = ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {wanted.leader_epoch} for {tp} is not current ({p.leader_epoch}); apply newer metadata"
        elif wanted.partition_epoch != p.partition_epoch:
            code, message = ErrorCode.INVALID_UPDATE_VERSION, f"partition epoch {wanted.partition_epoch} for {tp} is stale (current {p.partition_epoch}); apply newer metadata and propose again"
        elif request.broker_id not in new_isr or not set(new_isr) <= set(p.replicas) or len(set(new_isr)) != len(new_isr):
            code, message = ErrorCode.INVALID_REQUEST, f"new ISR {list(new_isr)} for {tp} must be distinct replicas of {list(p.replicas)} including the leader"
        elif ineligible:
            code, message = ErrorCode.INELIGIBLE_REPLICA, f"replicas cannot join the ISR of {tp}: " + ", ".join(f"{b} is {why}" for b, why in ineligible) + "; retry after they catch up with metadata"
        if code != ErrorCode.NONE:
            results.append(partition_state(topic, p, code, message))
            continue
        change = settle(image, topic, p, replace(p, isr=new_isr))
        if change is not None:
            happened.append(change.happened(f"AlterPartition from leader {request.broker_id}"
                                            + ("; reassignment completed" if p.reassignment_in_progress and not change.after.reassignment_in_progress else "")))
            records.append(change.record())
        results.append(partition_state(topic, p))
    return Decision(tuple(records), pb.AlterPartitionResponse(partitions=states_after(image, records, results)), happened=tuple(happened))


def allocate_producer_ids(image: MetadataImage, request: pb.AllocateProducerIdsRequest) -> Decision[pb.AllocateProducerIdsResponse]:
    """Hand the broker the next block of PRODUCER_ID_BLOCK_SIZE producer ids."""
    problem = broker_problem(image, request.broker_id, request.broker_epoch)
    if problem is not None:
        return Decision((), pb.AllocateProducerIdsResponse(error_code=problem[0], error_message=problem[1]))
    start = image.next_producer_id
    record = ProducerIdsRecord(request.broker_id, request.broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)
    return Decision((record,), pb.AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE))
