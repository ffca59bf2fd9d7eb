"""Work on every log of the broker that no request asks for: retention, log compaction, flushes, the CRC
scrub, forgetting idle producer ids, and carrying out damage repair (which ranges wait for a copy, from whom, writing the
copy in, declaring a range lost). Timers in ``server.py`` and the `DamageRepairer` call it;
a log that fails here goes offline through the replica manager like anywhere else.
"""

from __future__ import annotations

import asyncio
import bisect

import structlog

from data_plane.broker.partition import Partition
from data_plane.broker.replica_access import MaintainedReplicas
from data_plane.storage import CorruptBatchError, DamagedRange, StorageError
from data_plane.storage.log_cleaner import CleaningPass, Throttle, discard
from data_plane.storage.partition_log import PartitionLog

log = structlog.get_logger("broker.maintenance")

class LogMaintenance:
    def __init__(self, replicas: MaintainedReplicas) -> None:
        self._replicas = replicas
        self.config = replicas.config
        self._scrub_from: tuple[str, int] | None = None  # the log the scrub works on; None: the first
        # The logs the scrub goes round: written or opened since the scrub last found one with
        # nothing to verify (an empty log leaves until its next write).
        self._scrubbed: dict[tuple[str, int], Partition] = {}
        self._lap_pending: set[tuple[str, int]] | None = None  # logs of this lap not yet verified to their end
        self._scrub_order: list[tuple[str, int]] | None = None  # the round's logs, sorted
        # Logs written since their last flush (by the replica manager's write paths): the only
        # ones the flush check visits, so an idle broker's flush timer costs nothing per log.
        self._unflushed: dict[tuple[str, int], Partition] = {}
        # The damage scan's: logs found damaged by the last scan, logs opened since, and how
        # many damaged ranges the process had noted then (a new one anywhere: scan them all).
        self._damaged: dict[tuple[str, int], Partition] = {}
        self._opened: dict[tuple[str, int], Partition] = {}
        self._damage_noted_seen = -1
        self._log = log.bind(broker_id=replicas.config.broker_id)

    def _online(self) -> list[Partition]:
        return [p for p in self._replicas.partitions.values() if p.offline_reason is None]

    def run_retention(self) -> None:
        now = self._replicas.clock_ms()
        for partition in self._online():
            try:
                deleted = partition.apply_retention(now)
            except StorageError as exc:
                self._replicas.take_offline(partition, exc)
                continue
            if deleted:
                self._log.info("retention deleted segments", **partition.fields(), segments=deleted,
                               log_start_offset=partition.log_start_offset)

    def run_producer_id_expiry(self) -> None:
        """Each replica forgets the producers idle for ``producer_id_expiration_ms`` (each
        replica by its own clock, as in Kafka: a follower that still remembers a producer its
        leader forgot takes the leader's batch as the log's truth, ProducerState.on_appended)."""
        now = self._replicas.clock_ms()
        for partition in self._online():
            partition.expire_producer_ids(now, self.config.producer_id_expiration_ms)

    async def run_cleaner(self) -> None:
        """The broker's log cleaner: every ``cleaner_interval_ms``, one pass over each compacted
        partition that is due (see ``PartitionLog.cleaning_candidates``). Logs that are not
        compacted are passed over before their last stable offset is asked for: each pass used
        to ask it of every replica, 50,000 of them on a large broker, to clean none."""
        while True:
            await asyncio.sleep(self.config.cleaner_interval_ms / 1000)  # a timer, not a wait for a condition
            for partition in self._online():
                if not partition.log.settings.compacted:
                    continue
                try:
                    await self.clean(partition)
                except Exception:  # one log's failure must not stop the cleaner for the others
                    self._log.exception("log cleaning pass failed; retried next interval", **partition.fields())

    async def clean(self, partition: Partition) -> None:
        """One cleaning pass: the files are read and written in a worker thread (appends and
        fetches go on meanwhile), the cleaned segments are swapped in on the loop."""
        now = self._replicas.clock_ms()
        plog = partition.log
        stable = partition.last_stable_offset  # below the HW and every open transaction
        due = plog.cleaning_candidates(stable, now)
        if due is None:
            return
        segments, plan = due
        cleaning = CleaningPass(
            plog.directory, segments, plan, map_entries=self.config.cleaner_map_entries,
            tombstone_horizon_ms=now - plog.settings.delete_retention_ms,
            aborted=partition.aborted_transactions(plog.log_start_offset, stable),
            throttle=Throttle(self.config.cleaner_io_bytes_per_second),
        )
        result = await asyncio.to_thread(cleaning.run)
        if partition.log is not plog or plog.is_offline:
            discard(result.cleaned)
            return
        try:
            installed = plog.install_cleaned(result)
        except StorageError as exc:
            self._replicas.take_offline(partition, exc)
            return
        self.note_written(partition)
        self._log.info("log cleaned", **partition.fields(), dirty_ratio=round(plan.dirty_ratio, 3),
                       segments=installed, cleaned_up_to=result.cleaned_up_to, bytes_read=result.bytes_read,
                       records_kept=result.records_kept, records_removed=result.records_removed)

    def note_opened(self, partition: Partition) -> None:
        """``partition``'s log was opened (it may hold recovered, unflushed records and damage
        recorded before a restart) or its leadership changed (a follower may truncate)."""
        self.note_written(partition)
        self._opened[(partition.topic, partition.partition)] = partition
        self._join_scrub(partition)

    def note_written(self, partition: Partition) -> None:
        """``partition``'s log was written (records, a rolled segment, a truncation): the flush
        check looks at it until everything up to its log end is flushed, the scrub goes round it."""
        self._unflushed[(partition.topic, partition.partition)] = partition
        self._join_scrub(partition)

    def _join_scrub(self, partition: Partition) -> None:
        tp = (partition.topic, partition.partition)
        if self._scrubbed.get(tp) is not partition:
            self._scrub_order = None  # a log joined the round (or a new replica took a name)
        self._scrubbed[tp] = partition

    def run_flush(self) -> None:
        """Flush by ``flush.ms``, and the segments rolled since the last flush, of the logs
        written since their last flush; a log flushed to its end leaves the set until its
        next write."""
        now = self._replicas.clock_ms()
        for tp, partition in list(self._unflushed.items()):
            if self._replicas.partitions.get(tp) is partition and partition.offline_reason is None:
                try:
                    partition.maybe_flush(now)
                except StorageError as exc:
                    self._replicas.take_offline(partition, exc)
                if partition.offline_reason is None and partition.log.recovery_point < partition.log.log_end_offset:
                    continue  # still unflushed records: flush.ms has not run out yet
            if self._unflushed.get(tp) is partition:
                del self._unflushed[tp]

    def run_scrub(self, budget_bytes: int) -> bool:
        """Verify the CRCs of up to ``budget_bytes`` more stored bytes: one partition's log
        to its end, then the next one's (round robin), so an idle broker's cost stays flat
        however many partitions it holds. A log with nothing to verify (empty, or offline, or
        no longer this broker's) leaves the round until its next write, so empty logs cost
        nothing. True when this call finished a lap (every log verified to its end): the
        caller rests before the next one."""
        assert budget_bytes > 0, budget_bytes
        partitions = self._replicas.partitions
        if self._scrub_order is None:
            self._scrub_order = sorted(self._scrubbed)  # sorted again only after logs joined or left the round
        if self._lap_pending is None:
            self._lap_pending = set(self._scrubbed)  # a new lap: the logs in the round now
        tps = self._scrub_order  # not copied or rotated: a slice's cost is the logs it visits, not the round's size
        start = bisect.bisect_left(tps, self._scrub_from) if self._scrub_from is not None else 0
        self._scrub_from = None  # unless the budget runs out in a log: the next call starts a new lap
        for i in range(len(tps)):
            tp = tps[(start + i) % len(tps)]
            partition = self._scrubbed[tp]
            live = partitions.get(tp) is partition and partition.offline_reason is None
            if live:
                laps = partition.log.scrub_laps
                try:
                    budget_bytes -= partition.scrub(budget_bytes)
                except StorageError as exc:
                    self._replicas.take_offline(partition, exc)
                if partition.log.scrub_laps != laps:
                    self._lap_pending.discard(tp)  # verified to its end in this lap
            if budget_bytes <= 0:
                self._scrub_from = tp  # the next call goes on in this log
                break
            if partition.offline_reason is not None or not live or partition.log_start_offset == partition.log_end_offset:
                del self._scrubbed[tp]  # nothing to verify
                self._lap_pending.discard(tp)
                self._scrub_order = None
        if self._lap_pending:
            return False
        self._lap_pending = None
        return True

    def damaged(self) -> list[tuple[Partition, DamagedRange]]:
        """Every damaged range still waiting for a copy, on online replicas. Looks at every
        log only after a damaged range was noted anywhere since the last call (reads and the
        scrub find damage), otherwise only at the logs damaged then and those opened since:
        on an undamaged, idle broker it visits no log."""
        noted = PartitionLog.damage_noted
        if noted != self._damage_noted_seen:
            self._damage_noted_seen = noted
            suspects = self._replicas.partitions
        else:
            suspects = {**self._damaged, **self._opened}
        self._opened = {}
        partitions = self._replicas.partitions
        found = [(p, damage) for tp, p in suspects.items() if partitions.get(tp) is p and p.offline_reason is None
                 for damage in p.damaged_ranges() if not damage.lost]
        self._damaged = {(p.topic, p.partition): p for p, _ in found}
        return found

    def repair_sources(self, partition: Partition) -> list[int]:
        """The other replicas to ask for a copy: the leader first (a follower's source of
        truth), then in-sync replicas, then the rest."""
        others = [r for r in partition.state.replicas if r != self.config.broker_id]
        in_sync = partition.in_sync()
        return sorted(others, key=lambda r: (r != partition.state.leader, r not in in_sync))

    def repair(self, partition: Partition, damage: DamagedRange, copy: bytes, source: int) -> bool:
        """Write ``source``'s copy over ``damage``; False (logged) when the copy does not fit."""
        try:
            partition.repair(damage, copy)
            self.note_written(partition)
        except CorruptBatchError as exc:
            self._log.warning("replica's copy refused for a damaged range", **partition.fields(), source=source,
                              first_offset=damage.first_offset, next_offset=damage.next_offset, reason=str(exc))
            return False
        except StorageError as exc:
            self._replicas.take_offline(partition, exc)
            return False
        self._log.warning("damaged range repaired", **partition.fields(), source=source,
                          first_offset=damage.first_offset, next_offset=damage.next_offset)
        return True

    def declare_lost(self, partition: Partition, damage: DamagedRange, why: str) -> None:
        """No replica can give the range back: its records are gone; readers skip them and
        the offsets are never given to new records."""
        partition.mark_lost(damage)
        self._log.error(
            f"RECORDS LOST: damaged range cannot be repaired ({why}); readers skip it",
            **partition.fields(), first_offset=damage.first_offset, next_offset=damage.next_offset,
            records=damage.next_offset - damage.first_offset,
        )
