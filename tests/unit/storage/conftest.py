"""Helpers for storage tests: small settings and quick batch builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_plane.record_batch import decode_batches, encode_batch
from data_plane.storage import LogSettings, PartitionLog


def small_settings(**overrides: object) -> LogSettings:
    """Tiny segments and indexes so a handful of batches exercise rolls and index entries."""
    base = {"segment.bytes": "1024", "index.interval.bytes": "256"}
    base.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return LogSettings.from_overrides(base)


def batch(count: int = 3, ts: int = 1_000, tag: str = "v") -> bytes:
    return encode_batch([f"{tag}{i}".encode() * 4 for i in range(count)], timestamps_ms=ts)


def offsets(data: bytes) -> list[int]:
    return [o for b in decode_batches(data) for o in b.offsets]


def fill(plog: PartitionLog, batches: int, *, epoch: int = 0, ts: int = 1_000, now_ms: int = 0) -> None:
    for i in range(batches):
        plog.append(batch(3, ts + i, tag=f"b{i}-"), assign_offsets=True, leader_epoch=epoch, now_ms=now_ms)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"
