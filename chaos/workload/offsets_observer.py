"""The offsets observer: asks every broker, several times a second, for the log start and
high watermark of every partition, naming the newest leader epoch any broker knows.

Asking every broker, not only the one metadata names, is what makes leader fencing
checkable: a broker answers only as the leader of that epoch, so a deposed leader still
answering (``--unsafe-testing skip-epoch-fencing``) hands out its stale, lower high
watermark, and the checker's ``hw-backwards`` sees it against the new leader's. Each broker's
answers are recorded as their own process (``offsets-observer-<broker id>``).
"""

from __future__ import annotations

import grpc

from chaos.history import History, PollOp
from chaos.workload.settings import WorkloadSettings
from chaos.workload.worker import Worker
from data_plane.client.channels import broker_channels
from data_plane.client.errors import KraftlogError
from data_plane.client.metadata_cache import MetadataCache, refresh_sync
from server_common.client_security import ClientSecurity
from data_plane.client.offset_lookup import EARLIEST, LATEST
from kraftlog_proto import broker_pb2
from server_common.errors import ErrorCode


ROUND_TIMEOUT_S = 0.5  # per request of a round


class OffsetsObserver(Worker):
    """Records every broker's answer as leader, each ``observe_interval_s``."""

    def __init__(self, name: str, bootstrap: str, settings: WorkloadSettings, history: History) -> None:
        super().__init__(name, bootstrap, settings, history)
        self._metadata = MetadataCache(bootstrap, ClientSecurity.from_environment())
        # Short: a paused broker must not hold up a round for the request timeout three times.
        self._timeout_s = min(settings.request_timeout_ms / 1000, ROUND_TIMEOUT_S)
        # The newest epoch of each partition any broker has named, kept across rounds: a
        # resumed zombie's stale metadata alone in a round cannot lower it.
        self._newest_epochs: dict[int, int] = {}

    def run(self) -> None:
        pool = broker_channels(self._metadata.security)
        try:
            while not self.stopping.wait(self.settings.observe_interval_s):
                self._observe(pool)
        finally:
            pool.close()

    def _observe(self, pool) -> None:
        invoked = self.history.now()
        try:
            refresh_sync(self._metadata, pool.stub, self._timeout_s, broker_pb2.MetadataRequest(topics=[self.settings.topic]))
        except KraftlogError:  # no broker answered: nothing observed this round
            return
        brokers = dict(self._metadata.snapshot.brokers)
        for address in brokers.values():
            for partition, epoch in self._epochs(pool, address).items():
                self._newest_epochs[partition] = max(epoch, self._newest_epochs.get(partition, -1))
        epochs = dict(self._newest_epochs)
        if not epochs:
            return
        for broker_id, address in sorted(brokers.items()):
            ends = self._offsets(pool, address, epochs, LATEST)
            starts = self._offsets(pool, address, epochs, EARLIEST)
            if ends or starts:
                self.history.add(PollOp(f"{self.name}-{broker_id}", invoked, self.history.now(), "ok", high_watermarks=ends, log_starts=starts))

    def _epochs(self, pool, address: str) -> dict[int, int]:
        """The leader epoch of each partition in this broker's metadata ({} if it did not answer)."""
        try:
            response = pool.stub(address).Metadata(broker_pb2.MetadataRequest(topics=[self.settings.topic]), timeout=self._timeout_s)
        except grpc.RpcError:
            return {}
        return {p.partition: p.leader_epoch for t in response.topics if t.name == self.settings.topic for p in t.partitions if p.leader_id >= 0}

    def _offsets(self, pool, address: str, epochs: dict[int, int], timestamp: int) -> dict[int, int]:
        """The offsets this broker gives as leader of the epochs asked ({} for a refusal)."""
        request = broker_pb2.ListOffsetsRequest()
        topic = request.topics.add(topic=self.settings.topic)
        for partition, epoch in sorted(epochs.items()):
            topic.partitions.add(partition=partition, timestamp=timestamp, current_leader_epoch=epoch)
        try:
            response = pool.stub(address).ListOffsets(request, timeout=self._timeout_s)
        except grpc.RpcError:
            return {}
        return {p.partition: p.offset for t in response.topics for p in t.partitions if p.error_code == ErrorCode.NONE}
