"""Authentication and ACLs with real processes over mutual TLS (docs/security.md).

One controller and two brokers with ``--authentication-required --authorization``; the
brokers, the controller and the ``admin`` client certificate are super users. Two password
users, alice (WRITE and READ on the topic) and bob (nothing), call the brokers and the
controller through the admin's TLS channel with their own credentials, which name them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import NamedTuple

import grpc
import pytest

from data_plane.client import ClientSecurity
from data_plane.client.channels import broker_channels
from kraftlog_proto import broker_pb2, common_pb2, transaction_pb2
from metadata_quorum.controller_client import ControllerClient, ControllerError
from metadata_quorum.security_client import SecurityClient
from server_common.authorizer import AclBinding
from server_common.tls_certs import ADMIN_CLIENT, write_cluster_identities
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

TOPIC = "orders"
SUPERS = "User:admin,User:broker-1,User:broker-2,User:controller-1"
ARGS = ["--authentication-required", "--authorization", "--super-users", SUPERS]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("authz"), controllers=1, brokers=2, secure=True, controller_args=ARGS,
                       broker_args=[*ARGS, "--transaction-state-partitions", "1"], configure=issue_app_certificate) as running:
        running.create_topic(TOPIC, partitions=1, replication_factor=2)
        with SecurityClient(controllers_of(running), security=running.client_security) as admin:
            admin.upsert_user("alice", "alice-secret")
            admin.upsert_user("bob", "bob-secret")
            admin.create_acls([AclBinding("User:alice", "*", "topic", TOPIC, "literal", op, "allow") for op in ("write", "read")])
        yield running


def issue_app_certificate(cluster: TestCluster) -> None:
    """Before the nodes start: the cluster's identities again, from a new CA that also issues a
    client certificate ``app`` (a principal that is no super user, as an application's
    certificate would be)."""
    write_cluster_identities(cluster.security_dir, [n.name for n in cluster.nodes], (ADMIN_CLIENT, "app"))


def app_certificate(cluster: TestCluster) -> ClientSecurity:
    files = cluster.security_dir
    return ClientSecurity(ca_file=files / "ca.crt", cert_file=files / "app.crt", key_file=files / "app.key")


def controllers_of(cluster: TestCluster) -> str:
    return ",".join(c.address for c in cluster.controllers)


def as_user(cluster: TestCluster, name: str, password: str):
    return dataclasses.replace(cluster.client_security, username=name, password=password)


def broker_stub(cluster: TestCluster, name: str, password: str):
    return broker_channels(as_user(cluster, name, password)).stub(cluster.brokers[0].address)


def leader_stub(cluster: TestCluster, name: str, password: str):
    """A stub to the partition's leader (Produce and Fetch are answered there)."""
    admin_pool = broker_channels(cluster.client_security)
    answer = admin_pool.stub(cluster.brokers[0].address).Metadata(broker_pb2.MetadataRequest(topics=[TOPIC]), timeout=10)
    leader = answer.topics[0].partitions[0].leader_id
    address = next(f"{b.host}:{b.port}" for b in answer.brokers if b.broker_id == leader)
    return broker_channels(as_user(cluster, name, password)).stub(address)


def produce(stub, transactional_id: str = "") -> broker_pb2.PartitionProduceResponse:
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, transactional_id=transactional_id, topics=[broker_pb2.TopicProduceData(
        topic=TOPIC, partitions=[broker_pb2.PartitionProduceData(partition=0, records=[common_pb2.Record(value=b"v")])])])
    return stub.Produce(request, timeout=15).topics[0].partitions[0]


def fetch(stub) -> broker_pb2.FetchPartitionResponse:
    request = broker_pb2.FetchRequest(max_wait_ms=0, topics=[broker_pb2.FetchTopic(topic=TOPIC, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=0)])])
    return stub.Fetch(request, timeout=10).topics[0].partitions[0]


