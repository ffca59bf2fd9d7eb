"""Clock faults: one node's wall clock set off by an offset (a skew while it lasts, a jump
when it is set and when it is healed), through the offset file ``server_common.clock``
polls. Every node the chaos harness starts gets ``KRAFTLOG_CLOCK_OFFSET_FILE`` pointing at
``clock-offset-ms`` in its data directory; healing writes 0 (the node's clock jumps back).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from server_common.clock import OFFSET_FILE_ENV, write_offset
from server_common.local_cluster import LocalCluster, Node

OFFSET_FILE = "clock-offset-ms"


def offset_file(cluster: LocalCluster, node: Node) -> Path:
    return cluster.data_dir / node.name / OFFSET_FILE


def with_clock_env(cluster: LocalCluster, node: Node, argv: list[str]) -> list[str]:
    """``argv`` run with the node's offset file in its environment (``env`` execs the
    command, so the process id stays the command's)."""
    return ["env", f"{OFFSET_FILE_ENV}={offset_file(cluster, node)}", *argv]


def pick_offset(params: dict, pick: int) -> int:
    """The step's offset: one of ``params["offsets_ms"]``, chosen by the step's seeded pick."""
    offsets = params["offsets_ms"]
    return int(offsets[pick % len(offsets)])


def set_offset(cluster: LocalCluster, nodes: list[Node], offset_ms: int) -> Callable[[], None]:
    """Shifts the nodes' clocks by ``offset_ms``; the returned heal sets them back to 0."""
    for node in nodes:
        offset_file(cluster, node).parent.mkdir(parents=True, exist_ok=True)
        write_offset(offset_file(cluster, node), offset_ms)
    return lambda: clear_offsets(cluster, nodes)


def clear_offsets(cluster: LocalCluster, nodes: list[Node]) -> None:
    """Every given node's clock back to true time (those never shifted are left alone)."""
    for node in nodes:
        if offset_file(cluster, node).exists():
            write_offset(offset_file(cluster, node), 0)
