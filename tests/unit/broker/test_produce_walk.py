"""How far a produce walks: `ReplicaManager.produce` asks each item's partition once (the
leadership check, the append and the acks=all wait are one `Partition.produce`), and no call
below it stands more than nine project frames deep, so that from `BrokerService.Produce`
(`Produce` > `_produce` > `serve_authorized` > here) the deepest call is the twelfth stop.
Measured with the interpreter's profile hook over a real log on disk."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from data_plane.broker.config import BrokerConfig
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.requests import ProduceItem
from data_plane.storage import LogManager
from tests.unit.broker.test_stale_metadata import apply, at_epoch
from tests.unit.storage.conftest import batch

PROJECT = str(Path(__file__).resolve().parents[3])
DEPTH_BELOW_MANAGER = 9  # Produce > _produce > serve_authorized > ReplicaManager.produce is 4 of the 12


def _walk(coroutine) -> tuple[int, list[str]]:
    """The deepest chain of project frames under ReplicaManager.produce, and the Partition
    methods it called directly."""
    deepest, asked = 0, []

    def on_call(frame, event, _arg) -> None:
        nonlocal deepest
        if event != "call":
            return
        chain, f = 0, frame
        while f is not None and f.f_code.co_qualname != "ReplicaManager.produce":
            chain += f.f_code.co_filename.startswith(PROJECT) and "/.venv/" not in f.f_code.co_filename
            f = f.f_back
        if f is None:
            return
        deepest = max(deepest, chain)
        if frame.f_back is f and frame.f_code.co_qualname.startswith("Partition."):
            asked.append(frame.f_code.co_qualname)

    sys.setprofile(on_call)
    try:
        asyncio.run(coroutine)
    finally:
        sys.setprofile(None)
    return deepest, asked


@pytest.mark.parametrize("acks", [1, -1])
def test_a_produce_asks_each_partition_once_and_walks_at_most_twelve_stops(tmp_path: Path, acks: int) -> None:
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=tmp_path, controllers=[])
    replicas = ReplicaManager(config, LogManager(tmp_path, now_ms=0), clock_ms=lambda: 1_000)
    apply(replicas, at_epoch(1, 1))  # broker 1 leads; its follower never fetches, so acks=all times out

    deepest, asked = _walk(replicas.produce(acks, 0, [ProduceItem("t", 0, batch(3))]))
    assert asked == ["Partition.produce"], asked
    assert 0 < deepest <= DEPTH_BELOW_MANAGER, deepest
