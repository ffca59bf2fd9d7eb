"""Where a group (or a transactional id) lives: its partition of the internal offsets (or
transaction-state) topic. The hash is CRC-32 (IEEE, as zlib and every language's standard
library compute it) of the key's UTF-8 bytes, so a client in any language can compute it;
Python's ``hash`` is randomized per process and would not do."""

from __future__ import annotations

import zlib

from server_common.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

__all__ = ["OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC", "offsets_partition"]


def offsets_partition(key: str, partitions: int) -> int:
    """The partition of a coordinator key (group id or transactional id) among ``partitions``."""
    assert partitions > 0, partitions
    return zlib.crc32(key.encode("utf-8")) % partitions
