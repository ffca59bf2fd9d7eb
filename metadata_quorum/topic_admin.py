"""Pure controller decisions for topic administration: create and delete topics, add
partitions, alter and describe configs (a topic that starts to allow unclean elections gets
its leaderless partitions elected in the same entry, as Kafka does), elect leaders on
request, describe topics.

Each function takes the current image and a request and returns a Decision: the records to
commit together as one Raft entry and the response to send once they have. Validation
errors are per topic, with text that says what to do next. No I/O, clock or randomness (the
topic id factory is passed in).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TypeVar

from metadata_quorum import topic_config
from metadata_quorum.broker_capacity import added_replicas, capacity_problem, replica_counts
from metadata_quorum.decision import Decision, Happened
from metadata_quorum.election import PartitionChange, changes_electing_offline, elect_leader, preferred_election
from metadata_quorum.delta import apply_all
from metadata_quorum.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from metadata_quorum.placement import assign_replicas
from metadata_quorum.records import ConfigRecord, PartitionRecord, Record, RemoveTopicRecord, TopicRecord
from server_common.internal_topics import deletion_refusal, repartition_refusal
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode

TOPIC_NAME_LENGTH_MAX = 249
PARTITIONS_PER_TOPIC_MAX = 10_000
# A Raft entry of a topic creation holds at most this many partitions: a controller applies
# (and a follower receives) one entry per Raft tick, so an entry must apply well within
# raftMinTimeout on a busy machine. About 35 KB encoded.
PARTITIONS_PER_ENTRY_MAX = 500
T = TypeVar("T")
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None."""
    if not name:
        return "topic name is empty; use 1-249 characters of a-z, A-Z, 0-9, '.', '_' and '-'"
    if name in (".", ".."):
        return f"topic name '{name}' is reserved; choose another name"
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        return f"topic name is {len(name)} characters long; the limit is {TOPIC_NAME_LENGTH_MAX}"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL_TOPIC_NAME.fullmatch(c)})
        return f"topic name '{name}' contains illegal characters {bad}; use only a-z, A-Z, 0-9, '.', '_' and '-'"
    return None


def _result(name: str, code: int = ErrorCode.NONE, message: str = "", topic_id: str = "") -> pb.TopicResult:
    return pb.TopicResult(name=name, topic_id=topic_id, error_code=code, error_message=message)


def _start_index(topic_id: str) -> int:
    return zlib.crc32(topic_id.encode())


def _placement_problem(image: MetadataImage, replication_factor: int) -> str | None:
    usable = image.usable_broker_ids()
    if replication_factor < 1:
        return f"replication factor must be at least 1, got {replication_factor}"
    if replication_factor > len(usable):
        return (
            f"replication factor {replication_factor} is larger than the {len(usable)} usable broker(s) "
            f"(registered, unfenced, not shutting down: {usable}); start more brokers or lower the replication factor"
        )
    return None


def _new_partitions(image: MetadataImage, topic_id: str, first: int, count: int, replication_factor: int) -> list[Record]:
    assignment = assign_replicas(image.usable_broker_ids(), count, replication_factor, _start_index(topic_id), first)
    return [PartitionRecord(topic_id, p, replicas, replicas, replicas[0], 0, 0) for p, replicas in assignment.items()]


