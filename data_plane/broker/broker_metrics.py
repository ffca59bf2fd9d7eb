"""A broker's Prometheus metrics: per-topic traffic counted as RPCs finish, ISR changes counted
as they are proposed, and every per-partition figure computed when Prometheus scrapes.

``partition_families`` is the pure core (partitions in, metric families out, unit-tested);
``BrokerMetrics`` is the shell that hooks it to a running broker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from data_plane.broker.partition import Partition
from data_plane.groups.group_lag import BoundedLag
from data_plane.record_batch import iter_headers
from data_plane.replication.partition_state import IsrProposal
from kraftlog_proto import broker_pb2
from server_common.errors import error_code_name
from server_common.metrics import LATENCY_BUCKETS, Observer, RpcMetrics, authentication_failures, new_registry, read_on_loop
from server_common.metrics_endpoint import connections_refused, serve_metrics
from server_common.tls import ServerTls


@dataclass(frozen=True, slots=True)
class PartitionFigures:
    """What one replica contributes to a scrape, read on the loop in one pass."""

    topic: str
    partition: int
    leader: bool
    offline: bool
    replicas: int
    isr: int
    min_insync_replicas: int
    size_bytes: int
    follower_lag: tuple[tuple[int, int], ...]  # (follower id, records behind the leader's log end), leaders only
    producer_ids: int = 0  # producer ids whose idempotence state the replica keeps


def figures_of(partition: Partition) -> PartitionFigures:
    leader = partition.is_leader
    lag: tuple[tuple[int, int], ...] = ()
    if leader:
        leos = partition.replica_log_end_offsets()
        end = leos[partition.broker_id]
        lag = tuple((r, end - leo if leo >= 0 else end) for r, leo in sorted(leos.items()) if r != partition.broker_id)
    return PartitionFigures(
        topic=partition.topic,
        partition=partition.partition,
        leader=leader,
        offline=partition.offline_reason is not None,
        replicas=len(partition.state.replicas),
        isr=len(partition.state.isr),
        min_insync_replicas=partition.log.settings.min_insync_replicas,
        size_bytes=partition.size_bytes if partition.offline_reason is None else 0,
        follower_lag=lag,
        producer_ids=partition.producer_id_count,
    )


def partition_families(figures: Iterable[PartitionFigures]) -> list[GaugeMetricFamily]:
    """The scrape-time gauges. Under-replicated and under-min-ISR count only partitions this
    broker leads (as Kafka's do), so summing them over brokers counts each partition once."""
    replicas = GaugeMetricFamily("kraftlog_partitions", "Partition replicas on this broker")
    leaders = GaugeMetricFamily("kraftlog_leader_partitions", "Partitions this broker leads")
    under = GaugeMetricFamily("kraftlog_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set")
    under_min = GaugeMetricFamily("kraftlog_under_min_isr_partitions", "Partitions led here whose ISR is smaller than min.insync.replicas (acks=all produces fail)")
    offline = GaugeMetricFamily("kraftlog_offline_replicas", "Replicas on this broker whose log failed (taken offline)")
    size = GaugeMetricFamily("kraftlog_log_size_bytes", "Bytes of a partition replica's log on disk", labels=["topic", "partition"])
    lag = GaugeMetricFamily("kraftlog_replica_lag_records", "Records a follower is behind the leader's log end, as the leader knows it",
                            labels=["topic", "partition", "follower"])
    producers = GaugeMetricFamily("kraftlog_producer_ids", "Producer ids whose idempotence state this broker's replicas keep, "
                                  "summed over replicas (each is forgotten after --producer-id-expiration-ms idle)")
    counts = {"replicas": 0, "leaders": 0, "under": 0, "under_min": 0, "offline": 0, "producers": 0}
    for f in figures:
        counts["replicas"] += 1
        counts["offline"] += f.offline
        counts["producers"] += f.producer_ids
        part = str(f.partition)
        size.add_metric([f.topic, part], f.size_bytes)
        if not f.leader:
            continue
        counts["leaders"] += 1
        counts["under"] += f.isr < f.replicas
        counts["under_min"] += f.isr < f.min_insync_replicas
        for follower, behind in f.follower_lag:
            lag.add_metric([f.topic, part, str(follower)], behind)
    replicas.add_metric([], counts["replicas"])
    leaders.add_metric([], counts["leaders"])
    under.add_metric([], counts["under"])
    under_min.add_metric([], counts["under_min"])
    offline.add_metric([], counts["offline"])
    producers.add_metric([], counts["producers"])
    return [replicas, leaders, under, under_min, offline, producers, size, lag]


def group_lag_families(lag: BoundedLag) -> list[GaugeMetricFamily]:
    """The consumer-group lag gauges of the groups coordinated here (``group_lag``: bounded)."""
    partitions = GaugeMetricFamily("kraftlog_consumer_group_lag_records", "Records between a group's committed offset and the "
                                   "partition's end (high watermark), the largest first", labels=["group", "topic", "partition"])
    totals = GaugeMetricFamily("kraftlog_consumer_group_lag_sum_records", "A group's lag summed over its partitions, the largest first",
                               labels=["group"])
    omitted = GaugeMetricFamily("kraftlog_consumer_group_lag_series_omitted", "Lag series left out by --metrics-group-lag-series "
                                "(the smallest lags)", labels=["series"])
    for p in lag.partitions:
        partitions.add_metric([p.group, p.topic, str(p.partition)], p.lag)
    for group, total in lag.group_totals:
        totals.add_metric([group], total)
    omitted.add_metric(["partition"], lag.partitions_omitted)
    omitted.add_metric(["group"], lag.groups_omitted)
    return [partitions, totals, omitted]


class ScrapeCollector(Collector):
    """Families computed when scraped, by ``families`` (which reads the broker's state on the
    loop that owns it, so the snapshot is consistent and the hot path takes no lock)."""

    def __init__(self, families: Callable[[], list[GaugeMetricFamily]]) -> None:
        self._families = families

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families()

    def describe(self) -> list:
        return []  # families are known only at scrape time: no registration-time collect


def _topic_traffic(partitions) -> tuple[int, int]:
    """(bytes, records) of one topic's partitions in a Produce request or a Fetch answer: both
    carry either encoded batches or plain records (keys and values counted)."""
    size = records = 0
    for p in partitions:
        if p.batches:
            size += len(p.batches)
            records += sum(h.record_count for _, h in iter_headers(p.batches))
        else:
            size += sum(len(r.key) + len(r.value) for r in p.records)
            records += len(p.records)
    return size, records


class TopicTraffic:
    """Bytes and records in (Produce requests) and out (Fetch answers and Consume stream
    messages) per topic: client traffic only, replication is in the replica lag and the RPC
    counts."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.bytes_in = Counter("kraftlog_topic_bytes_in", "Record bytes produced to a topic", ["topic"], registry=registry)
        self.records_in = Counter("kraftlog_topic_records_in", "Records produced to a topic", ["topic"], registry=registry)
        self.bytes_out = Counter("kraftlog_topic_bytes_out", "Record bytes fetched by consumers from a topic", ["topic"], registry=registry)
        self.records_out = Counter("kraftlog_topic_records_out", "Records fetched by consumers from a topic", ["topic"], registry=registry)

    def on_produce(self, request: broker_pb2.ProduceRequest, response: broker_pb2.ProduceResponse) -> None:
        """Counts what was offered; partitions answered with an error count too (the bytes
        crossed the network either way)."""
        for topic in request.topics:
            size, records = _topic_traffic(topic.partitions)
            self.bytes_in.labels(topic.topic).inc(size)
            self.records_in.labels(topic.topic).inc(records)

    def on_fetch(self, request: broker_pb2.FetchRequest, response: broker_pb2.FetchResponse) -> None:
        for topic in response.topics:
            size, records = _topic_traffic(topic.partitions)
            self._sent(topic.topic, size, records)

    def on_consume(self, _request: None, message: broker_pb2.ConsumeResponse) -> None:
        for p in message.partitions:
            self._sent(p.topic, *_topic_traffic([p]))

    def _sent(self, topic: str, size: int, records: int) -> None:
        if records:  # empty long-poll answers name topics without sending any of them
            self.bytes_out.labels(topic).inc(size)
            self.records_out.labels(topic).inc(records)


class PartitionErrors:
    """Partitions answered with an error, by RPC and error code: kraftlog's refusals travel
    inside answers (per partition), not as gRPC statuses."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.errors = Counter("kraftlog_partition_errors", "Partitions answered with an error code, by RPC and code",
                              ["method", "error"], registry=registry)

    def observer(self, method: str) -> Observer:
        """For answers shaped topics[].partitions[].error_code (Consume messages: partitions[])."""
        errors = self.errors

        def count(_request, response) -> None:
            partitions = response.partitions if method == "Consume" else (p for t in response.topics for p in t.partitions)
            for p in partitions:
                if p.error_code:
                    errors.labels(method, error_code_name(p.error_code)).inc()

        return count


