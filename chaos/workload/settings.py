"""The workload's knobs, in one place so a report can record exactly what ran."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadSettings:
    """Idempotent acks=all producers writing unique values round-robin over the partitions
    of an RF=3 topic with min.insync.replicas=2, and consumers reading all of it.

    ``single_attempt_producers`` send without retries and without idempotence: their
    refusals are definite failures (nothing was appended), which the aborted-read check
    needs; a retrying producer's final error can hide an earlier attempt that was appended.
    """

    topic: str = "chaos"
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    producers: int = 2
    single_attempt_producers: int = 1
    consumers: int = 2
    rate_per_s: int = 100  # per producer
    in_flight_max: int = 500  # per producer: sends awaiting an outcome
    delivery_timeout_ms: int = 10_000
    request_timeout_ms: int = 3_000
    poll_timeout_ms: int = 200
    observe_interval_s: float = 0.2  # each round asks every broker; consumers' answers add their own HWs
    isolation_level: str = "read_uncommitted"  # the consumers' and the final read's (read_committed: transactions)
    fetch_mode: str = "stream"  # the consumers' and the final read's (see docs/chaos.md, Transactions, for "fetch")
    # "librdkafka": the retrying producers speak Kafka's protocol to the brokers' Kafka listeners
    # (confluent-kafka), so the checker judges the Kafka door; the single-attempt ones stay kraftlog's
    producer_client: str = "kraftlog"

    def topic_configs(self) -> dict[str, str]:
        return {"min.insync.replicas": str(self.min_insync_replicas), "unclean.leader.election.enable": "false"}
