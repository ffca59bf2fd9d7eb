"""Consumer threads: read every partition from the start and record each poll, with the
high watermark and log start offset of the answers that carried its records.

A consumer records a seek whenever it moves its own position (at the start, and after
OFFSET_OUT_OF_RANGE, when it starts over from the log start), so the checker knows where a
run of reads may legitimately restart.
"""

from __future__ import annotations

from chaos.history import History, PollOp, Read, SeekOp
from chaos.workload.settings import WorkloadSettings
from chaos.workload.worker import Worker
from data_plane.client import Consumer, KraftlogError
from server_common.errors import ErrorCode


class ConsumerWorker(Worker):
    """Polls all partitions of the topic until stopped."""

    def __init__(self, name: str, bootstrap: str, settings: WorkloadSettings, history: History) -> None:
        super().__init__(name, bootstrap, settings, history)
        self.partitions = [(settings.topic, p) for p in range(settings.partitions)]

    def run(self) -> None:
        s = self.settings
        with Consumer(self.bootstrap, fetch_max_wait_ms=s.poll_timeout_ms, request_timeout_ms=s.request_timeout_ms, client_id=self.name,
                      isolation_level=s.isolation_level, fetch_mode=s.fetch_mode) as consumer:
            consumer.assign(self.partitions)
            while not self.stopping.is_set() and not self._start_over(consumer):
                self.stopping.wait(0.2)  # leaders unknown during a fault: try again
            while not self.stopping.is_set():
                self._poll(consumer)

    def _start_over(self, consumer: Consumer) -> bool:
        """Seeks every partition to its log start; False when the cluster could not say where."""
        try:
            consumer.seek_to_beginning()
            positions = {tp: consumer.position(tp) for tp in self.partitions}
        except KraftlogError:
            return False
        now = self.history.now()
        for (_, partition), offset in positions.items():
            self.history.add(SeekOp(self.name, partition, offset, now))
        return True

    def _poll(self, consumer: Consumer) -> None:
        invoked = self.history.now()
        try:
            batches = consumer.poll_batches(self.settings.poll_timeout_ms)
        except KraftlogError as error:
            self.history.add(PollOp(self.name, invoked, self.history.now(), "failed", error=error.code))
            if error.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                self._start_over(consumer)
            elif not error.retriable:
                self.stopping.wait(0.2)  # a broken broker answer: do not spin on it
            return
        reads: dict[int, list[Read]] = {}
        for (_, partition), decoded in batches.items():
            reads[partition] = [(o, v.decode()) for b in decoded for o, v in zip(b.offsets, b.values)]
        watermarks = {p: consumer.high_watermark((self.settings.topic, p)) for p in reads}
        starts = {p: consumer.log_start_offset((self.settings.topic, p)) for p in reads}
        log_starts = {p: offset for p, offset in starts.items() if offset is not None}
        self.history.add(PollOp(self.name, invoked, self.history.now(), "ok", reads, watermarks, log_starts))

