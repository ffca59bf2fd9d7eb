"""The wall clock nodes read: true time without an offset file, shifted by the file's
offset once polled, back when it is removed; a bad file keeps the previous offset."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server_common.clock import OFFSET_FILE_ENV, POLL_INTERVAL_S, OffsetClock, parse_offset_ms, write_offset


class FakeTime:
    def __init__(self) -> None:
        self.wall = 1_000_000.0
        self.mono = 50.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def _clock(path: Path | None, fake: FakeTime) -> OffsetClock:
    return OffsetClock(path, wall=lambda: fake.wall, monotonic=lambda: fake.mono)


def test_no_file_is_true_time(tmp_path: Path) -> None:
    fake = FakeTime()
    assert _clock(None, fake).now_ms() == 1_000_000_000
    assert _clock(tmp_path / "absent", fake).now_ms() == 1_000_000_000


def test_offset_applies_after_the_poll_interval_and_goes_back(tmp_path: Path) -> None:
    fake, path = FakeTime(), tmp_path / "offset"
    clock = _clock(path, fake)
    assert clock.now_ms() == 1_000_000_000
    write_offset(path, -60_000)
    assert clock.now_ms() == 1_000_000_000, "read before the next poll"
    fake.advance(POLL_INTERVAL_S)
    assert clock.now_ms() == 1_000_000_000 + int(POLL_INTERVAL_S * 1000) - 60_000
    path.unlink()
    fake.advance(POLL_INTERVAL_S)
    assert clock.offset_ms() == 0


def test_bad_file_keeps_the_previous_offset(tmp_path: Path) -> None:
    fake, path = FakeTime(), tmp_path / "offset"
    clock = _clock(path, fake)
    write_offset(path, 5_000)
    assert clock.offset_ms() == 5_000
    path.write_text("soon")
    fake.advance(POLL_INTERVAL_S)
    assert clock.offset_ms() == 5_000


def test_parse_offset() -> None:
    assert parse_offset_ms(" -30000\n") == -30_000
    assert parse_offset_ms("") == 0
    with pytest.raises(ValueError, match="integer number of milliseconds"):
        parse_offset_ms("1h")


def test_a_broker_process_reads_its_offset_file(tmp_path: Path) -> None:
    """The broker's clock (what it stamps and ages records by) follows the file named in
    its environment: a fresh process, as the harness starts a node."""
    path = tmp_path / "clock-offset-ms"
    write_offset(path, 3_600_000)
    probe = "import time; from data_plane.broker.replica_manager import now_ms; print(now_ms() - int(time.time() * 1000))"
    env = {**os.environ, OFFSET_FILE_ENV: str(path)}
    shift_ms = int(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout)
    assert 3_590_000 < shift_ms < 3_610_000
