"""The broker process: wires storage, metadata, the lifecycle with the controller and the gRPC
server together, runs housekeeping timers, and shuts down cleanly on SIGTERM/SIGINT.

Startup order matters: logs are recovered before the broker registers, and the data plane
listens before metadata arrives (requests for partitions not yet known get retriable errors).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import grpc
import structlog

from data_plane.broker.config import BrokerConfig, add_arguments, from_args
from data_plane.broker.broker_metrics import BrokerMetrics
from data_plane.broker.controller_link import BrokerLifecycleManager, MetadataFollower
from data_plane.broker.damage_repair import DamageRepairer
from data_plane.broker.group_lag_export import EndOffsets, export_group_lag
from data_plane.partition_errors import PartitionError, to_wire
from data_plane.broker.isr_updates import AlterPartitionSender
from data_plane.broker.offline_recovery import OfflineRecovery
from data_plane.broker.partition import Partition
from data_plane.broker.quotas import QuotaAccounts
from data_plane.broker.quotas_interceptor import QuotaEnforcer
from server_common.authentication import Authenticator
from server_common.authorization import AccessControl
from data_plane.broker.replica_fetcher import ReplicaFetcherManager
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.broker.service import BrokerService
from data_plane.broker.coordinators import serve_groups, serve_transactions
from data_plane.kafka.wiring import serve_kafka
from server_common.errors import ErrorCode
from data_plane.storage import LogManager, PartitionLog, fault_injection
from data_plane.storage.file_handles import HANDLES
from data_plane.storage.handle_budget import handle_budget, replica_capacity
from data_plane.broker.txn_verification import TxnVerifier
from kraftlog_proto import broker_pb2, broker_pb2_grpc, group_pb2, transaction_pb2
from server_common import power_loss
from server_common.event_loops import run_loop
from server_common.gc_freeze import freeze_after_full_collections
from server_common import clock
from server_common.grpc_standard_services import ServingState
from server_common.open_files import raise_open_file_limit
from server_common.tls import add_port

log = structlog.get_logger("broker")


class BrokerServer:
    """One broker process's moving parts."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._log = log.bind(broker_id=config.broker_id)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        if config.storage_fault_injection:
            self._log.warning("storage fault injection on: appends and rolls fail with EIO while the trigger file names them",
                              trigger=str(config.data_dir / fault_injection.TRIGGER_FILE))
            fault_injection.enable(config.data_dir)
        if config.power_loss_ledger:
            power_loss.install(config.data_dir)
            self._log.warning("POWER-LOSS TEST MODE: every fsync is recorded for the chaos harness's power-loss fault")
        self.max_replicas = self._size_open_files()
        self.logs = LogManager(config.data_dir, now_ms=clock.now_ms())
        self.replicas = ReplicaManager(config, self.logs)
        endpoints = [(c.node_id, c.host, c.grpc_port) for c in config.controllers]
        self.metadata = MetadataFollower(endpoints, self.replicas.on_metadata, config.peer_credentials())
        advertised_host, advertised_port = config.advertised or (config.host, config.port)
        self.lifecycle = BrokerLifecycleManager(
            broker_id=config.broker_id,
            host=advertised_host,
            port=advertised_port,
            rack=config.rack,
            controller_endpoints=endpoints,
            on_active_controller=self.metadata.follow_from,
            current_metadata_offset=lambda: self.metadata.image.offset,
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            credentials=config.peer_credentials(),
            previous_broker_epoch=self.logs.previous_broker_epoch,
            offline_replicas=self._offline_replicas,
            max_replicas=self.max_replicas,
        )
        self.fetchers = ReplicaFetcherManager(config, self.replicas, lambda: self.lifecycle.broker_epoch)
        self.isr_updates = AlterPartitionSender(config.broker_id, self.lifecycle, self.replicas.on_alter_partition_answer)
        self.replicas.followers_changed = self.fetchers.sync
        self.metrics = BrokerMetrics() if config.metrics_port else None  # off: no interceptor, no counting
        self.replicas.propose_isr = self.metrics.count_isr_changes(self.isr_updates.submit) if self.metrics else self.isr_updates.submit
        self.quotas = QuotaEnforcer(lambda: self.metadata.image.client_quotas,
                                    QuotaAccounts(config.quota_window_num, config.quota_window_size_ms),
                                    self.metrics.throttle.observe if self.metrics else None)
        self._producer_ids: list[int] = []
        self._server: grpc.aio.Server | None = None
        self._service: BrokerService | None = None
        self._health: ServingState | None = None
        self._stopping = False
        self._timers: list[asyncio.Task] = []
        self._checkpointing: asyncio.Future | None = None  # the checkpoint write in a worker thread, if one runs
        self._transactions = None  # the TransactionCoordinator, once serving
        self._kafka = None  # the Kafka listener, with --kafka-listen

    def _offline_replicas(self) -> list[tuple[str, int]]:
        """What each heartbeat reports offline. A replica whose creation failed and that the
        metadata no longer assigns here (its topic deleted, moved away) is forgotten first."""
        image = self.metadata.image
        for topic, index in self.logs.not_created():
            p = image.partition(topic, index)
            if p is None or self.config.broker_id not in p.replicas:
                self.logs.forget_not_created(topic, index)
        return sorted(self.logs.offline_partitions())

    def _size_open_files(self) -> int:
        """Raise the open-file limit to the hard limit, give the logs their handle budget under
        it and return how many replicas this broker registers it can host."""
        before, soft, hard = raise_open_file_limit()
        budget = handle_budget(soft)
        HANDLES.configure(budget)
        max_replicas = self.config.max_replicas or replica_capacity(budget)
        self._log.info("open-file limit", soft_limit_before=before, soft_limit=soft, hard_limit=hard, log_handle_budget=budget,
                       max_replicas=max_replicas, max_replicas_from="--max-replicas" if self.config.max_replicas else "budget")
        return max_replicas

    def metadata_response(self, topics: list[str] | None) -> broker_pb2.MetadataResponse:
        """The brokers, the controllers and ``topics`` (None: every topic; empty: none, which a
        client asks for while it names no topic, so that its answer does not grow with the
        cluster's partitions)."""
        image = self.metadata.image
        response = broker_pb2.MetadataResponse(
            cluster_id=image.cluster_id or "", metadata_offset=image.offset, answering_broker_id=self.config.broker_id
        )
        for c in self.config.controllers:
            response.controllers.add(broker_id=c.node_id, host=c.host, port=c.grpc_port)
        for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            response.brokers.add(broker_id=broker.broker_id, host=broker.host, port=broker.port, rack=broker.rack, fenced=broker.fenced)
        unsafe_leaders = self.replicas.unsafe_leaderships()
        for name in sorted(image.topics) if topics is None else topics:
            topic = image.topics.get(name)
            if topic is None:
                response.topics.add(
                    name=name,
                    **to_wire(PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             f"topic '{name}' does not exist: create it with kraftlog topics create {name}")),
                )
                continue
            out = response.topics.add(name=name, topic_id=str(topic.topic_id))
            for index in sorted(topic.partitions):
                p = topic.partitions[index]
                offline = [r for r in p.replicas if r not in image.brokers or image.brokers[r].fenced]
                leader = unsafe_leaders.get((name, index), p.leader)
                out.partitions.add(
                    partition=index,
                    error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    leader_id=leader,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    replicas=list(p.replicas),
                    isr=list(p.isr),
                    offline_replicas=offline,
                )
        return response

    async def init_producer_id(self) -> broker_pb2.InitProducerIdResponse:
        if not self._producer_ids:
            try:
                first, count = await self.lifecycle.allocate_producer_ids()
            except Exception as exc:  # the controller may be unreachable: a retriable answer
                return broker_pb2.InitProducerIdResponse(
                    **to_wire(PartitionError(ErrorCode.BROKER_NOT_AVAILABLE,
                                             f"could not allocate producer ids from the controller ({exc}): retry shortly")),
                )
            self._producer_ids = list(range(first + count - 1, first - 1, -1))
        return broker_pb2.InitProducerIdResponse(producer_id=self._producer_ids.pop(), producer_epoch=0)

    async def start(self) -> None:
        if self.metrics is not None:  # first: a metrics port in use stops the broker before it listens
            self.metrics.start(self.config.host, self.config.metrics_port, self.replicas.partitions.values, asyncio.get_running_loop(), self.config.tls)
        options = [
            ("grpc.max_receive_message_length", self.config.request_max_bytes),
            ("grpc.max_send_message_length", self.config.request_max_bytes),
            ("grpc.so_reuseport", 0),
            # Clients keep streams open (ProduceStream, Consume) and ping every 10 s to notice a
            # dead broker (data_plane/client/channels.py): accept those pings on an idle stream
            # instead of answering GOAWAY "too_many_pings", which drops every call of the channel.
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
            ("grpc.http2.max_ping_strikes", 0),
        ]
        interceptors = [self.metrics.rpc.interceptor()] if self.metrics else []
        security = self.config.security
        interceptors.append(Authenticator(lambda: self.metadata.image.scram_users, security.authentication_required,
                                          self.metrics.authentication_failures if self.metrics else None, self._log).interceptor())
        interceptors.append(self.quotas.interceptor())  # after authentication: it reads the call's identity
        server = grpc.aio.server(options=options, interceptors=interceptors)
        self.access = AccessControl(lambda: self.metadata.image.acls, security.super_users, security.authorization)
        self._service = BrokerService(self.replicas, self.metadata_response, self.init_producer_id, self.access)
        self._service.newer_leader = self.metadata.wait_for_newer_leader
        if self.metrics is not None:
            self._service.produce_observer = self.metrics.rpc.counted_as("Produce")
        broker_pb2_grpc.add_BrokerServicer_to_server(self._service, server)
        transactions, transaction_topic = serve_transactions(
            self.config, self.replicas, self.lifecycle.create_topics, self.init_producer_id, self.fetchers.broker_address,
            server, self._service.write_markers, self.access)
        self._transactions = transactions.coordinator
        self.replicas.txn_verifier = TxnVerifier(self.replicas, self.fetchers.broker_address, self.config.peer_credentials(),
                                                 self.config.broker_id, transactions.own_leaders_question)
        self.replicas.verify_transactions = self.config.transaction_partition_verification
        groups = serve_groups(self.config, self.replicas, self.lifecycle.create_topics, server, self.access, transaction_topic)
        self._health = ServingState(
            server, broker_pb2.DESCRIPTOR.services_by_name["Broker"].full_name,
            group_pb2.DESCRIPTOR.services_by_name["GroupCoordinator"].full_name,
            transaction_pb2.DESCRIPTOR.services_by_name["TransactionCoordinator"].full_name,
        )
        await self._health.set(False)  # starting: not registered and unfenced yet
        bound = add_port(server, f"{self.config.host}:{self.config.port}", self.config.tls)
        if bound == 0:
            raise SystemExit(f"cannot listen on {self.config.host}:{self.config.port}: is another process using the port?")
        await server.start()
        self._server = server
        if self.config.unsafe is not None:
            self._log.warning("UNSAFE TESTING MODE: this broker breaks replication rules on purpose", behaviour=self.config.unsafe.value)
        self.isr_updates.start()
        self.fetchers.start()
        self._kafka = await serve_kafka(self, self.lifecycle, groups, transactions)  # bound before registering: its address is registered
        await self.metadata.start()
        await self.lifecycle.start()
        self._timers = [
            asyncio.create_task(self._every(self.config.replica_tick_interval_ms, self.replicas.tick)),
            asyncio.create_task(self._every(self.config.replica_tick_interval_ms, groups.coordinator.tick)),
            asyncio.create_task(self._every(self.config.replica_tick_interval_ms, transactions.coordinator.tick)),
            asyncio.create_task(self._checkpoints()),
            asyncio.create_task(self._every(self.config.retention_check_interval_ms, self.replicas.maintenance.run_retention)),
            asyncio.create_task(self._every(self.config.flush_check_interval_ms, self.replicas.maintenance.run_flush)),
            asyncio.create_task(self._every(self.config.producer_id_expiration_check_interval_ms,
                                            self.replicas.maintenance.run_producer_id_expiry)),
            asyncio.create_task(self.replicas.maintenance.run_cleaner()),
            asyncio.create_task(self.replicas.group_commit.run()),
            asyncio.create_task(self.replicas.follower_commit.run()),
            asyncio.create_task(DamageRepairer(self.replicas.maintenance, self.fetchers.broker_address).run()),
            asyncio.create_task(OfflineRecovery(self.replicas).run()),
            asyncio.create_task(self._health.follow(lambda: not self._stopping and not self.lifecycle.is_fenced)),
        ]
        if self.metrics is not None:
            ends = EndOffsets(self.replicas, self.fetchers.broker_address, self.config.peer_credentials())
            self._timers.append(asyncio.create_task(export_group_lag(self.metrics, groups.coordinator, ends, self.config.metrics_group_lag_series)))
        if self.config.scrub_bytes_per_second > 0:
            budget = max(self.config.scrub_bytes_per_second * self.config.scrub_interval_ms // 1000, 1)
            self._timers.append(asyncio.create_task(self._scrub(budget)))
        self._log.info("broker started", listen=f"{self.config.host}:{bound}", broker_epoch=self.lifecycle.broker_epoch,
                       metrics_port=self.config.metrics_port or None, tls=self.config.tls is not None,
                       client_auth=self.config.tls.client_auth if self.config.tls else None)

    async def _checkpoints(self) -> None:
        """Every ``hw_checkpoint_interval_ms``: the HWs and recovery points, read and written in
        a worker thread from the replicas and logs listed on the event loop, so that no request
        waits while 50,000 of each are read and compared with the last write (on the loop
        that was a stall of 20 to 180 ms every 5 s at 50,000 replicas, more under load) or
        while their files are fsynced. `stop` waits for a checkpoint in progress before it
        writes the last ones. A file whose content would not change is not written again: with
        50,000 replicas an idle broker spent a third of its time formatting and fsyncing the
        same recovery points."""
        written_points: dict[tuple[str, int], int] | None = None
        while True:
            await asyncio.sleep(self.config.hw_checkpoint_interval_ms / 1000)
            self._checkpointing = asyncio.ensure_future(asyncio.to_thread(
                self._write_checkpoints, self.replicas.checkpoint_replicas(), self.logs.checkpoint_logs(), written_points))
            try:
                written_points = await asyncio.shield(self._checkpointing)
            except asyncio.CancelledError:
                raise
            except Exception:  # a timer must never die silently: log and keep going
                self._log.exception("periodic task failed", task="checkpoint")

    def _write_checkpoints(self, replicas: list[tuple[tuple[str, int], Partition]], logs: list[tuple[tuple[str, int], PartitionLog]],
                           written_points: dict[tuple[str, int], int] | None) -> dict[tuple[str, int], int]:
        """One checkpoint, in a worker thread: the files whose content changed since the last
        write. Returns the recovery points now written."""
        high_watermarks = self.replicas.high_watermarks_to_checkpoint(replicas)
        if high_watermarks is not None:
            self.logs.checkpoint_high_watermarks(high_watermarks)
            self.replicas.high_watermarks_checkpointed(high_watermarks)
        points = self.logs.recovery_points(logs)
        if points != written_points:
            self.logs.write_recovery_points(points)
        return points

    async def _scrub(self, budget_bytes: int) -> None:
        """The background scrub: a slice every ``scrub_interval_ms``, and a rest of
        ``scrub_lap_rest_ms`` after each lap, so that a broker whose logs are all verified
        does not verify them again and again (with small batches, a lap at 8 MiB/s costs a
        core's tenth for as long as it runs)."""
        while True:
            await asyncio.sleep(self.config.scrub_interval_ms / 1000)
            try:
                lap_done = self.replicas.maintenance.run_scrub(budget_bytes)
            except Exception:  # a timer must never die silently: log and keep going
                self._log.exception("periodic task failed", task="scrub")
                continue
            if lap_done:
                await asyncio.sleep(self.config.scrub_lap_rest_ms / 1000)

    async def _every(self, interval_ms: int, action) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                action()
            except Exception:  # a timer must never die silently: log and keep going
                self._log.exception("periodic task failed", task=getattr(action, "__name__", str(action)))

    async def stop(self, controlled: bool) -> None:
        self._stopping = True
        if self._health is not None:
            await self._health.set(False)  # shutting down: probes stop sending work here first
        if controlled:
            await self.lifecycle.controlled_shutdown(self.config.controlled_shutdown_timeout_s)
        for task in self._timers:
            task.cancel()
        if self._checkpointing is not None:  # a checkpoint being written: the last one is written after it
            await asyncio.gather(self._checkpointing, return_exceptions=True)
        await self.fetchers.stop()
        if self._service is not None:
            self._service.consume_streams.close()  # streams end with a final entry per partition, within the grace
        if self._server is not None:
            await self._server.stop(grace=1.0)
        if self._kafka is not None:
            await self._kafka.stop()
        if self._transactions is not None:
            await self._transactions.markers.close()
        if self.replicas.txn_verifier is not None:
            await self.replicas.txn_verifier.close()
        await self.isr_updates.stop()
        await self.metadata.stop()
        await self.lifecycle.stop()
        if self.metrics is not None:
            self.metrics.stop()
        try:
            self.logs.checkpoint_high_watermarks(self.replicas.high_watermarks())
        finally:  # a failing disk must not stop the logs from being flushed and closed
            self.logs.close(self.lifecycle.broker_epoch)
        self._log.info("broker stopped cleanly")


async def serve(config: BrokerConfig) -> None:
    broker = BrokerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    await stop.wait()
    await broker.stop(controlled=True)


def run(args: argparse.Namespace) -> int:
    from server_common.logging_setup import configure_logging

    configure_logging(args.log_format, args.log_level)
    try:
        config = from_args(args)
    except ValueError as exc:
        raise SystemExit(f"kraftlog broker: {exc}") from None
    freeze_after_full_collections()  # a full GC of 50,000 replicas' objects stalled the loop for seconds
    run_loop(serve(config), args.event_loop)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="kraftlog broker", description="Run one kraftlog broker.")
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