def test_wrong_password_is_refused_by_every_service(cluster: TestCluster) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        broker_stub(cluster, "alice", "wrong").Metadata(broker_pb2.MetadataRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED and "kraftlog users create" in refused.value.details()
    with ControllerClient(controllers_of(cluster), security=as_user(cluster, "alice", "wrong"), timeout_s=10) as controller:
        with pytest.raises(ControllerError, match="UNAUTHENTICATED"):
            controller.describe_cluster()
    with SecurityClient(controllers_of(cluster), security=as_user(cluster, "nobody", "x"), timeout_s=10) as security:
        with pytest.raises(ControllerError, match="UNAUTHENTICATED"):
            security.list_users()


def test_write_and_read_need_their_acls(cluster: TestCluster) -> None:
    alice, bob = leader_stub(cluster, "alice", "alice-secret"), leader_stub(cluster, "bob", "bob-secret")
    assert produce(alice).error_code == common_pb2.NONE  # acks=all: the follower broker replicated it as a super user
    refused = produce(bob)
    assert refused.error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED
    assert "User:bob" in refused.error_message and "WRITE" in refused.error_message and "kraftlog acls create" in refused.error_message
    assert fetch(alice).error_code == common_pb2.NONE
    assert fetch(bob).error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED


def test_a_produce_carrying_a_transactional_id_needs_write_on_the_id(cluster: TestCluster) -> None:
    """alice may WRITE the topic; a Produce naming a transactional id also needs WRITE on the
    id (Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and is appended once an ACL allows it."""
    from data_plane.client import Consumer, Producer

    alice = leader_stub(cluster, "alice", "alice-secret")
    refused = produce(alice, "alice-tx")
    assert refused.error_code == common_pb2.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert all(part in refused.error_message for part in (
        "User:alice", "WRITE transactional_id 'alice-tx'",
        "kraftlog acls create --principal User:alice --operation write --transactional-id alice-tx")), refused.error_message
    before = produce(alice)  # the topic's ACL alone still allows a plain write
    assert before.error_code == common_pb2.NONE, before.error_message
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.create_acls([AclBinding("User:alice", "*", "transactional_id", "alice-tx", "literal", "write", "allow")])
    appended = wait_for(lambda: (lambda a: a if a.error_code == common_pb2.NONE else None)(produce(alice, "alice-tx")), 10,
                        "the leader to apply the transactional id's ACL")
    assert appended.base_offset == before.base_offset + 1
    # The same principal runs a whole transaction with the Python producer (coordinator and leaders).
    with Producer(cluster.bootstrap, security=as_user(cluster, "alice", "alice-secret"), transactional_id="alice-tx",
                  max_block_ms=60_000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TOPIC, value=b"in-a-transaction", partition=0)
        producer.commit_transaction()
    with Consumer(cluster.bootstrap, security=cluster.client_security, isolation_level="read_committed", fetch_max_wait_ms=100) as consumer:
        consumer.assign([(TOPIC, 0)])
        consumer.seek((TOPIC, 0), appended.base_offset + 1)
        read: list[bytes] = []
        wait_for(lambda: read.extend(r.value for r in consumer.poll(200)) or bool(read), 30, "the committed record")
    assert read[0] == b"in-a-transaction"


def test_a_client_posing_as_a_follower_is_refused(cluster: TestCluster) -> None:
    alice = leader_stub(cluster, "alice", "alice-secret")
    request = broker_pb2.ReplicaFetchRequest(replica_id=2, broker_epoch=1, max_wait_ms=0,
                                             partitions=[broker_pb2.ReplicaFetchPartition(topic=TOPIC, partition=0, fetch_offset=0)])
    with pytest.raises(grpc.RpcError) as refused:
        list(alice.ReplicaFetch(iter([request]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "CLUSTER_AUTHORIZATION_FAILED" in refused.value.details()


def test_admin_rpcs_need_acls(cluster: TestCluster) -> None:
    with ControllerClient(controllers_of(cluster), security=as_user(cluster, "bob", "bob-secret"), timeout_s=10) as controller:
        with pytest.raises(ControllerError, match="User:bob is not authorized to DELETE topic 'orders'"):
            controller.delete_topics([TOPIC])


def test_metadata_hides_a_topic_until_an_acl_allows_it_on_the_live_connection(cluster: TestCluster) -> None:
    bob = broker_stub(cluster, "bob", "bob-secret")
    names = lambda: [t.name for t in bob.Metadata(broker_pb2.MetadataRequest(), timeout=10).topics]
    assert TOPIC not in names()
    assert TOPIC in [t.name for t in broker_stub(cluster, "alice", "alice-secret").Metadata(broker_pb2.MetadataRequest(), timeout=10).topics]
    grant = AclBinding("User:bob", "*", "topic", TOPIC, "literal", "describe", "allow")
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.create_acls([grant])
        granted_at = time.monotonic()
        wait_for(lambda: TOPIC in names(), 10, "bob sees the topic on the same connection")
        print(f"ACL visible on the live connection after {time.monotonic() - granted_at:.3f} s")
        admin.delete_acls([grant])
    wait_for(lambda: TOPIC not in names(), 10, "bob no longer sees the topic once the ACL is deleted")


def test_a_group_needs_read_on_the_group_and_consume_needs_read_on_the_topic(cluster: TestCluster) -> None:
    from kraftlog_proto import group_pb2, group_pb2_grpc
    from server_common.channel_pool import open_channel

    def heartbeat(name: str, password: str) -> group_pb2.ConsumerGroupHeartbeatResponse:
        security = as_user(cluster, name, password) if name != "admin" else cluster.client_security
        with open_channel(cluster.brokers[0].address, security.channel_credentials()) as channel:
            request = group_pb2.ConsumerGroupHeartbeatRequest(group_id="billing", member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=[TOPIC])
            return group_pb2_grpc.GroupCoordinatorStub(channel).ConsumerGroupHeartbeat(request, metadata=security.call_metadata(), timeout=10)

    refused = heartbeat("bob", "bob-secret")
    assert refused.error_code == common_pb2.GROUP_AUTHORIZATION_FAILED and "User:bob" in refused.error_message
    assert heartbeat("admin", "").error_code != common_pb2.GROUP_AUTHORIZATION_FAILED  # the positive control: a super user passes the check
    bob = leader_stub(cluster, "bob", "bob-secret")
    opened = broker_pb2.ConsumeRequest(open=broker_pb2.ConsumeOpen(topics=[broker_pb2.ConsumeTopic(topic=TOPIC, partitions=[broker_pb2.ConsumePartition(partition=0, offset=0)])]))
    with pytest.raises(grpc.RpcError) as stream_refused:
        next(iter(bob.Consume(iter([opened]), timeout=10)))
    assert stream_refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "TOPIC_AUTHORIZATION_FAILED" in stream_refused.value.details()


def test_a_topic_named_without_describe_is_refused_by_name_and_the_client_says_why(cluster: TestCluster) -> None:
    from data_plane.client import KraftlogError, Producer

    named = broker_stub(cluster, "bob", "bob-secret").Metadata(broker_pb2.MetadataRequest(topics=[TOPIC, "no-such-topic"]), timeout=10)
    assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
        (TOPIC, common_pb2.TOPIC_AUTHORIZATION_FAILED, 0), ("no-such-topic", common_pb2.TOPIC_AUTHORIZATION_FAILED, 0)]  # existence not told
    # Not idempotent: bob may not get a producer id either (CLUSTER_AUTHORIZATION_FAILED, fatal), and
    # which refusal reached the producer first would depend on timing.
    with Producer(cluster.bootstrap, security=as_user(cluster, "bob", "bob-secret"), max_block_ms=10_000, enable_idempotence=False) as producer:
        with pytest.raises(KraftlogError) as refused:
            producer.send(TOPIC, value=b"v").result(timeout=15)
    assert refused.value.code == "TOPIC_AUTHORIZATION_FAILED" and not refused.value.retriable
    assert all(part in str(refused.value) for part in ("User:bob", "DESCRIBE", "kraftlog acls create")), refused.value


def test_write_on_a_topic_allows_idempotent_produce_without_a_cluster_acl(cluster: TestCluster) -> None:
    """KIP-679: alice has WRITE on the topic and nothing on the cluster."""
    from data_plane.client import Producer

    with Producer(cluster.bootstrap, security=as_user(cluster, "alice", "alice-secret"), enable_idempotence=True) as producer:
        assert producer.send(TOPIC, value=b"idempotent").result(timeout=30).offset >= 0
    assert broker_stub(cluster, "bob", "bob-secret").InitProducerId(broker_pb2.InitProducerIdRequest(), timeout=10).error_code == common_pb2.CLUSTER_AUTHORIZATION_FAILED


def test_a_password_user_runs_a_consumer_group_and_the_group_admin(cluster: TestCluster) -> None:
    """Every coordinator call carries the user's credentials, not only the broker calls: alice
    (READ on the topic and on her group) joins, reads, commits, and reads her offsets back; bob,
    on the same admin TLS certificate, is refused the group as bob (not let in as the admin)."""
    from data_plane.client import Consumer, KraftlogError, Producer
    from data_plane.client.group_admin import GroupAdmin

    alice = as_user(cluster, "alice", "alice-secret")
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.create_acls([AclBinding("User:alice", "*", "group", "alice-group", "literal", "read", "allow")])
    with Producer(cluster.bootstrap, security=alice) as producer:
        producer.send(TOPIC, value=b"for-the-group").result(timeout=30)
    read: list[int] = []
    with Consumer(cluster.bootstrap, security=alice, group_id="alice-group", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.subscribe([TOPIC])
        wait_for(lambda: read.extend(r.offset for r in consumer.poll(100)) is None and bool(read), 30, "alice's group member reads the topic")
        committed = consumer.commit()
    assert committed[(TOPIC, 0)].offset == read[-1] + 1
    with GroupAdmin(cluster.bootstrap, security=alice) as groups:
        assert groups.committed_offsets("alice-group", [(TOPIC, 0)]) == {(TOPIC, 0): read[-1] + 1}
    with GroupAdmin(cluster.bootstrap, security=as_user(cluster, "bob", "bob-secret")) as groups:
        with pytest.raises(KraftlogError) as refused:
            groups.committed_offsets("alice-group", [(TOPIC, 0)])
    assert refused.value.code == "GROUP_AUTHORIZATION_FAILED" and "User:bob" in str(refused.value), refused.value


def test_upsert_user_is_authorized_before_any_hashing_and_its_iterations_are_bounded(cluster: TestCluster) -> None:
    """PBKDF2 with a count the caller picks was the costliest thing a signed-in user could ask of
    the active controller: bob (no ACL) is refused before anything is hashed, even with 2^31-1
    iterations, and the admin's 2^31-1 is refused as out of range instead of hashed for hours.
    Before the bound, each of these calls ran out of time while the controller's CPU was pinned."""
    huge = 2**31 - 1
    with SecurityClient(controllers_of(cluster), security=as_user(cluster, "bob", "bob-secret"), timeout_s=10) as bob:
        with pytest.raises(ControllerError) as refused:
            bob.upsert_user("mallory", "m-secret", iterations=huge)
    assert refused.value.code == common_pb2.CLUSTER_AUTHORIZATION_FAILED and "User:bob is not authorized to ALTER" in str(refused.value), refused.value
    with SecurityClient(controllers_of(cluster), security=cluster.client_security, timeout_s=10) as admin:
        with pytest.raises(ControllerError) as out_of_range:
            admin.upsert_user("carol", "c-secret", iterations=huge)
        assert out_of_range.value.code == common_pb2.INVALID_REQUEST and "between 4096 and 16384" in str(out_of_range.value), out_of_range.value
        admin.upsert_user("carol", "c-secret", iterations=16384)  # the top of the range is accepted
        assert {u.name: u.iterations for u in admin.list_users()}["carol"] == 16384


def test_asking_for_every_topic_answers_only_the_topics_the_caller_may_describe(cluster: TestCluster) -> None:
    """An empty topic list in DescribeConfigs and OffsetFetch, and DescribeCluster's topic list,
    mean "every topic I may see", never every topic: before, the permission check looped over
    the names given (none) and bob read every topic's configuration, alice the group's offsets
    of a topic she may not DESCRIBE, and anyone every topic's id, leaders and ISR."""
    from data_plane.client.group_admin import GroupAdmin
    from data_plane.client.group_membership import offset_commit_request

    secret = "payroll"
    cluster.create_topic(secret, partitions=1, replication_factor=1)
    with GroupAdmin(cluster.bootstrap, security=cluster.client_security) as groups:  # an admin commit, as a reset does
        groups.link("audit").call("OffsetCommit", offset_commit_request("audit", "", -1, {(TOPIC, 0): (0, -1), (secret, 0): (0, -1)}))
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.create_acls([AclBinding("User:alice", "*", "group", "audit", "literal", "describe", "allow"),
                           AclBinding("User:bob", "*", "topic", TOPIC, "literal", "describe_configs", "allow")])
    with ControllerClient(controllers_of(cluster), security=as_user(cluster, "bob", "bob-secret"), timeout_s=10) as bob:
        assert wait_for(lambda: set(bob.describe_configs([])) or None, 10, "bob's ACL to apply") == {TOPIC}
        assert [t.name for t in bob.describe_cluster().topics] == []  # DESCRIBE_CONFIGS does not imply DESCRIBE
    with ControllerClient(controllers_of(cluster), security=as_user(cluster, "alice", "alice-secret"), timeout_s=10) as alice:
        assert [t.name for t in alice.describe_cluster().topics] == [TOPIC]  # READ and WRITE imply DESCRIBE
    with GroupAdmin(cluster.bootstrap, security=as_user(cluster, "alice", "alice-secret")) as groups:
        assert wait_for(lambda: groups.committed_offsets("audit"), 10, "alice's group ACL to apply") == {(TOPIC, 0): 0}
    with ControllerClient(controllers_of(cluster), security=cluster.client_security, timeout_s=10) as admin_client:
        assert {TOPIC, secret} <= set(admin_client.describe_configs([])) and {TOPIC, secret} <= {t.name for t in admin_client.describe_cluster().topics}


def test_a_group_member_is_never_assigned_a_topic_it_may_not_describe(cluster: TestCluster) -> None:
    """alice may READ her group and the topic, not 'ledger': subscribing to it by name, or to
    everything by the pattern '.*', she is assigned the topic's partitions only. Before, the
    coordinator resolved subscriptions against every topic and handed her ledger's partitions."""
    from data_plane.client.group_admin import GroupAdmin
    from kraftlog_proto import group_pb2

    cluster.create_topic("ledger", partitions=2, replication_factor=1)
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.create_acls([AclBinding("User:alice", "*", "group", "snoop", "literal", "read", "allow")])

    def assigned(member: str, **subscription) -> set[str]:
        request = group_pb2.ConsumerGroupHeartbeatRequest(group_id="snoop", member_id=member, member_epoch=0, rebalance_timeout_ms=1000, **subscription)
        with GroupAdmin(cluster.bootstrap, security=as_user(cluster, "alice", "alice-secret")) as groups:
            answer = wait_for(lambda: (a := groups.link("snoop").call("ConsumerGroupHeartbeat", request)).error_code == common_pb2.NONE and a, 10,
                              "alice's group ACL to apply")
        return {t.topic for t in answer.assignment}

    assert assigned("by-name", subscribed_topic_names=[TOPIC, "ledger"]) == {TOPIC}
    assert "ledger" not in assigned("by-pattern", subscribed_topic_regex=".*")


# Methods an unprivileged principal may call with an empty request and get an answer, not a
# refusal, each with why that answer reveals nothing it may not DESCRIBE. The test below also
# checks that no answer names a topic or group it may not see. A method missing from here that
# is not refused fails the test: a new method must be refused or argued for here.
ANSWERS_ANYONE = {
    # Checked per topic, partition or id named: an empty request names none, and its answer is empty.
    **dict.fromkeys(["Broker.Produce", "Broker.ProduceStream", "Broker.Fetch", "Broker.ListOffsets", "Broker.OffsetForLeaderEpoch", "Broker.DeleteRecords",
                     "GroupCoordinator.DescribeGroups", "GroupCoordinator.DeleteGroups", "TransactionCoordinator.DescribeTransactions",
                     "ControllerService.CreateTopics", "ControllerService.DeleteTopics", "ControllerService.CreatePartitions",
                     "ControllerService.AlterConfigs"], "per named resource; nothing named, nothing answered"),
    # An empty topic list means "the topics I may see": none for this user.
    "ControllerService.DescribeConfigs": "configurations of the topics the caller may DESCRIBE_CONFIGS only",
    # Malformed before any check: the refusal says what is missing and nothing about the cluster.
    "Broker.Consume": "INVALID_ARGUMENT: a stream must open with partitions, each then checked for READ",
    "TransactionCoordinator.InitProducerId": "INVALID_REQUEST: no transactional id, then WRITE on the id",
    "TransactionCoordinator.AddPartitionsToTxn": "INVALID_REQUEST: no transactional id, then WRITE on the id",
    "TransactionCoordinator.EndTxn": "INVALID_REQUEST: no transactional id, then WRITE on the id",
    # Discovery every client needs before it can do anything: addresses of brokers and
    # controllers, the cluster id, which voter leads; topics only those the caller may DESCRIBE.
    "Broker.Metadata": "brokers and the describable topics (Kafka's Metadata)",
    "GroupCoordinator.FindCoordinator": "which broker coordinates a group or transactional id (Kafka's FindCoordinator)",
    "ControllerService.DescribeCluster": "brokers, controllers and the describable topics",
    "ControllerService.DescribeQuorum": "the voters and their Raft state: how clients find the active controller",
}


class Outcome(NamedTuple):
    refused: bool
    text: str  # the answer (text format), or the status and its details
    status: bool  # ended with a gRPC status, not an answer


def call_every_method(cluster: TestCluster, security, extra: dict[str, tuple[str, object]] | None = None) -> dict[str, Outcome]:
    """Every method of every service, from the .proto descriptors, called once with an empty
    request as ``security``'s principal (brokers' services at broker 1, the controllers' at
    controller 1): {"Service.Method": its Outcome}. ``extra``: {name: ("Service.Method",
    request)}, further calls with a request of their own. A stream gets one request, and one
    answer (or the refusal) is read."""
    from google.protobuf import text_format
    from google.protobuf.message_factory import GetMessageClass

    from kraftlog_proto import controller_pb2, group_pb2, security_pb2
    from server_common.authorization import REFUSAL_CODES
    from server_common.channel_pool import open_channel

    refusal_codes = set(REFUSAL_CODES.values())
    calls: list[tuple[str, str, object, object]] = []  # (name, address, method descriptor, request)
    for module, address in ((broker_pb2, cluster.brokers[0].address), (group_pb2, cluster.brokers[0].address),
                            (transaction_pb2, cluster.brokers[0].address), (controller_pb2, cluster.controllers[0].address),
                            (security_pb2, cluster.controllers[0].address)):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                calls.append((f"{service.name}.{method.name}", address, method, GetMessageClass(method.input_type)()))
                calls += [(name, address, method, request) for name, (target, request) in (extra or {}).items()
                          if target == f"{service.name}.{method.name}"]
    outcomes: dict[str, Outcome] = {}
    channels = {address: open_channel(address, security.channel_credentials()) for address in {address for _, address, _, _ in calls}}
    for name, address, method, request in calls:
        with contextlib.nullcontext(channels[address]) as channel:
            request_type, response_type = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
            kind = {(False, False): channel.unary_unary, (True, True): channel.stream_stream,
                    (False, True): channel.unary_stream, (True, False): channel.stream_unary}[(method.client_streaming, method.server_streaming)]
            call = kind(f"/{method.containing_service.full_name}/{method.name}", request_serializer=request_type.SerializeToString,
                        response_deserializer=response_type.FromString)
            try:
                answer = call(iter([request]) if method.client_streaming else request, metadata=security.call_metadata(), timeout=5)
                answer = next(iter(answer)) if method.server_streaming else answer
            except grpc.RpcError as refused:
                outcomes[name] = Outcome(refused.code() == grpc.StatusCode.PERMISSION_DENIED, f"{refused.code().name}: {refused.details()}", True)
                continue
            outcomes[name] = Outcome(getattr(answer, "error_code", 0) in refusal_codes, text_format.MessageToString(answer), False)
    for channel in channels.values():
        channel.close()
    return outcomes


# What a caller might hope a name field takes as "everything" or "everything like this": a
# glob, a regex, and prefixes of hidden names (a topic's, a group's, the internal topics').
PATTERNS = ("*", ".*", "or", "or*", "al", "__")


def pattern_variants() -> dict[str, tuple[str, object]]:
    """For every method, from the .proto descriptors, and every field of its request that
    names something (a string, a list of strings or of entries): one request per pattern in
    ``PATTERNS``, that field holding the pattern (a list: one entry, a message's string fields
    all holding it and naming partition 0): {"Service.Method(field=pattern)": ("Service.Method",
    request)}, for ``call_every_method``'s ``extra``."""
    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message_factory import GetMessageClass

    from kraftlog_proto import controller_pb2, group_pb2, security_pb2

    def fill(message, pattern: str, depth: int = 0) -> None:
        for field in message.DESCRIPTOR.fields:
            repeated = field.is_repeated
            if field.type == FieldDescriptor.TYPE_STRING:
                getattr(message, field.name).append(pattern) if repeated else setattr(message, field.name, pattern)
            elif repeated and field.type == FieldDescriptor.TYPE_INT32:
                getattr(message, field.name).append(0)
            elif repeated and field.type == FieldDescriptor.TYPE_MESSAGE and depth < 3 and not field.message_type.GetOptions().map_entry:
                fill(getattr(message, field.name).add(), pattern, depth + 1)

    variants: dict[str, tuple[str, object]] = {}
    for module in (broker_pb2, group_pb2, transaction_pb2, controller_pb2, security_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                request_type = GetMessageClass(method.input_type)
                for field in method.input_type.fields:
                    named = field.type == FieldDescriptor.TYPE_STRING or (
                        field.is_repeated and field.type == FieldDescriptor.TYPE_MESSAGE and not field.message_type.GetOptions().map_entry)
                    if not named:
                        continue
                    for pattern in PATTERNS:
                        request = request_type()
                        if field.type == FieldDescriptor.TYPE_MESSAGE:
                            fill(getattr(request, field.name).add(), pattern)
                        elif field.is_repeated:
                            getattr(request, field.name).append(pattern)
                        else:
                            setattr(request, field.name, pattern)
                        name = f"{service.name}.{method.name}"
                        variants[f"{name}({field.name}={pattern})"] = (name, request)
    return variants


def test_every_method_refuses_an_unprivileged_user_or_reveals_nothing(cluster: TestCluster) -> None:
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.upsert_user("eve", "eve-secret")
    eve = as_user(cluster, "eve", "eve-secret")
    wait_for(lambda: broker_stub(cluster, "eve", "eve-secret").Metadata(broker_pb2.MetadataRequest(), timeout=10), 10, "eve known to the broker")
    with ControllerClient(controllers_of(cluster), security=cluster.client_security, timeout_s=10) as admin_client:
        hidden = {t.name for t in admin_client.describe_cluster().topics} | {"billing", "alice-group", "audit", "snoop"}  # eve may DESCRIBE none
    variants = pattern_variants()
    assert "Broker.Metadata(topics=*)" in variants and "GroupCoordinator.DescribeGroups(group_ids=.*)" in variants
    outcomes = call_every_method(cluster, eve, variants)
    assert set(variants) <= set(outcomes)
    revealed = {}
    for name, outcome in outcomes.items():  # a refusal's details must not name them at all; an answer not as a value
        found = [n for n in hidden if (n if outcome.status else f'"{n}"') in outcome.text]
        if found:
            revealed[name] = (found, outcome.text)
    assert not revealed, revealed
    wildcard_advice = {name: o.text for name, o in outcomes.items() if any(f"--{kind} *`" in o.text for kind in ("topic", "group", "transactional-id"))}
    assert not wildcard_advice, wildcard_advice  # a refusal of the name '*' never advises an ACL on '*', which allows every one
    unexpected = {k: v for k, v in outcomes.items() if not v.refused and k.split("(")[0] not in ANSWERS_ANYONE}
    assert not unexpected, unexpected


# Methods an ordinary client may be allowed by ACLs. Every other method, and the variants
# below, serves the cluster's own nodes (brokers registering, heartbeating, following the
# metadata log and replicating; coordinators writing markers) and needs CLUSTER_ACTION, which
# no client needs: the test below gives a client every other permission and checks that each
# one is refused. A method added later is a node's until it is argued onto this list.
CLIENT_METHODS = {
    # produce, read and look up
    "Broker.Produce", "Broker.ProduceStream", "Broker.Fetch", "Broker.Consume", "Broker.ListOffsets", "Broker.OffsetForLeaderEpoch",
    "Broker.Metadata", "Broker.InitProducerId", "Broker.DeleteRecords",
    # operators' reads of a broker's logs (DESCRIBE on the cluster)
    "Broker.DescribeLogs",
    # consumer groups and transactions, as a client's producer and consumer use them
    "GroupCoordinator.FindCoordinator", "GroupCoordinator.ConsumerGroupHeartbeat", "GroupCoordinator.OffsetCommit",
    "GroupCoordinator.OffsetFetch", "GroupCoordinator.TxnOffsetCommit", "GroupCoordinator.ListGroups", "GroupCoordinator.DescribeGroups",
    "GroupCoordinator.DeleteGroups", "GroupCoordinator.OffsetDelete",
    "TransactionCoordinator.InitProducerId", "TransactionCoordinator.AddPartitionsToTxn", "TransactionCoordinator.EndTxn",
    "TransactionCoordinator.ListTransactions", "TransactionCoordinator.DescribeTransactions",
    # administration, each behind its own ACL (docs/security.md, Which call needs what)
    "ControllerService.CreateTopics", "ControllerService.DeleteTopics", "ControllerService.CreatePartitions",
    "ControllerService.AlterConfigs", "ControllerService.DescribeConfigs", "ControllerService.DescribeCluster",
    "ControllerService.DescribeQuorum", "ControllerService.ElectLeaders", "ControllerService.AlterPartitionReassignments",
    "ControllerService.ListPartitionReassignments", "ControllerService.AlterClientQuotas", "ControllerService.DescribeClientQuotas",
    "ControllerService.AddController", "ControllerService.RemoveController",  # ALTER on the cluster, as kraftlog quorum add-controller
    "SecurityAdmin.UpsertUser", "SecurityAdmin.DeleteUser", "SecurityAdmin.ListUsers", "SecurityAdmin.CreateAcls",
    "SecurityAdmin.DeleteAcls", "SecurityAdmin.ListAcls",
}
# Nodes' uses of client methods, each refused to a client as the node-only methods are.
NODE_VARIANTS = {
    # a follower repairing a damaged range reads from any replica, not only the leader
    "Broker.Fetch(repair_read)": ("Broker.Fetch", broker_pb2.FetchRequest(repair_read=True, max_wait_ms=0, topics=[
        broker_pb2.FetchTopic(topic=TOPIC, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=0)])])),
    # a partition leader asks the coordinator whether a partition is in a transaction (KIP-890)
    "TransactionCoordinator.AddPartitionsToTxn(verify_only)": ("TransactionCoordinator.AddPartitionsToTxn", transaction_pb2.AddPartitionsToTxnRequest(
        transactional_id="service-tx", verify_only=True, topics=[transaction_pb2.TxnTopicPartitions(topic=TOPIC, partitions=[0])])),
    # a partition leader adds a producer's partition to its transaction (KIP-890 part 2)
    "TransactionCoordinator.AddPartitionsToTxn(add_for_produce)": ("TransactionCoordinator.AddPartitionsToTxn", transaction_pb2.AddPartitionsToTxnRequest(
        transactional_id="service-tx", add_for_produce=True, topics=[transaction_pb2.TxnTopicPartitions(topic=TOPIC, partitions=[0])])),
}
# Every permission a client can be given, short of CLUSTER_ACTION (and ALL on the cluster, which
# includes it): everything on every topic, group and transactional id, and the cluster's
# DESCRIBE, CREATE, IDEMPOTENT_WRITE and DESCRIBE_CONFIGS.
EVERY_CLIENT_PERMISSION = [
    *((resource, "all") for resource in ("topic", "group", "transactional_id")),
    *(("cluster", operation) for operation in ("describe", "create", "idempotent_write", "describe_configs")),
]


def test_node_only_methods_refuse_a_client_with_every_other_permission(cluster: TestCluster) -> None:
    """A password user and a client certificate of the cluster's CA, each allowed everything a
    client can be allowed, are refused every method and variant the cluster's own nodes use
    (RegisterBroker, BrokerHeartbeat, StreamMetadata, BrokerSession, AlterPartition,
    AllocateProducerIds, ReplicaFetch, WriteTxnMarkers, repair reads, verify_only, add_for_produce), from the
    .proto descriptors; a broker's own identity is served them (the positive control)."""
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.upsert_user("service", "service-secret")
        admin.create_acls([AclBinding(principal, "*", resource, "*" if resource != "cluster" else "kraftlog-cluster", "literal", operation, "allow")
                           for principal in ("User:service", "User:app") for resource, operation in EVERY_CLIENT_PERMISSION])
    service = as_user(cluster, "service", "service-secret")
    wait_for(lambda: broker_stub(cluster, "service", "service-secret").Metadata(broker_pb2.MetadataRequest(topics=[TOPIC]), timeout=10)
             .topics[0].error_code == common_pb2.NONE, 10, "the service's ACLs applied on the broker")
    for identity in (service, app_certificate(cluster)):
        outcomes = call_every_method(cluster, identity, NODE_VARIANTS)
        node_only = {name for name in outcomes if name not in CLIENT_METHODS}
        assert set(NODE_VARIANTS) <= node_only and {"ControllerService.RegisterBroker", "Broker.ReplicaFetch"} <= node_only
        served = {name: outcomes[name].text for name in node_only if not outcomes[name].refused}
        assert not served, (identity, served)
        assert all("CLUSTER_ACTION" in outcomes[name].text for name in node_only), {n: outcomes[n].text for n in node_only}
    broker = ClientSecurity(ca_file=cluster.security_dir / "ca.crt", cert_file=cluster.security_dir / "broker-1.crt",
                            key_file=cluster.security_dir / "broker-1.key")
    as_broker = call_every_method(cluster, broker, NODE_VARIANTS)
    assert not as_broker["ControllerService.AllocateProducerIds"].refused and not as_broker["Broker.WriteTxnMarkers"].refused, as_broker


def test_describing_a_group_that_holds_a_topic_the_caller_may_not_see_is_refused(cluster: TestCluster) -> None:
    """alice may DESCRIBE the group 'mixed', whose member (the admin) is assigned 'vault', a
    topic alice may not see: the description would show its name and partitions, so it is
    refused as a whole without naming it (Kafka's ConsumerGroupDescribe); the admin sees it."""
    from data_plane.client.group_admin import GroupAdmin
    from kraftlog_proto import group_pb2

    cluster.create_topic("vault", partitions=1, replication_factor=1)
    with SecurityClient(controllers_of(cluster), security=cluster.client_security) as admin:
        admin.create_acls([AclBinding("User:alice", "*", "group", "mixed", "literal", "describe", "allow")])
    with GroupAdmin(cluster.bootstrap, security=cluster.client_security) as groups:
        joined = groups.link("mixed").call("ConsumerGroupHeartbeat", group_pb2.ConsumerGroupHeartbeatRequest(
            group_id="mixed", member_id="admin-member", member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=["vault"]))
        assert {t.topic for t in joined.assignment} == {"vault"}
        assert [m.member_id for m in groups.describe_group("mixed").members] == ["admin-member"]
    with GroupAdmin(cluster.bootstrap, security=as_user(cluster, "alice", "alice-secret")) as groups:
        request = group_pb2.DescribeGroupsRequest(group_ids=["mixed"])
        answer = wait_for(lambda: groups.link("mixed").call("DescribeGroups", request, error_of=lambda a: common_pb2.NONE), 10,
                          "alice's group ACL to apply")  # until then: PERMISSION_DENIED
    assert answer.groups[0].error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED, answer
    assert "User:alice" in answer.groups[0].error_message and "vault" not in str(answer), answer
