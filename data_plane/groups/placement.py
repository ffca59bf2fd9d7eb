"""Where a group lives: its partition of the internal offsets topic. The hash is CRC-32
(IEEE, as zlib and every language's standard library compute it) of the group id's UTF-8
bytes, so a client in any language can compute it; Python's ``hash`` is randomized per
process and would not do."""

from __future__ import annotations

import zlib

OFFSETS_TOPIC = "__consumer_offsets"


def offsets_partition(group_id: str, partitions: int) -> int:
    assert partitions > 0, partitions
    return zlib.crc32(group_id.encode("utf-8")) % partitions
