"""Starting the Kafka listener inside a broker process: the broker's own ReplicaManager,
authorizer, metadata answer and producer ids behind it, its address registered with the
controllers so that every broker's Kafka Metadata names it."""

from __future__ import annotations

import dataclasses
from typing import Protocol

import structlog

from data_plane.broker.config import BrokerConfig, parse_host_port
from data_plane.broker.quotas_interceptor import QuotaEnforcer
from data_plane.groups.service import GroupCoordinatorService
from data_plane.kafka.acl_apis import AclApis
from data_plane.kafka.admin_apis import AdminApis
from data_plane.kafka.apis import KafkaApis
from data_plane.kafka.classic_groups import ClassicGroups
from data_plane.kafka.config_apis import ConfigApis
from data_plane.kafka.group_apis import GroupApis
from data_plane.kafka.listener import KafkaListener
from data_plane.kafka.sasl import SaslDoor
from data_plane.kafka.txn_apis import TxnApis
from data_plane.transactions.service import TransactionCoordinatorService
from server_common.tls import SslContexts

log = structlog.get_logger("kafka")


class _Broker(Protocol):  # what the listener needs of data_plane.broker.server.BrokerServer
    config: BrokerConfig
    metrics: object  # BrokerMetrics, or None with metrics off
    quotas: QuotaEnforcer  # shared with the gRPC door: one client, one measure
    replicas: object
    access: object
    metadata: object

    def metadata_response(self, topics: list[str] | None): ...

    async def init_producer_id(self): ...


async def serve_kafka(broker: _Broker, lifecycle, groups: GroupCoordinatorService,
                      transactions: TransactionCoordinatorService) -> KafkaListener | None:
    """Listen for Kafka clients when ``--kafka-listen`` is set, and set the endpoint the
    broker registers (None: no Kafka listener)."""
    config = broker.config
    if config.kafka_listen is None:
        return None

    def kafka_endpoint(broker_id: int) -> tuple[str, int] | None:
        registered = broker.metadata.image.brokers.get(broker_id)
        return parse_host_port(registered.kafka_endpoint) if registered is not None and registered.kafka_endpoint else None

    classic = ClassicGroups(groups)
    groups.classic_groups = classic.groups  # kraftlog's own ListGroups and DescribeGroups show them too
    group_apis = GroupApis(groups, kafka_endpoint, lambda: broker.metadata.image, classic)
    apis = KafkaApis(config.broker_id, broker.replicas, broker.access, broker.metadata_response, broker.init_producer_id,
                     kafka_endpoint, group_apis,
                     AdminApis(broker.access, lifecycle.create_topics, lifecycle.delete_topics),
                     ConfigApis(broker.access, lambda: broker.metadata.image, lifecycle.create_partitions, lifecycle.alter_configs,
                                kafka_endpoint, config.broker_id),
                     AclApis(broker.access, lambda: broker.metadata.image.acls, lifecycle.create_acls, lifecycle.delete_acls),
                     TxnApis(transactions, group_apis))
    host, port = config.kafka_listen
    bound_log = log.bind(broker_id=config.broker_id)
    # Required where the gRPC door requires it, by a flag or by client certificates (which this
    # door does not ask for): no door is laxer than the other.
    required = config.security.authentication_required or (config.tls is not None and config.tls.client_auth == "required")
    sasl = SaslDoor(lambda: broker.metadata.image.scram_users, required)
    # SASL_SSL: the client proves who it is with SCRAM, so no client certificate is asked for
    tls = SslContexts(dataclasses.replace(config.tls, client_auth="none"), "--kafka-listen").server if config.tls is not None else None
    listener = KafkaListener(apis, host, port, config.request_max_bytes, bound_log, sasl, broker.quotas, tls,
                             broker.metrics.kafka_answered if broker.metrics is not None else None)
    bound = await listener.start()
    advertised_host, advertised_port = config.kafka_advertised or (host, bound)
    lifecycle.kafka_endpoint = f"{advertised_host}:{advertised_port}"
    bound_log.info("kafka listener started", listen=f"{host}:{bound}", advertised=lifecycle.kafka_endpoint,
                   security_protocol=("SASL_SSL" if tls else "SASL_PLAINTEXT") if sasl.required else ("SSL" if tls else "PLAINTEXT"))
    return listener