class ThrottleTimes:
    """Throttle time handed to clients over quota, by quota type (docs/quotas.md)."""

    BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

    def __init__(self, registry: CollectorRegistry) -> None:
        self.seconds = Histogram("kraftlog_throttle_time_seconds", "Throttle time of answers to clients over a quota, by quota type",
                                 ["quota"], buckets=self.BUCKETS, registry=registry)

    def observe(self, quota: str, throttle_ms: int) -> None:
        self.seconds.labels(quota).observe(throttle_ms / 1000.0)


def _together(*observers: Observer) -> Observer:
    def observe(request, response) -> None:
        for observer in observers:
            observer(request, response)

    return observe


class BrokerMetrics:
    """Everything a broker exports, and the HTTP endpoint that serves it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or new_registry()
        self.traffic = TopicTraffic(self.registry)
        errors = PartitionErrors(self.registry)
        self.rpc = RpcMetrics(self.registry, {
            "Produce": _together(self.traffic.on_produce, errors.observer("Produce")),
            "Fetch": _together(self.traffic.on_fetch, errors.observer("Fetch")),
            "Consume": _together(self.traffic.on_consume, errors.observer("Consume")),
            "ListOffsets": errors.observer("ListOffsets"),
            "OffsetForLeaderEpoch": errors.observer("OffsetForLeaderEpoch"),
            "DeleteRecords": errors.observer("DeleteRecords"),
        })
        self.throttle = ThrottleTimes(self.registry)
        self.authentication_failures = authentication_failures(self.registry)
        self.connections_refused = connections_refused(self.registry)
        self.kafka_requests = Counter("kraftlog_kafka_requests", "Requests answered on the Kafka listener, by API", ["api"], registry=self.registry)
        self.kafka_latency = Histogram("kraftlog_kafka_request_duration_seconds", "Time to answer a Kafka request, by API",
                                       ["api"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.isr_shrinks = Counter("kraftlog_isr_shrinks", "ISR shrinks this broker proposed as leader (AlterPartition sent)", registry=self.registry)
        self.isr_expansions = Counter("kraftlog_isr_expansions", "ISR expansions this broker proposed as leader (AlterPartition sent)", registry=self.registry)
        self._stop: Callable[[], None] | None = None

    def kafka_answered(self, api: str, seconds: float) -> None:
        """A request on the Kafka listener was answered (docs/kafka.md): counted and timed as the
        gRPC interceptor does for the native door."""
        self.kafka_requests.labels(api).inc()
        self.kafka_latency.labels(api).observe(seconds)

    def count_isr_changes(self, propose: Callable[[Partition, IsrProposal], None]) -> Callable[[Partition, IsrProposal], None]:
        """``propose`` (where the replica manager sends ISR proposals), counting each one."""

        def counted(partition: Partition, proposal: IsrProposal) -> None:
            current = frozenset(partition.state.isr)
            if proposal.new_isr - current:
                self.isr_expansions.inc()
            if current - proposal.new_isr:
                self.isr_shrinks.inc()
            propose(partition, proposal)

        return counted

    def start(self, host: str, port: int, partitions: Callable[[], Iterable[Partition]], loop: asyncio.AbstractEventLoop,
              tls: ServerTls | None = None) -> None:
        """Register the scrape-time collector and serve /metrics on ``host:port``, with the
        broker's listener TLS when it has one (``metrics_endpoint``)."""
        self.registry.register(ScrapeCollector(lambda: partition_families(read_on_loop(loop, lambda: [figures_of(p) for p in partitions()]))))
        self._stop = serve_metrics(self.registry, host, port, tls, self.connections_refused)

    def watch_group_lag(self, read: Callable[[], BoundedLag]) -> None:
        """Export the consumer-group lag ``read`` answers (on the broker's loop) at each scrape."""
        self.registry.register(ScrapeCollector(lambda: group_lag_families(read())))

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
