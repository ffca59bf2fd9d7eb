"""MetadataDelta: a batch replayed into one delta reaches the same image as its records
applied one by one, shares every sub-image it did not change, and says exactly which
partitions, topics, configs and brokers changed (and what that means for one broker)."""

from __future__ import annotations

import random

import pytest

from metadata_quorum import records as r
from metadata_quorum.delta import MetadataDelta, apply, apply_all
from metadata_quorum.image import MetadataImage, RecordRejected

from .helpers import cluster, with_topic

BASE = apply_all(with_topic(cluster(), "a", 4, 3), [r.PartitionRecord("b-id", n, (2, 3, 1), (2, 3, 1), 2, 0, 0) for n in range(2)] + [r.TopicRecord("b", "b-id")])


def ids(image: MetadataImage) -> dict[str, str]:
    return {name: topic.topic_id for name, topic in image.topics.items()}


def isr_flips(image: MetadataImage, count: int, seed: int) -> list[r.Record]:
    """A valid stream of ISR shrinks and expansions (leader kept) over every partition."""
    rng = random.Random(seed)
    epochs = {(t.topic_id, n): p.partition_epoch for t in image.topics.values() for n, p in t.partitions.items()}
    leaders = {(t.topic_id, n): p for t in image.topics.values() for n, p in t.partitions.items()}
    out: list[r.Record] = []
    for _ in range(count):
        key = rng.choice(sorted(epochs))
        part = leaders[key]
        isr = (part.leader,) if epochs[key] % 2 == 0 else part.replicas
        out.append(r.PartitionChangeRecord(key[0], key[1], epochs[key], isr=isr))
        epochs[key] += 1
    return out


@pytest.mark.parametrize("batch", [1, 3, 50])
def test_a_batch_in_one_delta_equals_its_records_one_by_one(batch: int) -> None:
    stream = isr_flips(BASE, 200, seed=batch)
    one_by_one = BASE
    for record in stream:
        one_by_one = apply(one_by_one, record)
    batched = BASE
    for first in range(0, len(stream), batch):
        batched = apply_all(batched, stream[first : first + batch])
    assert batched == one_by_one and batched.offset == BASE.offset + len(stream)


def test_only_changed_sub_images_are_new() -> None:
    a = BASE.topics["a"]
    delta = MetadataDelta(BASE)
    delta.replay_all([r.PartitionChangeRecord(a.topic_id, 1, 0, isr=(a.partitions[1].leader,))])
    after = delta.apply()
    assert after.topics["b"] is BASE.topics["b"] and after.brokers is BASE.brokers and after.configs is BASE.configs
    assert all(after.topics["a"].partitions[n] is a.partitions[n] for n in (0, 2, 3))
    assert after.topics_by_id[a.topic_id] is after.topics["a"]
    assert {t: set(parts) for t, parts in delta.changed_partitions.items()} == {a.topic_id: {1}}
    assert not delta.deleted_topics and not delta.changed_configs and not delta.changed_brokers


def test_reads_during_replay_see_the_records_before() -> None:
    a = BASE.topics["a"]
    leader = a.partitions[0].leader
    delta = MetadataDelta(BASE)
    delta.replay(r.PartitionChangeRecord(a.topic_id, 0, 0, isr=(leader,)))
    with pytest.raises(RecordRejected):  # the same base epoch again: the first change moved it on
        delta.replay(r.PartitionChangeRecord(a.topic_id, 0, 0, isr=(leader,)))
    fresh = MetadataDelta(BASE)
    fresh.replay_all([r.RemoveTopicRecord(a.topic_id), r.PartitionRecord("new-a", 0, (1,), (1,), 1, 0, 0), r.TopicRecord("a", "new-a")])
    after = fresh.apply()
    assert ids(after)["a"] == "new-a" and a.topic_id not in after.topics_by_id and list(after.topics["a"].partitions) == [0]
    assert set(fresh.deleted_topics) == {a.topic_id}


def test_a_topic_created_over_several_entries_appears_whole() -> None:
    image = BASE
    for first in range(0, 10, 4):  # partitions first, in entries of four, then the TopicRecord
        image = apply_all(image, [r.PartitionRecord("c-id", n, (1, 2), (1, 2), 1, 0, 0) for n in range(first, min(first + 4, 10))])
        assert "c" not in image.topics and len(image.pending_partitions["c-id"]) == min(first + 4, 10)
    delta = MetadataDelta(image)
    delta.replay_all([r.TopicRecord("c", "c-id"), r.ConfigRecord("c", "retention.ms", "5")])
    after = delta.apply()
    assert sorted(after.topics["c"].partitions) == list(range(10)) and not after.pending_partitions
    assert all(p.topic == "c" for p in after.topics["c"].partitions.values())
    assert set(delta.changed_partitions["c-id"]) == set(range(10)) and delta.changed_configs == {"c"}


def test_local_changes_name_this_brokers_partitions_only() -> None:
    a, b = BASE.topics["a"], BASE.topics["b"]
    p0, p1 = a.partitions[0], a.partitions[1]
    away = next(x for x in p1.replicas if x != p1.leader)  # loses its replica of a-1
    delta = MetadataDelta(BASE)
    delta.replay_all([
        r.PartitionChangeRecord(a.topic_id, 0, 0, isr=(p0.leader,)),
        r.PartitionChangeRecord(a.topic_id, 1, 0, replicas=tuple(x for x in p1.replicas if x != away), isr=tuple(x for x in p1.isr if x != away)),
        r.RemoveTopicRecord(b.topic_id),
        r.ConfigRecord("a", "min.insync.replicas", "2"),
    ])
    image = delta.apply()
    changes = delta.local_changes(away, image)
    assert changes.stopped == (("a", 1),)
    assert set(changes.replicas) == ({"a"} if away in p0.replicas else set())
    assert [t.name for t in changes.deleted_topics] == ["b"] and changes.configs == ("a",) and not changes.brokers_changed
    stayer = p1.leader
    kept = delta.local_changes(stayer, image)
    assert not kept.stopped and set(kept.replicas["a"]) == {n for n in (0, 1) if stayer in image.topics["a"].partitions[n].replicas}


def test_a_snapshot_delta_counts_everything_as_changed() -> None:
    a = BASE.topics["a"]
    later = apply_all(BASE, [r.RemoveTopicRecord(a.topic_id), r.PartitionRecord("a2", 0, (1,), (1,), 1, 0, 0), r.TopicRecord("a", "a2")])
    delta = MetadataDelta.from_snapshot(BASE, later)
    assert delta.apply() is later
    assert set(delta.deleted_topics) == {a.topic_id}
    assert set(delta.changed_partitions) == set(later.topics_by_id)
    with pytest.raises(AssertionError):
        delta.replay(r.RemoveTopicRecord("a2"))


def test_a_rejected_record_leaves_the_base_image_alone() -> None:
    delta = MetadataDelta(BASE)
    with pytest.raises(RecordRejected):
        delta.replay_all([r.ConfigRecord("a", "retention.ms", "5"), r.TopicRecord("a", "dup")])
    assert "a" not in BASE.configs and "a" in BASE.topics
