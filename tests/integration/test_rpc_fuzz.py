"""No request can make a handler raise: every RPC of the Broker and ControllerService, fuzzed
with Hypothesis from the request descriptors (see ``proto_fuzz``), against a real controller
and broker. Every answer must be OK with only documented error codes (each with its message)
or a documented gRPC status with a message; both processes must keep running; and the records
acknowledged before the fuzzing must read back intact afterwards.

Protecting the acknowledged data: the data topic's name is offered only to RPCs that read or
append (``READ_OR_APPEND``, where a fuzzed request may name it: garbage appended after the
acknowledged records must not damage them). Every other RPC, including any added later, draws
topic names from ``fuzz-`` names only, so a fuzzed DeleteTopics, AlterConfigs (retention.ms=1)
or reassignment cannot remove the data by design, which would prove nothing about robustness;
and its ``broker_id``/``replica_id`` fields never name the real broker, since RegisterBroker,
BrokerHeartbeat or BrokerSession naming it would impersonate it (fencing it is what they are
for).

Cost: ``EXAMPLES_PER_RPC`` derandomized examples per RPC (the same ones each run, so a failure
replays), about a minute for both services; ``-m soak`` runs ``SOAK_EXAMPLES_PER_RPC`` from the
seed ``$KRAFTLOG_FUZZ_SEED`` (default 1), and Hypothesis prints the failing example and how to
reproduce it.
"""

from __future__ import annotations

import os
from concurrent import futures
from typing import Iterator

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2, controller_pb2
from tests.cluster import TestCluster, local_cluster
from tests.integration.proto_fuzz import FuzzPool, answer_problems, message_class, messages

pytestmark = pytest.mark.integration

DATA_TOPIC = "acknowledged"
DATA_RECORDS = 200
FUZZ_NAMES = ("fuzz-a", "fuzz-b", "fuzz-0")
CONFIG_WORDS = (
    "retention.ms", "retention.bytes", "segment.bytes", "min.insync.replicas", "cleanup.policy", "compression.type",
    "max.message.bytes", "unclean.leader.election.enable", "lz4", "zstd", "producer", "delete", "compact", "true",
)
READ_OR_APPEND = frozenset({
    "Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch", "Metadata", "InitProducerId", "DescribeLogs", "DescribeConfigs", "DescribeCluster",
    "DescribeQuorum", "ListPartitionReassignments", "StreamMetadata",
})
CALL_DEADLINE_S = 1.5  # a long poll (max_wait_ms up to 30 s) is cut here; only waiting calls may end so
STREAM_MESSAGES_MAX = 1  # a server stream is read this far (a bidirectional one: an answer per request), then cancelled
EXAMPLES_PER_RPC = 30
SOAK_EXAMPLES_PER_RPC = 400
NEGATIVE_CONTROL_SEED = 1  # a fixed seed: derandomized draws depend on what Hypothesis ran before in the process
SERVICES = [broker_pb2.DESCRIPTOR.services_by_name["Broker"], controller_pb2.DESCRIPTOR.services_by_name["ControllerService"]]
RPCS = [method for service in SERVICES for method in service.methods]
CONTROLLER_IDS = frozenset({1})  # the cluster fixture's controller


def may_wait(method: MethodDescriptor) -> bool:
    """Calls that may hold a correct answer back past the fuzzer's deadline: long polls,
    streams, produces waiting for acks, and adding a controller (it waits for the new one to
    catch up)."""
    return method.name in {"Fetch", "Produce", "AddController"} or method.client_streaming or method.server_streaming


def pool_for(method: MethodDescriptor, broker_ids: frozenset[int]) -> FuzzPool:
    if method.name in READ_OR_APPEND:
        return FuzzPool(names=(DATA_TOPIC, DATA_TOPIC, *FUZZ_NAMES), words=CONFIG_WORDS)
    # a real controller's id too: RemoveController naming one would shrink the quorum under the test
    return FuzzPool(names=FUZZ_NAMES, words=CONFIG_WORDS, protected_ids=broker_ids | CONTROLLER_IDS,
                    id_fields=FuzzPool.id_fields | {"controller_id"})


