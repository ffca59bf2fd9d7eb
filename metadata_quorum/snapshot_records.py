"""The controller's snapshot records, encoded, re-encoding only the partitions that changed.

A log compaction (pysyncobj's full dump) encodes the image as snapshot records, in the dump's
writer thread (``raft_dump.py``; it ran on the Raft thread before, where encoding every record
of 100,000 partitions took about a second, longer than the election timeout: docs/operations.md,
Controller sizing). Encoding costs CPU, and the writer shares the interpreter lock with the
Raft thread, so it is kept small too. Images are persistent: a topic whose
partitions and configs did not change is the same object in the next image, and so is a
partition that did not change, so their encoded records are kept and reused, and a
compaction encodes only what moved since the last one.

Two things keep even the first compaction short: a controller that loaded a snapshot keeps
the loaded bytes of each topic (``seed``), and ``warm``, run off the Raft thread (the
controller calls it from a worker thread while the metadata changes), encodes ahead what
changed, so the compaction finds it done.
"""

from __future__ import annotations

import threading
from typing import Sequence

from metadata_quorum.image import (MetadataImage, PartitionImage, TopicImage, broker_records, config_records, partition_record,
                                   rest_records, sorted_partitions)
from metadata_quorum.records import Record, TopicRecord, encode

# A topic's part: the topic and its configs as encoded (compared by identity) and the bytes.
TopicPart = tuple[TopicImage, object, list[bytes]]


class SnapshotEncoder:
    """Thread-safe: ``records`` runs in the dump's writer thread, ``warm`` in another worker thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, TopicPart] = {}
        self._partitions: dict[tuple[str, int], tuple[PartitionImage, bytes]] = {}  # (topic id, partition) -> encoded

    def records(self, image: MetadataImage) -> list[bytes]:
        """``image_to_records(image)`` encoded, in its order."""
        out = [encode(r) for r in broker_records(image)]
        with self._lock:
            kept = {name: self._part(image, name) for name in sorted(image.topics)}
            for name, (topic, _, _) in self._topics.items():
                if name not in kept or kept[name][0].topic_id != topic.topic_id:  # deleted: its partitions go too
                    for number in topic.partitions:
                        self._partitions.pop((topic.topic_id, number), None)
            self._topics = kept
        for _, _, encoded in kept.values():
            out.extend(encoded)
        out.extend(encode(r) for r in rest_records(image))
        return out

    def warm(self, image: MetadataImage) -> int:
        """Encode ahead the topics of ``image`` that changed since they were last encoded, one
        topic at a time (the lock is never held for long); how many it encoded."""
        encoded = 0
        for name in sorted(image.topics):
            with self._lock:
                cached = self._topics.get(name)
                if not _fresh(cached, image, name):
                    self._topics[name] = self._part(image, name)
                    encoded += 1
        return encoded

    def _part(self, image: MetadataImage, name: str) -> TopicPart:
        """``name``'s part of the snapshot: the kept one if its topic and configs did not
        change, else built again from the kept bytes of every partition that did not change."""
        cached = self._topics.get(name)
        if _fresh(cached, image, name):
            return cached
        topic = image.topics[name]
        encoded = [encode(TopicRecord(topic.name, topic.topic_id))]
        for p in sorted_partitions(topic):
            key = (topic.topic_id, p.partition)
            hit = self._partitions.get(key)
            if hit is None or hit[0] is not p:
                hit = self._partitions[key] = (p, encode(partition_record(topic.topic_id, p)))
            encoded.append(hit[1])
        encoded.extend(encode(r) for r in config_records(image, name))
        return topic, image.configs.get(name), encoded

    def seed(self, image: MetadataImage, encoded: Sequence[bytes], decoded: Sequence[Record]) -> None:
        """Keep each topic's part of the snapshot ``image`` was just loaded from: ``encoded``
        (its records, as stored) and ``decoded`` (the same, decoded) in ``image_to_records``
        order. A part that is not where that order puts it (a snapshot written otherwise) is
        left out, and encoded again at the next compaction."""
        position = len(image.brokers)
        with self._lock:
            for name in sorted(image.topics):
                topic, configs = image.topics[name], image.configs.get(name)
                partitions = sorted_partitions(topic)
                count = 1 + len(partitions) + len(configs or ())
                head = decoded[position] if position < len(decoded) else None
                if not isinstance(head, TopicRecord) or head.name != name or position + count > len(encoded):
                    return
                part = list(encoded[position:position + count])
                self._topics[name] = (topic, configs, part)
                for p, data in zip(partitions, part[1:]):
                    self._partitions[(topic.topic_id, p.partition)] = (p, data)
                position += count


def _fresh(cached: TopicPart | None, image: MetadataImage, name: str) -> bool:
    return cached is not None and cached[0] is image.topics[name] and cached[1] is image.configs.get(name)
