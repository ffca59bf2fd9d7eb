"""The controller's snapshot records, encoded, re-encoding only the topics that changed.

A log compaction (pysyncobj's full dump) runs ``MetadataStateMachine._serialize`` on the Raft
thread: encoding every record of 100,000 partitions takes about a second there, longer than
the election timeout, so the active controller's followers would start an election at every
compaction (docs/operations.md, Controller sizing). Images are persistent: a topic whose
partitions and configs did not change is the same object in the next image, so its encoded
records are kept and reused, and a compaction encodes only what moved since the last one.
"""

from __future__ import annotations

from metadata_quorum.image import MetadataImage, broker_records, rest_records, topic_records
from metadata_quorum.records import encode


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
