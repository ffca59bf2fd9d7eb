"""A producer thread speaking Kafka's protocol through librdkafka (confluent-kafka) to the
brokers' Kafka listeners: the same values, pacing and history as `ProducerWorker`, so the
checker judges the Kafka door under faults.

librdkafka's idempotent producer (acks=all) retries until its message timeout; a record it
reports failed may still have been appended by an earlier attempt, so every failure is an
"unknown" outcome, as for kraftlog's retrying producers. A fatal error (its idempotence state
lost) ends the producer and the worker carries on with a new one, as an application would.
"""

from __future__ import annotations

from chaos.history import SendOp
from chaos.workload.producer_worker import ProducerWorker
from chaos.workload.settings import WorkloadSettings


class KafkaProducerWorker(ProducerWorker):
    def __init__(self, name: str, kafka_bootstrap: str, settings: WorkloadSettings, history) -> None:
        super().__init__(name, kafka_bootstrap, settings, history, single_attempt=False)

    def _close(self, producer) -> None:
        self._poll(producer, self.settings.delivery_timeout_ms / 1000)

    def _new_producer(self):
        import confluent_kafka

        s = self.settings
        return confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "client.id": self.name, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": s.delivery_timeout_ms, "request.timeout.ms": s.request_timeout_ms,
            "log_level": 3,
        })

    def _serve_callbacks(self, producer) -> None:
        self._poll(producer, 0)

    def _poll(self, producer, timeout_s: float) -> None:
        """Run delivery callbacks (all of them, within ``timeout_s``, when the producer is done).
        A fatal error (librdkafka's idempotence state lost) surfaces here too: this producer is
        done, the records it holds are reported to their callbacks, and a new one carries on."""
        import confluent_kafka

        try:
            producer.flush(timeout_s) if timeout_s else producer.poll(0)
        except confluent_kafka.KafkaException:
            self._producer_broken.set()

    def _send(self, producer, seq: int) -> None:
        partition = seq % self.settings.partitions
        value = f"{self.name}-{seq}"
        invoked = self.history.now()

        def delivered(error, message) -> None:
            self._in_flight.release()
            now = self.history.now()
            if error is None:
                assert message.partition() == partition
                self.history.add(SendOp(self.name, partition, value, invoked, now, "ok", offset=message.offset()))
            else:
                self.history.add(SendOp(self.name, partition, value, invoked, now, "unknown", error=error.name()))
                if error.fatal():
                    self._producer_broken.set()

        import confluent_kafka

        try:
            producer.produce(self.settings.topic, value.encode(), partition=partition, on_delivery=delivered)
        except BufferError:  # its queue is full: never sent
            self._refused(partition, value, invoked, "QUEUE_FULL")
        except confluent_kafka.KafkaException as exc:  # a fatal error came first: never sent, and this producer is done
            self._refused(partition, value, invoked, exc.args[0].name())
            self._producer_broken.set()
        self._poll(producer, 0)

    def _refused(self, partition: int, value: str, invoked: float, error: str) -> None:
        self._in_flight.release()
        self.history.add(SendOp(self.name, partition, value, invoked, self.history.now(), "failed", error=error))
