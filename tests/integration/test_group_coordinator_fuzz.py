"""Every GroupCoordinator RPC fuzzed against a real broker (the same fuzzer and answer check
as tests/integration/test_rpc_fuzz.py): no request makes a handler raise or the broker die,
and every answer is one a client can act on."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor

from kraftlog_proto import group_pb2, group_pb2_grpc
from server_common.waiting import wait_for
from tests.cluster import local_cluster
from tests.integration.proto_fuzz import FuzzPool
from tests.integration.test_rpc_fuzz import EXAMPLES_PER_RPC, fuzz

RPCS = list(group_pb2.DESCRIPTOR.services_by_name["GroupCoordinator"].methods)
POOL = FuzzPool(names=("fuzz-group", "fuzz-topic", "__consumer_offsets", "orders"), words=("uniform", "range", "sticky", "orders.*"))


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("group-fuzz"), controllers=1, brokers=1,
                       broker_args=["--offsets-topic-partitions", "1"]) as cluster:
        cluster.create_topic("orders", partitions=2, replication_factor=1)
        with grpc.insecure_channel(cluster.brokers[0].address) as channel:
            stub = group_pb2_grpc.GroupCoordinatorStub(channel)

            def loaded() -> bool:
                stub.FindCoordinator(group_pb2.FindCoordinatorRequest(keys=["x"]), timeout=5)  # creates the offsets topic
                return stub.OffsetFetch(group_pb2.OffsetFetchRequest(group_id="x"), timeout=5).error_code == 0

            wait_for(loaded, 30, "the offsets partition loaded")
            yield cluster, channel
            assert all(cluster.is_running(node) for node in cluster.nodes), "a process died while fuzzed (see its log)"


@pytest.mark.parametrize("method", RPCS, ids=[m.name for m in RPCS])
def test_no_group_request_makes_a_handler_raise(coordinator, method: MethodDescriptor) -> None:
    cluster, channel = coordinator
    fuzz(method, channel, POOL, cluster, EXAMPLES_PER_RPC, None)
