"""The cluster id a controller assumes without ``--cluster-id``: derived from the voters it was
started with. A quorum whose membership changes needs the id given explicitly from then on
(``--cluster-id``; the local cluster records it in cluster.json), or a controller started with
the new voters would assume another id."""

from __future__ import annotations

import uuid
from typing import Iterable


def derived_cluster_id(voters: Iterable[tuple[int, str]]) -> str:
    """``voters``: (controller id, Raft address "host:port") of the initial voters."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kraftlog:" + ",".join(f"{node_id}@{raft}" for node_id, raft in sorted(voters))))