def call(channel: grpc.Channel, method: MethodDescriptor, request) -> object:
    """Send ``request`` (a list of them for a client stream) as ``method``; the answer, the
    list of streamed answers, or the RpcError."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    serialize = type(request[0] if isinstance(request, list) else request).SerializeToString
    response_type = message_class(method.output_type)
    kind = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
            (True, False): channel.stream_unary, (True, True): channel.stream_stream}[(method.client_streaming, method.server_streaming)]
    stub = kind(path, request_serializer=serialize, response_deserializer=response_type.FromString)
    try:
        if not method.server_streaming:
            return stub(iter(request) if method.client_streaming else request, timeout=CALL_DEADLINE_S)
        stream = stub(iter(request) if method.client_streaming else request, timeout=CALL_DEADLINE_S)
        answers = []
        try:
            for answer in stream:
                answers.append(answer)
                if len(answers) >= max(STREAM_MESSAGES_MAX, len(request) if isinstance(request, list) else 0):
                    break
        finally:
            stream.cancel()
        return answers
    except grpc.RpcError as error:
        return error


def problems_of(method: MethodDescriptor, answer) -> list[str]:
    answers = answer if isinstance(answer, list) else [answer]
    return [problem for a in answers for problem in answer_problems(a, may_wait(method))]


def acknowledged_values(stub: broker_pb2_grpc.BrokerStub) -> list[bytes]:
    """The data topic's records from offset 0, as the simple path returns them."""
    values: list[bytes] = []
    while len(values) < DATA_RECORDS:
        request = broker_pb2.FetchRequest(max_wait_ms=0, format=broker_pb2.RECORDS, topics=[
            broker_pb2.FetchTopic(topic=DATA_TOPIC, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=len(values))])])
        partition = stub.Fetch(request, timeout=10).topics[0].partitions[0]
        assert partition.error_code == common_pb2.NONE, partition.error_message
        assert partition.records, f"the data topic ends at offset {len(values)}: acknowledged records are gone"
        values += [r.value for r in partition.records]
    return values[:DATA_RECORDS]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory) -> Iterator[tuple[TestCluster, dict[str, grpc.Channel]]]:
    """A controller and a broker, with DATA_RECORDS records acknowledged (acks=all) in the
    data topic; after every test of the module those records must still read back."""
    with local_cluster(tmp_path_factory.mktemp("fuzz"), controllers=1, brokers=1) as cluster:
        cluster.create_topic(DATA_TOPIC, partitions=1, replication_factor=1)
        expected = [f"acknowledged-{i}".encode() for i in range(DATA_RECORDS)]
        with grpc.insecure_channel(cluster.brokers[0].address) as to_broker, grpc.insecure_channel(cluster.controllers[0].address) as to_controller:
            stub = broker_pb2_grpc.BrokerStub(to_broker)
            produced = stub.Produce(broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, topics=[broker_pb2.TopicProduceData(
                topic=DATA_TOPIC, partitions=[broker_pb2.PartitionProduceData(partition=0, records=[common_pb2.Record(value=v) for v in expected])])]), timeout=30)
            assert produced.topics[0].partitions[0].error_code == common_pb2.NONE
            assert acknowledged_values(stub) == expected
            yield cluster, {"Broker": to_broker, "ControllerService": to_controller}
            assert all(cluster.is_running(node) for node in cluster.nodes), "a process died while fuzzed (see its log)"
            assert acknowledged_values(stub) == expected, "acknowledged records changed while fuzzed"


def fuzz(method: MethodDescriptor, channel: grpc.Channel, pool: FuzzPool, cluster: TestCluster | None, examples: int, seed_value: int | None) -> None:
    """``examples`` requests of ``method``'s type: derandomized (the same each run) without
    ``seed_value``, else drawn from it. Fails on the first answer with a problem, or when a
    process of ``cluster`` (if any) died."""

    def down() -> list[str]:
        nodes = cluster.nodes if cluster is not None else []
        return [f"{node.name} (see {cluster.log_path(node)})" for node in nodes if not cluster.is_running(node)]

    request = messages(method.input_type, pool)
    if method.client_streaming:
        request = st.lists(request, min_size=1, max_size=3)

    @settings(max_examples=examples, deadline=None, database=None, print_blob=True, derandomize=seed_value is None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(request=request)
    def one_request(request) -> None:
        answer = call(channel, method, request)
        problems = problems_of(method, answer)
        dead = down()
        assert not dead, f"{', '.join(dead)} died answering {method.name}"
        assert not problems, f"{method.name}: " + "; ".join(problems)

    (one_request if seed_value is None else seed(seed_value)(one_request))()


def fuzz_cluster(fuzzed, method: MethodDescriptor, examples: int, seed_value: int | None) -> None:
    cluster, channels = fuzzed
    pool = pool_for(method, frozenset(b.node_id for b in cluster.brokers))
    fuzz(method, channels[method.containing_service.name], pool, cluster, examples, seed_value)


@pytest.mark.parametrize("method", RPCS, ids=[f"{m.containing_service.name}.{m.name}" for m in RPCS])
def test_no_request_makes_a_handler_raise(fuzzed, method: MethodDescriptor) -> None:
    fuzz_cluster(fuzzed, method, EXAMPLES_PER_RPC, None)


@pytest.mark.soak
@pytest.mark.parametrize("method", RPCS, ids=[f"{m.containing_service.name}.{m.name}" for m in RPCS])
def test_no_request_makes_a_handler_raise_soak(fuzzed, method: MethodDescriptor) -> None:
    fuzz_cluster(fuzzed, method, SOAK_EXAMPLES_PER_RPC, int(os.environ.get("KRAFTLOG_FUZZ_SEED", "1")))


class EpochAssertingBroker(broker_pb2_grpc.BrokerServicer):
    """The negative control: a Fetch handler with the bug the fuzzer exists for (a leader
    epoch of -2 raised an internal AssertionError, answered UNKNOWN)."""

    def Fetch(self, request, context):
        for topic in request.topics:
            for partition in topic.partitions:
                assert partition.current_leader_epoch >= -1, partition.current_leader_epoch
        return broker_pb2.FetchResponse()


def test_the_fuzzer_finds_a_handler_that_raises_on_one_boundary_value() -> None:
    """With the default budget, the fuzzer reaches a one-field boundary bug and reports it as
    an undocumented status carrying an internal error."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    broker_pb2_grpc.add_BrokerServicer_to_server(EpochAssertingBroker(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(AssertionError) as caught:
            fetch = next(m for m in RPCS if m.name == "Fetch")
            fuzz(fetch, channel, pool_for(fetch, frozenset()), None, EXAMPLES_PER_RPC, NEGATIVE_CONTROL_SEED)
    finally:
        server.stop(None)
    assert "gRPC status UNKNOWN" in str(caught.value) and "an internal error reached the client" in str(caught.value)
