"""Every TransactionCoordinator RPC fuzzed against a real broker (the same fuzzer and answer
check as tests/integration/test_rpc_fuzz.py): no request makes a handler raise or the broker
die, and every answer is one a client can act on."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor

from kraftlog_proto import common_pb2, group_pb2, group_pb2_grpc, transaction_pb2, transaction_pb2_grpc
from server_common.waiting import wait_for
from tests.cluster import local_cluster
from tests.integration.proto_fuzz import FuzzPool
from tests.integration.test_rpc_fuzz import EXAMPLES_PER_RPC, fuzz

pytestmark = pytest.mark.integration

RPCS = list(transaction_pb2.DESCRIPTOR.services_by_name["TransactionCoordinator"].methods)
POOL = FuzzPool(names=("fuzz-tx", "orders", "__transaction_state"), words=("Ongoing", "CompleteCommit", "Empty"))


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("txn-fuzz"), controllers=1, brokers=1,
                       broker_args=["--transaction-state-partitions", "1"]) as cluster:
        cluster.create_topic("orders", partitions=2, replication_factor=1)
        with grpc.insecure_channel(cluster.brokers[0].address) as channel:
            finder = group_pb2_grpc.GroupCoordinatorStub(channel)
            stub = transaction_pb2_grpc.TransactionCoordinatorStub(channel)

            def loaded() -> bool:
                finder.FindCoordinator(group_pb2.FindCoordinatorRequest(keys=["x"], key_type=group_pb2.TRANSACTION), timeout=5)  # creates the topic
                [x] = stub.DescribeTransactions(transaction_pb2.DescribeTransactionsRequest(transactional_ids=["x"]), timeout=5).transactions
                return x.error_code == common_pb2.TRANSACTIONAL_ID_NOT_FOUND

            wait_for(loaded, 30, "the transaction state partition loaded")
            yield cluster, channel
            assert all(cluster.is_running(node) for node in cluster.nodes), "a process died while fuzzed (see its log)"


@pytest.mark.parametrize("method", RPCS, ids=[m.name for m in RPCS])
def test_no_transaction_request_makes_a_handler_raise(coordinator, method: MethodDescriptor) -> None:
    cluster, channel = coordinator
    fuzz(method, channel, POOL, cluster, EXAMPLES_PER_RPC, None)
