"""Group commit for ``--durability fsync``: the broker's logs are fsynced in rounds, off the
event loop, one fsync per file per round however many appends and partitions the round
covers.

Leaders ask for a round after each append (``request``, not awaited: the HW moves when the
round is done, through ``on_synced``); followers ask after applying a fetch answer and await
it, so that their next fetch reports the new durable offset (``replica_fetcher.py``). While a
round runs in its thread, new requests gather for the next one: the busier the broker, the
more each fsync covers (the "group" of group commit).

A round plans on the loop (``PartitionLog.sync_plan`` names the segment files), fsyncs in a
worker thread (each file through a descriptor of its own, held for that fsync only: a round
of thousands of files stays within the descriptors the handle budget leaves free), and
marks the logs durable on the loop again (``PartitionLog.note_synced``). A failed fsync takes
that partition offline, as any storage error does.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from data_plane.broker.partition import Partition
from data_plane.storage import StorageError
from server_common.fsync import fsync_dir
from data_plane.storage.partition_log import SyncPlan

log = structlog.get_logger("broker.group_commit")


def sync_files(plans: list[SyncPlan], skip_fsync: bool) -> dict[int, OSError]:
    """Run in a worker thread: fsync each plan's files and directory; the error of each plan
    (by index) that failed. ``skip_fsync`` is the negative control: nothing is fsynced, every
    plan reports success."""
    failed: dict[int, OSError] = {}
    for i, plan in enumerate(plans):
        try:
            if not skip_fsync:
                for path in plan.paths:
                    _fdatasync_path(path)
                if plan.directory is not None:
                    fsync_dir(plan.directory)
        except OSError as exc:
            failed[i] = exc
    return failed


def _fdatasync_path(path: Path) -> None:
    """fdatasync the file at ``path``: an fsync makes the file (its inode) durable whichever
    descriptor names it. A segment deleted since the plan (retention: below the log start;
    a truncation voids the plan anyway) has nothing left to make durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


class GroupCommit:
    """The broker's fsync rounds; ``run`` is its task."""

    def __init__(self, on_synced: Callable[[Partition], None], on_failed: Callable[[Partition, StorageError], None],
                 skip_fsync: bool, broker_id: int) -> None:
        self._on_synced = on_synced
        self._on_failed = on_failed
        self._skip_fsync = skip_fsync
        self._pending: dict[int, Partition] = {}  # by id(): a recreated topic's new replica is another partition
        self._waiters: list[asyncio.Future] = []
        self._wake = asyncio.Event()
        self._log = log.bind(broker_id=broker_id)
        self.rounds = 0

    def request(self, partitions: Iterable[Partition]) -> asyncio.Future:
        """Make ``partitions``' logs durable to their current ends in the next round; the
        future is done when that round is."""
        for partition in partitions:
            self._pending[id(partition)] = partition
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake.set()
        return waiter

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            pending, self._pending = list(self._pending.values()), {}
            waiters, self._waiters = self._waiters, []
            try:
                await self._round(pending)
            except Exception:  # the rounds must go on (followers await them): log, and the next round retries
                self._log.exception("group commit round failed", partitions=len(pending))
            finally:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)

    async def _round(self, partitions: list[Partition]) -> None:
        online = [p for p in partitions if p.offline_reason is None]
        planned = [(p, plan) for p in online if (plan := p.log.sync_plan()) is not None]
        planned_ids = {id(p) for p, _ in planned}
        for partition in online:
            if id(partition) not in planned_ids:
                self._on_synced(partition)  # durable already (a flush by flush.messages or the flush timer)
        if not planned:
            return
        failed = await asyncio.to_thread(sync_files, [plan for _, plan in planned], self._skip_fsync)
        self.rounds += 1
        for i, (partition, plan) in enumerate(planned):
            if partition.log is not plan.log or partition.offline_reason is not None:
                continue  # the replica was replaced or went offline meanwhile
            if i in failed:
                self._on_failed(partition, StorageError.from_os_error(failed[i], "fsync (group commit)", plan.log.directory))
                continue
            plan.log.note_synced(plan)
            self._on_synced(partition)
