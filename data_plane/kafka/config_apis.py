"""CreatePartitions, DescribeConfigs, IncrementalAlterConfigs, AlterConfigs and DescribeCluster on the Kafka door.

Changes go to the active controller through the broker's controller link, after the ACL check
the controller makes of a gRPC caller (ALTER, ALTER_CONFIGS on the topic), made here for the
Kafka client's principal since the controller sees the broker's (as admin_apis.py does for
CreateTopics). Reads answer from this broker's metadata image with the controller's own
functions (`topic_admin.describe_configs`), so both doors describe a topic alike. Per
resource, as Kafka answers: a refused or failed one does not stop the others.

Only topics have configs here (a broker's settings are its command-line options): a broker
resource gets INVALID_REQUEST saying so. IncrementalAlterConfigs takes SET and DELETE (back
to the default); APPEND and SUBTRACT apply to Kafka's list-valued configs, which kraftlog's
topics do not have, and are refused with INVALID_CONFIG. The legacy AlterConfigs replaces a
topic's whole set of configs, as in Kafka: the same call with a DELETE for every key set and
not given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.admin_apis import Answer, forward, screened
from data_plane.kafka.entities import NO_THROTTLE, build, millis, response_type, sibling
from data_plane.kafka.error_codes import to_kafka as kafka_code
from kraftlog_proto import controller_pb2
from metadata_quorum.image import MetadataImage
from metadata_quorum.topic_admin import describe_configs
from server_common.authorization import AccessControl

ALTER_CONFIGS, DESCRIBE_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 33, 32, 37, 44, 60
TOPIC_RESOURCE = 2
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations kraftlog takes (APPEND 2, SUBTRACT 3: list configs)
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # Kafka's ConfigSource values
NOT_A_TOPIC = ("kraftlog keeps configs per topic only (a broker's settings are its command-line options, "
               "docs/operations.md): describe or alter a topic resource")


@dataclass
class ConfigApis:
    access: AccessControl
    image: Callable[[], MetadataImage]
    create_partitions: Callable[..., Awaitable[controller_pb2.CreatePartitionsResponse]]
    alter_configs: Callable[..., Awaitable[controller_pb2.AlterConfigsResponse]]
    kafka_endpoint: Callable[[int], tuple[str, int] | None]
    broker_id: int

    async def add_partitions(self, request):
        answers, wanted = screened(self.access, "alter", request.topics, "give only the new partition count",
                                   lambda t: controller_pb2.CreatePartitionsRequest.Topic(name=t.name, total_count=t.count))
        if wanted:
            answers.update(await forward(self.create_partitions, controller_pb2.CreatePartitionsRequest(
                topics=wanted, validate_only=request.validate_only), [t.name for t in wanted], millis(request.timeout)))
        out = response_type(request)
        entry = sibling(out, "CreatePartitionsTopicResult")
        return build(out, throttle_time=NO_THROTTLE, results=tuple(
            build(entry, name=t.name, error_code=answers[t.name].code, error_message=answers[t.name].message) for t in request.topics))

    async def describe(self, request):
        out = response_type(request)
        result_type, entry_type = sibling(out, "DescribeConfigsResult"), sibling(out, "DescribeConfigsResourceResult")
        documented = getattr(request, "include_documentation", False)
        results = []
        for resource in request.resources:
            code, message, entries = KafkaError.none, None, ()
            if resource.resource_type != TOPIC_RESOURCE:
                code, message = KafkaError.invalid_request, NOT_A_TOPIC
            elif (refused := self.access.first_refusal("describe_configs", "topic", (resource.resource_name,))) is not None:
                code, message = kafka_code(refused[0]), refused[1]
            else:
                [topic] = describe_configs(self.image(), controller_pb2.DescribeConfigsRequest(topics=[resource.resource_name])).topics
                code, message = kafka_code(topic.error_code), topic.error_message or None
                keys = resource.configuration_keys
                entries = tuple(
                    build(entry_type, name=e.key, value=e.value, read_only=False, is_default=e.is_default,
                          config_source=DEFAULT_CONFIG if e.is_default else DYNAMIC_TOPIC_CONFIG, is_sensitive=False,
                          synonyms=(), config_type=0, documentation=e.doc if documented else None)
                    for e in topic.entries if keys is None or e.key in keys)
            results.append(build(result_type, error_code=code, error_message=message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name, configs=entries))
        return build(out, throttle_time=NO_THROTTLE, results=tuple(results))

    async def alter(self, request):
        """IncrementalAlterConfigs: each named key SET or DELETEd, the others left alone."""
        return await self._alter(request, self._incremental_ops)

    async def replace(self, request):
        """The legacy AlterConfigs (aiokafka's ``alter_configs`` still sends it): the keys given
        are the topic's whole set, as in Kafka, so every other key set on the topic goes back
        to its default. Done as one AlterConfigs at the controller, SETs and DELETEs together,
        against the keys this broker's metadata image shows set."""
        return await self._alter(request, self._replacing_ops)

    @staticmethod
    def _incremental_ops(name: str, configs) -> list[controller_pb2.AlterConfigsRequest.Op] | Answer:
        if (listed := [c.name for c in configs if c.config_operation not in (SET, DELETE)]):
            return Answer(KafkaError.invalid_config, f"APPEND and SUBTRACT are for list-valued configs and {', '.join(listed)} "
                          "is not one: SET the whole value instead")
        return [_op(c.name, (c.value or "") if c.config_operation == SET else None) for c in configs]

    def _replacing_ops(self, name: str, configs) -> list[controller_pb2.AlterConfigsRequest.Op]:
        [topic] = describe_configs(self.image(), controller_pb2.DescribeConfigsRequest(topics=[name])).topics
        given = {c.name for c in configs}
        return [_op(c.name, c.value) for c in configs] + [_op(e.key, None) for e in topic.entries
                                                           if not e.is_default and e.key not in given]

    async def _alter(self, request, ops_for: Callable[[str, tuple], list[controller_pb2.AlterConfigsRequest.Op] | Answer]):
        """Per resource, as Kafka answers: a refused one does not stop the others."""
        answers: dict[str, Answer] = {}
        wanted = []
        for resource in request.resources:
            name = resource.resource_name
            if resource.resource_type != TOPIC_RESOURCE:
                answers[name] = Answer(KafkaError.invalid_request, NOT_A_TOPIC)
            elif (refused := self.access.first_refusal("alter_configs", "topic", (name,))) is not None:
                answers[name] = Answer(kafka_code(refused[0]), refused[1])
            elif isinstance(ops := ops_for(name, resource.configs), Answer):
                answers[name] = ops
            else:
                wanted.append(controller_pb2.AlterConfigsRequest.Topic(name=name, ops=ops))
        if wanted:
            answers.update(await forward(self.alter_configs, controller_pb2.AlterConfigsRequest(
                topics=wanted, validate_only=request.validate_only), [t.name for t in wanted], 10_000))
        out = response_type(request)
        entry = sibling(out, "AlterConfigsResourceResponse")
        return build(out, throttle_time=NO_THROTTLE, responses=tuple(
            build(entry, error_code=answers[r.resource_name].code, error_message=answers[r.resource_name].message,
                  resource_type=r.resource_type, resource_name=r.resource_name) for r in request.resources))

    async def describe_cluster(self, request):
        out = response_type(request)
        refused = self.access.first_refusal("describe", "cluster")
        image = self.image()
        brokers = []
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            endpoint = None if b.fenced else self.kafka_endpoint(b.broker_id)
            if endpoint is not None:
                brokers.append(build(sibling(out, "DescribeClusterBroker"), broker_id=b.broker_id, host=endpoint[0], port=endpoint[1],
                                     rack=b.rack or None))
        return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(refused[0]) if refused else KafkaError.none,
                     error_message=refused[1] if refused else None, cluster_id=image.cluster_id or "",
                     controller_id=self.broker_id,  # Kafka clients send controller-bound requests here; any broker forwards them
                     brokers=tuple(brokers) if not refused else (), cluster_authorized_operations=-2147483648,
                     endpoint_type=getattr(request, "endpoint_type", 1))


def _op(key: str, value: str | None) -> controller_pb2.AlterConfigsRequest.Op:
    """SET ``key`` to ``value``; None: DELETE it (back to the default)."""
    if value is None:
        return controller_pb2.AlterConfigsRequest.Op(key=key, op=controller_pb2.AlterConfigsRequest.DELETE)
    return controller_pb2.AlterConfigsRequest.Op(key=key, value=value, op=controller_pb2.AlterConfigsRequest.SET)