def create_topics(image: MetadataImage, request: pb.CreateTopicsRequest, new_topic_id: Callable[[], str]) -> Decision[pb.CreateTopicsResponse]:
    """Validate each topic and place its partitions. The records of all valid topics commit
    in entries of at most PARTITIONS_PER_ENTRY_MAX partitions: a topic's partitions first
    (kept aside by the image, invisible), then its TopicRecord with its configs in one entry,
    which makes the whole topic appear at once. A creation cut short leaves only invisible
    partitions, which the controller drops (``abandon_pending_topics``). A topic that would put
    a broker past its registered capacity is refused whole (BROKER_CAPACITY_EXCEEDED); the
    topics before it in the request count against the capacity of those after."""
    records: list[Record] = []
    entry_starts: list[int] = []
    entry_start = 0
    results = []
    seen: set[str] = set()
    held = replica_counts(image)
    for t in request.topics:
        problem = topic_name_problem(t.name)
        code = ErrorCode.INVALID_TOPIC
        if problem is None and t.name in seen:
            problem, code = f"topic '{t.name}' appears twice in the request; list it once", ErrorCode.INVALID_REQUEST
        if problem is None and t.name in image.topics:
            results.append(_already_exists(image.topics[t.name], t))
            seen.add(t.name)
            continue
        if problem is None and not 1 <= t.num_partitions <= PARTITIONS_PER_TOPIC_MAX:
            problem, code = f"number of partitions must be between 1 and {PARTITIONS_PER_TOPIC_MAX}, got {t.num_partitions}", ErrorCode.INVALID_PARTITIONS
        if problem is None:
            problem, code = _placement_problem(image, t.replication_factor), ErrorCode.INVALID_REPLICATION_FACTOR
        configs: dict[str, str] = {}
        if problem is None:
            try:
                configs = topic_config.validate(dict(t.configs))
                topic_config.check_min_insync_replicas(configs, t.replication_factor)
            except topic_config.InvalidConfigError as e:
                problem, code = str(e), ErrorCode.INVALID_CONFIG
        seen.add(t.name)
        if problem is not None:
            results.append(_result(t.name, code, problem))
            continue
        topic_id = new_topic_id()
        partitions = _new_partitions(image, topic_id, 0, t.num_partitions, t.replication_factor)
        added = added_replicas(p.replicas for p in partitions)
        problem = capacity_problem(image, held, added, f"creating topic '{t.name}' ({t.num_partitions} partitions, "
                                                       f"replication factor {t.replication_factor})")
        if problem is not None:
            results.append(_result(t.name, ErrorCode.BROKER_CAPACITY_EXCEEDED, problem))
            continue
        held.update(added)
        results.append(_result(t.name, topic_id=topic_id))
        if request.validate_only:
            continue
        for partition in partitions:
            if len(records) - entry_start >= PARTITIONS_PER_ENTRY_MAX:
                entry_start = len(records)
                entry_starts.append(entry_start)
            records.append(partition)
        records.append(TopicRecord(t.name, topic_id))
        records.extend(ConfigRecord(t.name, k, v) for k, v in sorted(configs.items()))
    return Decision(tuple(records), pb.CreateTopicsResponse(topics=results), tuple(entry_starts))


def _already_exists(topic: TopicImage, t: pb.CreateTopicsRequest.Topic) -> pb.TopicResult:
    """TOPIC_ALREADY_EXISTS; with the topic's id when it has exactly the partition count and
    replication factor asked for, which is what a client's retry of a creation that did
    complete finds (``ControllerClient.create_topics`` then answers success). A topic is
    only ever seen whole (its TopicRecord makes every partition appear at once)."""
    same = len(topic.partitions) == t.num_partitions and _replication_factor(topic) == t.replication_factor
    if same:
        return _result(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{t.name}' already exists with {t.num_partitions} partitions "
                        f"at replication factor {t.replication_factor}; choose another name or delete it first", topic.topic_id)
    return _result(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{t.name}' already exists with {len(topic.partitions)} partitions at "
                   f"replication factor {_replication_factor(topic)}; choose another name or delete it first")


def abandon_pending_topics(image: MetadataImage) -> Decision[int]:
    """Drop the partitions of topic creations that never got their TopicRecord (the
    controller creating them lost leadership or an entry failed); the response is how many
    creations were dropped. Their clients got an error or no answer and retry."""
    return Decision(tuple(RemoveTopicRecord(topic_id) for topic_id in sorted(image.pending_partitions)), len(image.pending_partitions))


