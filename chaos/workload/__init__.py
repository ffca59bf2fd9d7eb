"""The chaos workload: producers, consumers and an offsets observer running side by side,
each recording into one History."""

from __future__ import annotations

from chaos.history import History
from chaos.workload.consumer_worker import ConsumerWorker
from chaos.workload.kafka_producer_worker import KafkaProducerWorker
from chaos.workload.offsets_observer import OffsetsObserver
from chaos.workload.producer_worker import ProducerWorker
from chaos.workload.settings import WorkloadSettings

__all__ = ["Workload", "WorkloadSettings"]


class Workload:
    """Starts every worker thread, and stops producers first so consumers see their last writes."""

    def __init__(self, bootstrap: str, settings: WorkloadSettings, history: History, kafka_bootstrap: str = "") -> None:
        """``kafka_bootstrap``: the brokers' Kafka listeners, for ``producer_client="librdkafka"``."""
        if settings.producer_client == "librdkafka":
            if not kafka_bootstrap:
                raise ValueError("producer_client librdkafka needs the brokers' Kafka listeners: run against a local chaos cluster")
            self.producers: list[ProducerWorker] = [
                KafkaProducerWorker(f"producer-{i}", kafka_bootstrap, settings, history) for i in range(settings.producers)]
        else:
            self.producers = [ProducerWorker(f"producer-{i}", bootstrap, settings, history, single_attempt=False) for i in range(settings.producers)]
        self.producers += [
            ProducerWorker(f"single-producer-{i}", bootstrap, settings, history, single_attempt=True) for i in range(settings.single_attempt_producers)
        ]
        self.readers = [ConsumerWorker(f"consumer-{i}", bootstrap, settings, history) for i in range(settings.consumers)]
        self.readers.append(OffsetsObserver("offsets-observer", bootstrap, settings, history))
        self.settings = settings

    def start(self) -> None:
        for worker in [*self.producers, *self.readers]:
            worker.start()

    def stop(self) -> None:
        """Stops and joins every worker; producers get their delivery timeout to finish."""
        join_s = self.settings.delivery_timeout_ms / 1000 + 5
        for group in (self.producers, self.readers):
            for worker in group:
                worker.stopping.set()
            for worker in group:
                worker.join(join_s)
                assert not worker.is_alive(), f"{worker.name} did not stop within {join_s:.0f}s"
