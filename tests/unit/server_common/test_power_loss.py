"""The power-loss test mode: the cut plan from a ledger (pure), and the whole round trip with
a real process killed by SIGKILL and its directory cut back to its fsyncs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from server_common import power_loss
from server_common.sync_ledger import Cut, FileOnDisk, plan_cut, read_ledger

DIR = 100


def test_append_only_file_is_cut_to_its_last_fsync() -> None:
    state = read_ledger(["S\t7\t100", "S\t7\t250"])
    assert plan_cut(state, [FileOnDisk("/d/a", DIR, "a", 7, 400)]) == [Cut("/d/a", "truncate", size=250, lost_bytes=150)]


def test_truncation_after_fsync_shrinks_what_is_durable() -> None:
    state = read_ledger(["S\t7\t250", "T\t7\t100"])  # truncated to 100, then written to 300, no fsync
    assert plan_cut(state, [FileOnDisk("/d/a", DIR, "a", 7, 300)]) == [Cut("/d/a", "truncate", size=100, lost_bytes=200)]


def test_file_never_fsynced_nor_named_durably_is_deleted() -> None:
    state = read_ledger([f"D\t{DIR}\told\t5"])
    assert plan_cut(state, [FileOnDisk("/d/new", DIR, "new", 8, 40)]) == [Cut("/d/new", "delete", lost_bytes=40)]


def test_durably_named_file_without_data_fsync_is_emptied() -> None:
    state = read_ledger([f"D\t{DIR}\tseg\t8"])
    assert plan_cut(state, [FileOnDisk("/d/seg", DIR, "seg", 8, 40)]) == [Cut("/d/seg", "truncate", size=0, lost_bytes=40)]


def test_unlinked_inode_reused_by_a_new_file_is_not_durable() -> None:
    state = read_ledger(["S\t9\t500", "U\t9"])
    assert plan_cut(state, [FileOnDisk("/d/x", DIR, "x", 9, 500)]) == [Cut("/d/x", "delete", lost_bytes=500)]


def test_file_rewritten_in_place_is_restored_from_its_copy_and_torn_lines_are_ignored() -> None:
    state = read_ledger([f"D\t{DIR}\tj\t3", "C\t3", "S\t4\t1"[:4]])
    assert plan_cut(state, [FileOnDisk("/d/j", DIR, "j", 3, 64)]) == [Cut("/d/j", "restore", ino=3)]


def test_fully_durable_file_is_left_alone() -> None:
    state = read_ledger(["S\t7\t100"])
    assert plan_cut(state, [FileOnDisk("/d/a", DIR, "a", 7, 100)]) == []


CHILD = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from server_common import power_loss
    d = Path(sys.argv[1])
    power_loss.install(d)
    def write(name, data, sync):
        fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, data)
        if sync:
            os.fsync(fd)
        os.close(fd)
    write("synced.log", b"a" * 100, sync=True)
    write("synced.log", b"b" * 50, sync=False)         # lost
    write("never.log", b"c" * 10, sync=False)          # lost with its name
    dfd = os.open(d, os.O_RDONLY)
    os.fsync(dfd)                                      # names durable now: synced.log, never.log
    os.close(dfd)
    write("late.log", b"d" * 10, sync=False)           # created after the directory fsync: gone
    (d / "journal").write_bytes(b"0" * 32)
    os.fsync(os.open(d / "journal", os.O_RDONLY))
    power_loss.track_in_place(d / "journal")
    with open(d / "journal", "r+b") as f:
        f.write(b"1" * 8); f.flush(); os.fsync(f.fileno())
        f.seek(0); f.write(b"2" * 8); f.flush()        # rewritten in place, never fsynced: lost
    print("ready", flush=True)
    sys.stdin.read()
""")


def test_killed_process_directory_is_cut_back_to_its_fsyncs(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert child.stdout.readline() == b"ready\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    cuts = power_loss.plan(tmp_path)
    power_loss.apply(tmp_path, cuts)
    assert (tmp_path / "synced.log").read_bytes() == b"a" * 100
    assert (tmp_path / "never.log").read_bytes() == b""  # its name was made durable, its data never
    assert not (tmp_path / "late.log").exists()
    assert (tmp_path / "journal").read_bytes() == b"1" * 8 + b"0" * 24
    assert power_loss.plan(tmp_path) == []  # after the cut everything left is durable