def _unknown_topic(name: str) -> pb.TopicResult:
    return _result(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist; list topics with `kraftlog topics list`")


@dataclass(frozen=True)
class Refusal:
    code: int
    message: str


def _for_existing_topics(
    image: MetadataImage,
    items: Iterable[T],
    name_of: Callable[[T], str],
    decide: Callable[[TopicImage, T], "list[Record] | Refusal"],
    validate_only: bool = False,
) -> tuple[tuple[Record, ...], list[pb.TopicResult]]:
    """Run ``decide`` for each item that names an existing topic; collect records and results."""
    records: list[Record] = []
    results = []
    for item in items:
        name = name_of(item)
        topic = image.topics.get(name)
        if topic is None:
            results.append(_unknown_topic(name))
            continue
        outcome = decide(topic, item)
        if isinstance(outcome, Refusal):
            results.append(_result(name, outcome.code, outcome.message, topic.topic_id))
            continue
        results.append(_result(name, topic_id=topic.topic_id))
        if not validate_only:
            records.extend(outcome)
    return tuple(records), results


def delete_topics(image: MetadataImage, request: pb.DeleteTopicsRequest) -> Decision[pb.DeleteTopicsResponse]:
    def remove(topic: TopicImage, name: str) -> list[Record] | Refusal:
        refusal = deletion_refusal(name)
        return [RemoveTopicRecord(topic.topic_id)] if refusal is None else Refusal(ErrorCode.INVALID_REQUEST, refusal)

    records, results = _for_existing_topics(image, dict.fromkeys(request.names), lambda name: name, remove)
    return Decision(records, pb.DeleteTopicsResponse(topics=results))


def create_partitions(image: MetadataImage, request: pb.CreatePartitionsRequest) -> Decision[pb.CreatePartitionsResponse]:
    """Grow topics to ``total_count`` partitions, placed like the topic's first ones; refused
    whole when the new replicas would put a broker past its registered capacity."""
    held = replica_counts(image)

    def grow(topic: TopicImage, t: pb.CreatePartitionsRequest.Topic) -> list[Record] | Refusal:
        current = len(topic.partitions)
        replication_factor = len(topic.partitions[0].target_replicas)
        if (refusal := repartition_refusal(t.name)) is not None:
            return Refusal(ErrorCode.INVALID_PARTITIONS, refusal)
        if t.total_count <= current:
            return Refusal(ErrorCode.INVALID_PARTITIONS, f"topic '{t.name}' already has {current} partitions; ask for more than {current} (partitions can only be added)")
        if t.total_count > PARTITIONS_PER_TOPIC_MAX:
            return Refusal(ErrorCode.INVALID_PARTITIONS, f"at most {PARTITIONS_PER_TOPIC_MAX} partitions per topic, asked for {t.total_count}")
        problem = _placement_problem(image, replication_factor)
        if problem is not None:
            return Refusal(ErrorCode.INVALID_REPLICATION_FACTOR, problem)
        partitions = _new_partitions(image, topic.topic_id, current, t.total_count - current, replication_factor)
        added = added_replicas(p.replicas for p in partitions)
        problem = capacity_problem(image, held, added, f"growing topic '{t.name}' from {current} to {t.total_count} partitions")
        if problem is not None:
            return Refusal(ErrorCode.BROKER_CAPACITY_EXCEEDED, problem)
        held.update(added)
        return partitions

    records, results = _for_existing_topics(image, request.topics, lambda t: t.name, grow, request.validate_only)
    return Decision(records, pb.CreatePartitionsResponse(topics=results))


def _replication_factor(topic: TopicImage) -> int:
    """The smallest replica count among the topic's partitions once reassignments complete."""
    return min(len(p.target_replicas) for p in topic.partitions.values())


def alter_configs(image: MetadataImage, request: pb.AlterConfigsRequest) -> Decision[pb.AlterConfigsResponse]:
    """Incremental alter: SET validates the value, DELETE returns a key to its default."""

    def alter(topic: TopicImage, t: pb.AlterConfigsRequest.Topic) -> list[Record] | Refusal:
        out: list[ConfigRecord] = []
        try:
            for op in t.ops:
                if op.op == pb.AlterConfigsRequest.DELETE:
                    topic_config.check_key(op.key)
                    out.append(ConfigRecord(t.name, op.key, None))
                else:
                    out.append(ConfigRecord(t.name, op.key, topic_config.validate({op.key: op.value})[op.key]))
            after = dict(image.configs.get(t.name, {}))
            after.update({r.key: r.value for r in out})
            topic_config.check_min_insync_replicas({k: v for k, v in after.items() if v is not None}, _replication_factor(topic))
        except topic_config.InvalidConfigError as e:
            return Refusal(ErrorCode.INVALID_CONFIG, str(e))
        return list(out)

    records, results = _for_existing_topics(image, request.topics, lambda t: t.name, alter, request.validate_only)
    elections = changes_electing_offline(apply_all(image, records), {r.topic for r in records if isinstance(r, ConfigRecord)})
    return Decision(records + tuple(change.record() for change in elections), pb.AlterConfigsResponse(topics=results),
                    happened=tuple(change.happened("topic config changed") for change in elections))


def describe_configs(image: MetadataImage, request: pb.DescribeConfigsRequest,
                     visible: Callable[[str], bool] = lambda name: True) -> pb.DescribeConfigsResponse:
    """The named topics' configurations; no names: every topic ``visible`` lets the caller see
    (an empty list asks for "all I may see", never for all)."""
    out = []
    for name in request.topics or [n for n in sorted(image.topics) if visible(n)]:
        if name not in image.topics:
            unknown = _unknown_topic(name)
            out.append(pb.DescribeConfigsResponse.Topic(name=name, error_code=unknown.error_code, error_message=unknown.error_message))
            continue
        overrides = image.configs.get(name, {})
        entries = [
            pb.ConfigEntry(key=key, value=overrides.get(key, _render(spec.default)), is_default=key not in overrides, doc=spec.doc)
            for key, spec in sorted(topic_config.TOPIC_CONFIG_KEYS.items())
        ]
        out.append(pb.DescribeConfigsResponse.Topic(name=name, entries=entries))
    return pb.DescribeConfigsResponse(topics=out, metadata_offset=image.offset)


def _render(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def partition_state(topic: TopicImage, p: PartitionImage, code: int = ErrorCode.NONE, message: str = "") -> pb.PartitionState:
    return pb.PartitionState(
        topic=topic.name,
        topic_id=topic.topic_id,
        partition=p.partition,
        error_code=code,
        error_message=message,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        isr=p.isr,
        replicas=p.replicas,
        adding_replicas=p.adding_replicas,
        removing_replicas=p.removing_replicas,
        unclean_leader_elections=p.unclean_leader_elections,
        eligible_leader_replicas=p.eligible_leader_replicas,
        last_known_elr=p.last_known_elr,
    )


def states_after(image: MetadataImage, records: Sequence[Record], results: Sequence[pb.PartitionState]) -> list[pb.PartitionState]:
    """``results`` with every successful one replaced by the partition's state once
    ``records`` have committed (errors stay as they are)."""
    after = apply_all(image, records)
    return [partition_state(after.topics[r.topic], after.topics[r.topic].partitions[r.partition]) if r.error_code == ErrorCode.NONE else r for r in results]


def describe_topics(image: MetadataImage, visible: Callable[[str], bool] = lambda name: True) -> list[pb.TopicDescription]:
    """Every topic ``visible`` lets the caller see, with its id, leaders and ISR."""
    return [
        pb.TopicDescription(
            name=topic.name,
            topic_id=topic.topic_id,
            partitions=[partition_state(topic, topic.partitions[n]) for n in sorted(topic.partitions)],
        )
        for topic in (image.topics[name] for name in sorted(image.topics) if visible(name))
    ]


def lookup_partition(image: MetadataImage, name: str, number: int, next_step: str = "check the topic and partition") -> tuple[TopicImage, PartitionImage] | pb.PartitionState:
    """The topic and partition a request names, or the answer for it: INVALID_REQUEST for a
    negative number (no partition can have it: not retriable), else UNKNOWN_TOPIC_OR_PARTITION."""
    if number < 0:
        return pb.PartitionState(topic=name, partition=number, error_code=ErrorCode.INVALID_REQUEST,
                                 error_message=f"{name}-{number}: partition numbers are >= 0 (a topic of N partitions has 0..N-1): fix the request")
    topic, p = image.topics.get(name), image.partition(name, number)
    if topic is None or p is None:
        return pb.PartitionState(topic=name, partition=number, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"{name}-{number} does not exist; {next_step}")
    return topic, p


def selected_partitions(image: MetadataImage, selection: Sequence[pb.ElectLeadersRequest.TopicPartitions]) -> list[tuple[str, int]]:
    """(topic, partition) pairs a request names: every partition when ``selection`` is empty,
    every partition of a topic listed without numbers (partition 0 of an unknown topic, so
    that it gets an answer)."""
    if not selection:
        return [(name, n) for name in sorted(image.topics) for n in sorted(image.topics[name].partitions)]
    out = []
    for t in selection:
        numbers = t.partitions or (sorted(image.topics[t.topic].partitions) if t.topic in image.topics else [0])
        out.extend((t.topic, n) for n in numbers)
    return out


def elect_leaders(image: MetadataImage, request: pb.ElectLeadersRequest) -> Decision[pb.ElectLeadersResponse]:
    """PREFERRED moves leadership back to the first replica when it is in sync and usable;
    UNCLEAN elects a leader for partitions that have none, outside the ISR if it must
    (logged and counted like any unclean election)."""
    usable = set(image.usable_broker_ids())
    preferred = request.election_type == pb.ElectLeadersRequest.PREFERRED
    records: list[Record] = []
    happened: list[Happened] = []
    results = []
    for name, number in selected_partitions(image, request.topics):
        found = lookup_partition(image, name, number)
        if isinstance(found, pb.PartitionState):
            results.append(found)
            continue
        topic, p = found
        if preferred:
            if p.leader == p.replicas[0]:
                results.append(partition_state(topic, p, ErrorCode.ELECTION_NOT_NEEDED, f"broker {p.leader} already leads {name}-{number}"))
                continue
            election = preferred_election(p, usable)
            if election is None:
                results.append(partition_state(topic, p, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"preferred leader {p.replicas[0]} of {name}-{number} is not a usable in-sync replica; retry once it has caught up"))
                continue
        else:
            if p.leader != NO_LEADER:
                results.append(partition_state(topic, p, ErrorCode.ELECTION_NOT_NEEDED, f"{name}-{number} has leader {p.leader}"))
                continue
            election = elect_leader(p, usable, p.isr, unclean_allowed=True)
            if election.leader == NO_LEADER:
                results.append(partition_state(topic, p, ErrorCode.LEADER_NOT_AVAILABLE, f"no replica of {name}-{number} ({list(p.replicas)}) is alive; start one of those brokers"))
                continue
        change = PartitionChange.electing(topic, p, election)
        assert change is not None, f"an election for {name}-{number} that changes nothing"
        happened.append(change.happened("preferred leader election requested" if preferred else "unclean leader election requested"))
        records.append(change.record())
        results.append(partition_state(topic, p))
    return Decision(tuple(records), pb.ElectLeadersResponse(partitions=states_after(image, records, results)), happened=tuple(happened))
