"""The controller's snapshot records, encoded, re-encoding only the topics that changed.

A log compaction (pysyncobj's full dump) runs ``MetadataStateMachine._serialize`` on the Raft
thread: encoding every record of 100,000 partitions takes about a second there, longer than
the election timeout, so the active controller's followers would start an election at every
compaction (docs/operations.md, Controller sizing). Images are persistent: a topic whose
partitions and configs did not change is the same object in the next image, so its encoded
records are kept and reused, and a compaction encodes only what moved since the last one.
A controller that loaded a snapshot keeps the loaded bytes of each topic the same way
(``seed``), so its first compaction after a restart or a join does not encode every topic
again on the Raft thread either.
"""

from __future__ import annotations

from typing import Sequence

from metadata_quorum.image import MetadataImage, broker_records, rest_records, topic_records
from metadata_quorum.records import Record, TopicRecord, encode


class SnapshotEncoder:
    def __init__(self) -> None:
        self._topics: dict[str, tuple[object, object, list[bytes]]] = {}  # name -> (topic, configs, encoded)

    def records(self, image: MetadataImage) -> list[bytes]:
        """``image_to_records(image)`` encoded, in its order."""
        out = [encode(r) for r in broker_records(image)]
        kept: dict[str, tuple[object, object, list[bytes]]] = {}
        for name in sorted(image.topics):
            topic, configs = image.topics[name], image.configs.get(name)
            cached = self._topics.get(name)
            if cached is None or cached[0] is not topic or cached[1] is not configs:
                cached = (topic, configs, [encode(r) for r in topic_records(image, name)])
            kept[name] = cached
            out.extend(cached[2])
        self._topics = kept  # deleted topics go
        out.extend(encode(r) for r in rest_records(image))
        return out

    def seed(self, image: MetadataImage, encoded: Sequence[bytes], decoded: Sequence[Record]) -> None:
        """Keep each topic's part of the snapshot ``image`` was just loaded from: ``encoded``
        (its records, as stored) and ``decoded`` (the same, decoded) in ``image_to_records``
        order. A part that is not where that order puts it (a snapshot written otherwise) is
        left out, and encoded again at the next compaction."""
        position = len(image.brokers)
        for name in sorted(image.topics):
            topic, configs = image.topics[name], image.configs.get(name)
            count = 1 + len(topic.partitions) + len(configs or ())
            head = decoded[position] if position < len(decoded) else None
            if not isinstance(head, TopicRecord) or head.name != name or position + count > len(encoded):
                return
            self._topics[name] = (topic, configs, list(encoded[position:position + count]))
            position += count
