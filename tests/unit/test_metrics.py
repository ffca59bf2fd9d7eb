"""The metrics cores: scrape-time partition and quorum gauges from plain inputs, per-topic
traffic from real encoded batches, and the RPC interceptor on a real gRPC server."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import grpc
import immutables
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from data_plane.broker.broker_metrics import BrokerMetrics, PartitionErrors, PartitionFigures, TopicTraffic, group_lag_families, partition_families
from data_plane.groups.group_lag import BoundedLag
from data_plane.record_batch import encode_batch
from kraftlog_proto import broker_pb2, common_pb2
from metadata_quorum.controller_metrics import ControllerMetrics, quorum_families
from metadata_quorum.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from server_common.metrics import RpcMetrics


def figures(leader: bool = True, replicas: int = 3, isr: int = 3, min_isr: int = 2, offline: bool = False,
            lag: tuple[tuple[int, int], ...] = ()) -> PartitionFigures:
    return PartitionFigures("t", 0, leader, offline, replicas, isr, min_isr, 100, lag)


def gauges(items: list[PartitionFigures]) -> dict[str, list]:
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in partition_families(items)}


def scalar(families: dict[str, list], name: str) -> float:
    [(labels, number)] = families[name]
    assert labels == {}
    return number


def test_only_led_partitions_with_a_short_isr_are_under_replicated() -> None:
    families = gauges([figures(isr=3), figures(isr=2), figures(leader=False, isr=1), figures(isr=1, min_isr=2)])
    assert scalar(families, "kraftlog_under_replicated_partitions") == 2
    assert scalar(families, "kraftlog_under_min_isr_partitions") == 1
    assert scalar(families, "kraftlog_leader_partitions") == 3
    assert scalar(families, "kraftlog_partitions") == 4


def test_a_fully_replicated_broker_reports_zero() -> None:
    families = gauges([figures(), figures(leader=False)])
    assert scalar(families, "kraftlog_under_replicated_partitions") == 0
    assert scalar(families, "kraftlog_under_min_isr_partitions") == 0
    assert scalar(families, "kraftlog_offline_replicas") == 0


def test_lag_per_follower_and_size_per_partition_carry_their_labels() -> None:
    families = gauges([figures(lag=((2, 0), (3, 7)), offline=False), figures(leader=False, offline=True)])
    assert families["kraftlog_replica_lag_records"] == [
        ({"topic": "t", "partition": "0", "follower": "2"}, 0), ({"topic": "t", "partition": "0", "follower": "3"}, 7)]
    assert ({"topic": "t", "partition": "0"}, 100) in families["kraftlog_log_size_bytes"]
    assert scalar(families, "kraftlog_offline_replicas") == 1


def test_quorum_gauges_count_fenced_brokers_and_leaderless_partitions() -> None:
    brokers = immutables.Map({1: BrokerImage(1, 5, "h", 1, "", False, False), 2: BrokerImage(2, 6, "h", 2, "", True, False)})
    parts = immutables.Map({0: PartitionImage("t", 0, (1, 2), (1,), 1, 3, 4), 1: PartitionImage("t", 1, (2,), (2,), -1, 3, 4)})
    image = MetadataImage(offset=42, cluster_id="c", topics=immutables.Map({"t": TopicImage("t", "id", parts)}), brokers=brokers)
    families = {f.name: f.samples[0].value for f in quorum_families({"state": 2, "raft_term": 7, "commit_idx": 40, "caught_up": True}, image)}
    assert families["kraftlog_controller_active"] == 1
    assert families["kraftlog_controller_caught_up"] == 1
    assert families["kraftlog_raft_term"] == 7
    assert families["kraftlog_raft_commit_index"] == 40
    assert families["kraftlog_fenced_brokers"] == 1
    assert families["kraftlog_offline_partitions"] == 1
    assert families["kraftlog_cluster_partitions"] == 2
    follower = {f.name: f.samples[0].value for f in quorum_families({"state": 0}, image)}
    assert follower["kraftlog_controller_active"] == 0
    assert follower["kraftlog_controller_caught_up"] == 0


def test_topic_traffic_counts_batches_and_records_paths() -> None:
    registry = CollectorRegistry()
    traffic = TopicTraffic(registry)
    batch = encode_batch([b"a", b"bb", b"ccc"])
    request = broker_pb2.ProduceRequest(topics=[
        broker_pb2.TopicProduceData(topic="b", partitions=[broker_pb2.PartitionProduceData(partition=0, batches=batch)]),
        broker_pb2.TopicProduceData(topic="r", partitions=[broker_pb2.PartitionProduceData(
            partition=0, records=[common_pb2.Record(key=b"k", value=b"vv"), common_pb2.Record(value=b"v")])]),
    ])
    traffic.on_produce(request, broker_pb2.ProduceResponse())
    assert registry.get_sample_value("kraftlog_topic_records_in_total", {"topic": "b"}) == 3
    assert registry.get_sample_value("kraftlog_topic_bytes_in_total", {"topic": "b"}) == len(batch)
    assert registry.get_sample_value("kraftlog_topic_records_in_total", {"topic": "r"}) == 2
    assert registry.get_sample_value("kraftlog_topic_bytes_in_total", {"topic": "r"}) == 4
    traffic.on_consume(None, broker_pb2.ConsumeResponse(partitions=[broker_pb2.ConsumePartitionData(topic="b", batches=batch)]))
    traffic.on_consume(None, broker_pb2.ConsumeResponse(partitions=[broker_pb2.ConsumePartitionData(topic="empty")]))
    assert registry.get_sample_value("kraftlog_topic_records_out_total", {"topic": "b"}) == 3
    assert registry.get_sample_value("kraftlog_topic_records_out_total", {"topic": "empty"}) is None


async def health_calls(interceptors: list, known_calls: int, unknown_calls: int = 0) -> float:
    """Seconds taken by ``known_calls`` health Checks of a SERVING service, then
    ``unknown_calls`` Checks of an unknown one (each NOT_FOUND), on a real in-process
    server with ``interceptors``."""
    server = grpc.aio.server(interceptors=interceptors)
    servicer = health.aio.HealthServicer()
    await servicer.set("known", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            started = time.perf_counter()
            for _ in range(known_calls):
                await stub.Check(health_pb2.HealthCheckRequest(service="known"))
            took = time.perf_counter() - started
            for _ in range(unknown_calls):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Check(health_pb2.HealthCheckRequest(service="unknown"))
                assert refused.value.code() == grpc.StatusCode.NOT_FOUND
            return took
    finally:
        await server.stop(None)


def test_the_interceptor_counts_status_codes_and_times_unary_calls() -> None:
    registry = CollectorRegistry()
    metrics = RpcMetrics(registry)
    asyncio.run(health_calls([metrics.interceptor()], known_calls=1, unknown_calls=1))
    assert registry.get_sample_value("kraftlog_rpc_requests_total", {"method": "Check", "code": "OK"}) == 1
    assert registry.get_sample_value("kraftlog_rpc_requests_total", {"method": "Check", "code": "NOT_FOUND"}) == 1
    assert registry.get_sample_value("kraftlog_rpc_duration_seconds_count", {"method": "Check"}) == 2


def test_partition_errors_are_counted_by_rpc_and_code() -> None:
    registry = CollectorRegistry()
    errors = PartitionErrors(registry)
    answer = broker_pb2.ProduceResponse(topics=[broker_pb2.TopicProduceResponse(topic="t", partitions=[
        broker_pb2.PartitionProduceResponse(partition=0),
        broker_pb2.PartitionProduceResponse(partition=1, error_code=common_pb2.NOT_LEADER_OR_FOLLOWER),
    ])])
    errors.observer("Produce")(None, answer)
    errors.observer("Consume")(None, broker_pb2.ConsumeResponse(partitions=[
        broker_pb2.ConsumePartitionData(topic="t", error_code=common_pb2.NOT_LEADER_OR_FOLLOWER)]))
    assert registry.get_sample_value("kraftlog_partition_errors_total", {"method": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}) == 1
    assert registry.get_sample_value("kraftlog_partition_errors_total", {"method": "Consume", "error": "NOT_LEADER_OR_FOLLOWER"}) == 1
    assert registry.get_sample_value("kraftlog_partition_errors_total", {"method": "Produce", "error": "NONE"}) is None


def exported_names() -> set[str]:
    """Every kraftlog_* metric a broker or controller exports, as Prometheus names it."""
    families = [*partition_families([]), *group_lag_families(BoundedLag([], [], 0, 0)), *quorum_families({}, MetadataImage.empty("c"))]
    for metrics in (BrokerMetrics(CollectorRegistry()), ControllerMetrics(CollectorRegistry())):
        families += list(metrics.registry.collect())
    return {f.name + ("_total" if f.type == "counter" else "") for f in families if f.name.startswith("kraftlog_")}


def test_docs_list_every_metric_and_the_dashboard_uses_only_real_ones() -> None:
    root = Path(__file__).parents[2]
    documented = set(re.findall(r"^\| `(kraftlog_\w+)` \|", (root / "docs/metrics.md").read_text(), re.MULTILINE))
    exported = exported_names()
    assert documented == exported, (documented ^ exported)
    dashboard = json.loads((root / "docs/grafana-dashboard.json").read_text())
    used = {re.sub(r"_(bucket|count|sum)$", "", name)
            for panel in dashboard["panels"] for target in panel["targets"] for name in re.findall(r"kraftlog_\w+", target["expr"])}
    assert used and used <= exported, used - exported
