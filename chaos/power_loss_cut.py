"""The ``power-loss`` fault's cut of one killed node's data directory, and what it took.

``server_common/power_loss.py`` decides which bytes a power failure takes (from the ledger the
node kept in its power-loss test mode); this module carries the cut out and names the records
it took: for each partition log of the workload's topic, the offsets written but not fsynced
(``UnflushedRange``), read from the batch headers about to be cut. The checker quotes them when
it explains an acknowledged write the final read lacks (``chaos/checker/power_loss_notes.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from data_plane.storage.log_manager import parse_partition_dir
from data_plane.storage.segment import scan_headers
from server_common import power_loss

# [node, partition, first offset cut, offset after the last one cut]: JSON-ready rows of a FaultOp
UnflushedRange = list


def cut_node(node_dir: Path, node: str, topic: str) -> tuple[list[UnflushedRange], int]:
    """Cut ``node_dir`` back to what its last fsyncs made durable; the ranges of ``topic``'s
    records that went, and how many files were cut."""
    cuts = power_loss.plan(node_dir)
    ranges: dict[int, list[int]] = {}
    for c in cuts:
        path = Path(c.path)
        tp = parse_partition_dir(path.parent.name)
        if tp is None or tp[0] != topic or path.suffix != ".log" or c.action == "restore":
            continue
        span = _offsets_in(path, c.size if c.action == "truncate" else 0)
        if span is not None:
            first, end = ranges.setdefault(tp[1], [span[0], span[1]])
            ranges[tp[1]] = [min(first, span[0]), max(end, span[1])]
    power_loss.apply(node_dir, cuts)
    return [[node, partition, first, end] for partition, (first, end) in sorted(ranges.items())], len(cuts)


def _offsets_in(segment: Path, from_position: int) -> tuple[int, int] | None:
    """(first offset, offset after the last) of the whole batches of ``segment`` from byte
    ``from_position``; None when none starts there (a torn header at most)."""
    fd = os.open(segment, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        headers = []
        try:
            for _, header in scan_headers(fd, from_position, end):
                headers.append(header)
        except Exception:  # a torn tail: the batches before it are what we can name
            pass
    finally:
        os.close(fd)
    if not headers:
        return None
    return headers[0].base_offset, headers[-1].next_offset
