"""Prometheus metrics of real brokers and controllers, scraped over HTTP: names, labels and
types, and an under-replicated partition that shows while a follower is down and clears
once it is back."""

from __future__ import annotations

import ssl
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.local_cluster import HOST
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

SESSION = ["--session-timeout-ms", "3000"]


def give_metrics_ports(cluster: TestCluster) -> None:
    """A metrics port for every node, none of them a port another node will bind (its gRPC,
    Raft or Kafka port, picked and released before the nodes start)."""
    for node, port in zip(cluster.nodes, cluster.spare_ports(len(cluster.nodes))):
        node.extra_args += ["--metrics-port", str(port)]


def metrics_port(cluster: TestCluster, role: str, node_id: int) -> int:
    args = cluster.node(role, node_id).extra_args
    return int(args[args.index("--metrics-port") + 1])


def scrape(port: int, security=None) -> dict:
    """{family name: family} from one scrape of /metrics: over https with ``security``'s CA and
    client certificate (a ``ClientSecurity``, as a secure cluster's nodes serve it), else http."""
    if security is None or security.ca_file is None:
        url, context = f"http://{HOST}:{port}/metrics", None
    else:
        url, context = f"https://{HOST}:{port}/metrics", ssl.create_default_context(cafile=str(security.ca_file))
        if security.cert_file is not None:
            context.load_cert_chain(security.cert_file, security.key_file)
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        text = answer.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict, name: str, **labels: str) -> float | None:
    """The sample ``name`` with ``labels`` (a family's counter samples end in _total)."""
    for family in families.values():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def test_broker_and_controller_metrics_and_an_under_replicated_partition(tmp_path: Path) -> None:
    from data_plane.client import Producer

    with local_cluster(tmp_path, controllers=1, controller_args=SESSION,
                       broker_args=[*SESSION, "--replica-lag-time-max-ms", "2000"], configure=give_metrics_ports) as cluster:
        cluster.create_topic("watched", partitions=1, replication_factor=3)
        leader = cluster.leader("watched", 0)
        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(10):
                producer.send("watched", f"v{i}".encode(), partition=0)
            producer.flush(30)
        port = metrics_port(cluster, "broker", leader)

        broker = scrape(port)
        assert broker["kraftlog_rpc_requests"].type == "counter"
        assert value(broker, "kraftlog_rpc_requests_total", method="Produce", code="OK") >= 1
        assert broker["kraftlog_rpc_duration_seconds"].type == "histogram"
        assert value(broker, "kraftlog_rpc_duration_seconds_count", method="Produce") >= 1
        assert value(broker, "kraftlog_topic_records_in_total", topic="watched") == 10
        assert value(broker, "kraftlog_topic_bytes_in_total", topic="watched") > 0
        assert broker["kraftlog_under_replicated_partitions"].type == "gauge"
        assert value(broker, "kraftlog_leader_partitions") == 1
        assert value(broker, "kraftlog_partitions") == 1
        assert value(broker, "kraftlog_log_size_bytes", topic="watched", partition="0") > 0
        followers = [b.node_id for b in cluster.brokers if b.node_id != leader]
        wait_for(lambda: all(value(scrape(port), "kraftlog_replica_lag_records", topic="watched", partition="0", follower=str(f)) == 0
                             for f in followers), 30, "both followers caught up in the leader's lag gauge")
        assert value(broker, "process_cpu_seconds_total") is not None
        kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")
        through_door = kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
        through_door.produce("watched", b"through the Kafka door", partition=0)
        assert through_door.flush(30) == 0
        door = scrape(port)
        assert value(door, "kraftlog_kafka_requests_total", api="Produce") >= 1
        assert value(door, "kraftlog_kafka_request_duration_seconds_count", api="Produce") >= 1  # the leader: Metadata may have gone elsewhere

        follower = cluster.broker(followers[0])
        with grpc.insecure_channel(follower.address) as channel:
            answer = broker_pb2_grpc.BrokerStub(channel).Produce(broker_pb2.ProduceRequest(acks=1, timeout_ms=5000, topics=[
                broker_pb2.TopicProduceData(topic="watched", partitions=[broker_pb2.PartitionProduceData(partition=0, records=[common_pb2.Record(value=b"x")])])]))
        assert answer.topics[0].partitions[0].error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
        refused = scrape(metrics_port(cluster, "broker", follower.node_id))
        assert value(refused, "kraftlog_partition_errors_total", method="Produce", error="NOT_LEADER_OR_FOLLOWER") == 1
        assert value(refused, "kraftlog_under_replicated_partitions") == 0  # a follower counts no partition

        controller = scrape(metrics_port(cluster, "controller", 1))
        assert value(controller, "kraftlog_controller_active") == 1
        assert value(controller, "kraftlog_raft_term") >= 1
        assert value(controller, "kraftlog_raft_commit_index") >= 1
        assert value(controller, "kraftlog_registered_brokers") == 3
        assert value(controller, "kraftlog_raft_commit_seconds_count") >= 1
        assert value(controller, "kraftlog_rpc_requests_total", method="CreateTopics", code="OK") >= 1

        under = lambda: value(scrape(port), "kraftlog_under_replicated_partitions")  # noqa: E731
        assert under() == 0
        down = cluster.broker(followers[0])
        cluster.kill(down)
        wait_for(lambda: under() == 1, 30, "the leader reporting the partition under-replicated")
        wait_for(lambda: value(scrape(metrics_port(cluster, "controller", 1)), "kraftlog_fenced_brokers") == 1, 30, "the killed broker fenced")
        # The ISR loses the follower by the leader's shrink or by the controller's fencing, whichever comes first.
        assert scrape(port)["kraftlog_isr_shrinks"].type == "counter"
        cluster.start_node(down)
        wait_for(lambda: under() == 0, 60, "the restarted follower back in the ISR")
        assert value(scrape(port), "kraftlog_isr_expansions_total") >= 1


def test_consumer_group_lag_per_group_and_partition_bounded_to_the_largest(tmp_path: Path) -> None:
    """The group coordinator's broker exports each group's lag on each partition it committed
    an offset for (end offset minus committed), partitions led by the other broker included,
    bounded by --metrics-group-lag-series to the largest lags with the rest counted; it
    follows new records."""
    from data_plane.client import Producer
    from data_plane.client.group_admin import GroupAdmin, offset_commit_request, raise_commit_errors

    args = ["--offsets-topic-partitions", "1", "--metrics-group-lag-series", "2"]
    with local_cluster(tmp_path, controllers=1, brokers=2, broker_args=args, configure=give_metrics_ports) as cluster:
        cluster.create_topic("lagging", partitions=4, replication_factor=1)
        with Producer(cluster.bootstrap) as producer:
            for partition in range(4):
                for i in range(10):
                    producer.send("lagging", b"v%d" % i, partition=partition)
            producer.flush(30)
        commits = {"g1": {0: 2, 1: 4, 2: 6, 3: 8}, "g2": {0: 10}, "g3": {0: 9}}  # lags 8, 6, 4, 2; 0; 1
        with GroupAdmin(cluster.bootstrap) as admin:
            for group_id, offsets in commits.items():
                request = offset_commit_request(group_id, "", -1, {("lagging", p): (o, -1) for p, o in offsets.items()})
                raise_commit_errors(admin.link(group_id).call("OffsetCommit", request), group_id)
        leaders = {cluster.leader("lagging", p) for p in range(4)}
        assert len(leaders) == 2  # some partitions' ends come from the other broker
        port = metrics_port(cluster, "broker", cluster.leader("__consumer_offsets", 0))

        def exported() -> dict:
            families = scrape(port)
            return {"partitions": {(s.labels["group"], s.labels["partition"]): s.value for s in families["kraftlog_consumer_group_lag_records"].samples},
                    "totals": {s.labels["group"]: s.value for s in families["kraftlog_consumer_group_lag_sum_records"].samples},
                    "omitted": {s.labels["series"]: s.value for s in families["kraftlog_consumer_group_lag_series_omitted"].samples}}

        wanted = {"partitions": {("g1", "0"): 8, ("g1", "1"): 6}, "totals": {"g1": 20, "g3": 1}, "omitted": {"partition": 4, "group": 1}}
        wait_for(lambda: exported() == wanted, 30, f"the group lag gauges {wanted}")
        with Producer(cluster.bootstrap) as producer:
            for i in range(5):
                producer.send("lagging", b"more", partition=3)
            producer.flush(30)
        wanted = {"partitions": {("g1", "3"): 7, ("g1", "0"): 8}, "totals": {"g1": 25, "g3": 1}, "omitted": {"partition": 4, "group": 1}}
        wait_for(lambda: exported() == wanted, 30, f"the group lag following new records: {wanted}")
