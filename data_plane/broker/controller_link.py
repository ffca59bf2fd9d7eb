"""The broker's side of the controller protocol (asyncio): lifecycle and metadata.

``BrokerLifecycleManager`` registers the broker (a new broker epoch per process start),
heartbeats, learns whether it is fenced, walks a controlled shutdown, and forwards
AlterPartition and AllocateProducerIds to the active controller.

``MetadataFollower`` streams metadata records from any controller, and moves to the active
one once the broker's session has found it (``follow_from``), starting after the last offset
it applied, replays each batch into one ``MetadataDelta`` (the replay the controllers
use), applies it once, and hands the delta with the image it leads to to the listener
(listener(delta, image)), which reacts to what the delta says changed.

A listener that fails (a replica whose log cannot be created, any error) does not stop the
follower: the image still advances, so the broker goes on serving everything else at the
controllers' current metadata, and the follower calls the listener again, with backoff,
with the whole difference between the last image it fully acted on and the current one,
until a call succeeds (the listener's steps are idempotent). The cause gone (a descriptor
or disk space freed), the broker catches up without a restart.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from dataclasses import replace
from typing import Awaitable, Callable, Mapping, Sequence

import grpc
import structlog

from metadata_quorum.controller_router import CONTROLLER_CHANNEL_OPTIONS, ControllerError, ControllerRouter, is_catching_up
from metadata_quorum.endpoints import Endpoint, grpc_address
from metadata_quorum.delta import MetadataDelta, image_from_snapshot
from metadata_quorum.image import MetadataImage
from metadata_quorum.records import from_proto
from kraftlog_proto import controller_pb2 as pb
from kraftlog_proto import controller_pb2_grpc, security_pb2, security_pb2_grpc
from server_common.channel_pool import AioChannelPool
from server_common.errors import ErrorCode, error_code_name

_RETRIABLE_WRITE_ERRORS = {ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT}

Listener = Callable[[MetadataDelta, MetadataImage], Awaitable[None] | None]

RETRY_MIN_S = 0.5  # first retry of metadata a listener failed to act on; doubles up to RETRY_MAX_S
RETRY_MAX_S = 30.0


class MetadataNotApplied(Exception):
    """A listener acted on all of a delta it could, but not on ``failures`` (what could not be
    done, by name, with the error): the follower logs them and calls again later."""

    def __init__(self, message: str, failures: Mapping[object, Exception]) -> None:
        super().__init__(message)
        self.failures = dict(failures)


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str,
        controller_endpoints: Sequence[Endpoint],
        current_metadata_offset: Callable[[], int],
        *,
        on_active_controller: Callable[[Endpoint], None] = lambda endpoint: None,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        credentials: grpc.ChannelCredentials | None = None,
        previous_broker_epoch: int = -1,
        offline_replicas: Callable[[], Sequence[tuple[str, int]]] = lambda: (),
        max_replicas: int = 0,
        kafka_endpoint: str = "",
    ) -> None:
        """The timings have no defaults here: ``BrokerConfig`` holds the one default of each.
        ``credentials``: TLS for the channels to the controllers (None: plaintext);
        ``previous_broker_epoch``: the epoch of the last clean shutdown of the data directory
        (-1 after an unclean one), sent at registration; ``offline_replicas``: the replicas
        whose log went offline, sent with every heartbeat so the controller moves them;
        ``max_replicas``: how many replicas this broker can host, sent at registration (0: no limit);
        ``kafka_endpoint``: host:port of its Kafka listener, registered so every broker's Kafka
        Metadata names it (empty: none; the server sets it once the listener is bound);
        ``on_active_controller``: told the active controller each time a session opens with it."""
        assert heartbeat_interval_ms < session_timeout_ms, "heartbeats must come more often than the session timeout"
        self.broker_id = broker_id
        self.host, self.port, self.rack = host, port, rack
        self.incarnation_id = str(uuid.uuid4())
        self._current_metadata_offset = current_metadata_offset
        self._on_active_controller = on_active_controller
        self._previous_broker_epoch = previous_broker_epoch
        self._offline_replicas = offline_replicas
        self._max_replicas = max_replicas
        self.kafka_endpoint = kafka_endpoint
        self._heartbeat_interval_s = heartbeat_interval_ms / 1000
        self._session_timeout_s = session_timeout_ms / 1000
        self._rpc_timeout_s = min(5.0, session_timeout_ms / 3000)
        self._router = ControllerRouter(controller_endpoints)
        self._channels = AioChannelPool(controller_pb2_grpc.ControllerServiceStub, CONTROLLER_CHANNEL_OPTIONS, credentials)
        self._security_channels = AioChannelPool(security_pb2_grpc.SecurityAdminStub, CONTROLLER_CHANNEL_OPTIONS, credentials)
        self._broker_epoch = -1
        self._is_fenced = True
        self._want_shutdown = False
        self._should_shutdown = asyncio.Event()
        self._heartbeat_task: asyncio.Task | None = None
        self._session_task: asyncio.Task | None = None
        self._log = structlog.get_logger("broker").bind(broker_id=broker_id)

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch

    @property
    def is_fenced(self) -> bool:
        return self._is_fenced

    async def _call(self, method: str, request, deadline_s: float | None = None, channels: AioChannelPool | None = None):
        """Send a write to the active controller, following hints and retrying unreachable or
        leaderless moments until ``deadline_s`` (None: forever). Other errors are returned.
        ``channels``: the SecurityAdmin service's (None: the ControllerService's)."""
        channels = channels or self._channels
        loop = asyncio.get_running_loop()
        deadline = None if deadline_s is None else loop.time() + deadline_s
        while True:
            target = self._router.current()
            try:
                response = await getattr(channels.stub(grpc_address(target)), method)(request, timeout=self._rpc_timeout_s)
            except grpc.aio.AioRpcError as e:
                if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise ControllerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{self._router.describe(target)} failed {method}: {e.code().name} {e.details()}") from None
                delay, why = self._router.on_unreachable(), f"{self._router.describe(target)} unreachable ({e.code().name})"
            else:
                if response.error_code not in _RETRIABLE_WRITE_ERRORS:
                    self._router.on_success()
                    return response
                delay, why = self._router.on_not_controller(response.active_controller), response.error_message
            if deadline is not None and loop.time() + delay > deadline:
                raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, f"{method} did not reach the active controller in {deadline_s} s: {why}")
            self._log.debug("retrying controller request", method=method, reason=why, delay_s=delay)
            await asyncio.sleep(delay)

    async def start(self) -> None:
        """Register (retrying until some controller accepts) and start heartbeating."""
        await self._register()
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop())

    def _open_session(self) -> None:
        """(Re)open the session stream for the current broker epoch."""
        if self._session_task is not None:
            self._session_task.cancel()
        self._session_task = asyncio.get_running_loop().create_task(self._session_loop(self._broker_epoch))

    async def _session_loop(self, broker_epoch: int) -> None:
        """Keep a BrokerSession stream open with the active controller, so that this process
        dying is noticed at once (its connection closes), not after the session timeout."""
        request = pb.BrokerSessionRequest(broker_id=self.broker_id, broker_epoch=broker_epoch)
        while True:
            target = self._router.current()
            try:
                async for event in self._channels.stub(grpc_address(target)).BrokerSession(request):
                    if event.error_code == ErrorCode.NOT_CONTROLLER:
                        delay = self._router.on_not_controller(event.active_controller)
                        break
                    self._log.info("session opened with the active controller", controller=self._router.describe(target), broker_epoch=broker_epoch)
                    self._on_active_controller(target)
                else:
                    delay = self._router.on_unreachable()  # that controller stepped down
            except grpc.aio.AioRpcError:
                delay = self._router.on_unreachable()
            await asyncio.sleep(delay)

    async def _register(self) -> None:
        request = pb.RegisterBrokerRequest(
            broker_id=self.broker_id, host=self.host, port=self.port, rack=self.rack, incarnation_id=self.incarnation_id, previous_broker_epoch=self._previous_broker_epoch,
            max_replicas=self._max_replicas, kafka_endpoint=self.kafka_endpoint,
        )
        while True:
            response = await self._call("RegisterBroker", request)
            if response.error_code == ErrorCode.NONE:
                self._broker_epoch, self._is_fenced = response.broker_epoch, True
                self._open_session()
                self._log.info("registered with the controller", broker_epoch=self._broker_epoch, incarnation_id=self.incarnation_id,
                               previous_broker_epoch=self._previous_broker_epoch)
                return
            self._log.warning("registration refused; retrying", error=error_code_name(response.error_code), message=response.error_message)
            await asyncio.sleep(self._heartbeat_interval_s)

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await self.heartbeat()
            except ControllerError as e:
                self._log.warning("heartbeat failed", error=str(e))
            await asyncio.sleep(self._heartbeat_interval_s)

    async def heartbeat(self) -> pb.BrokerHeartbeatResponse:
        """Send one heartbeat now and take in the answer (re-registering if the epoch went stale)."""
        request = pb.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self._broker_epoch,
            current_metadata_offset=self._current_metadata_offset(),
            want_shutdown=self._want_shutdown,
            offline_replicas=[pb.TopicPartitionRef(topic=topic, partition=partition) for topic, partition in self._offline_replicas()],
        )
        response = await self._call("BrokerHeartbeat", request, deadline_s=self._rpc_timeout_s)
        if response.error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_NOT_REGISTERED):
            self._log.warning("registration lost; registering again", error=response.error_message)
            await self._register()
            return response
        if response.error_code != ErrorCode.NONE:
            raise ControllerError.from_wire(response.error_code, response.error_message)
        if response.is_fenced != self._is_fenced:
            self._log.info("fenced" if response.is_fenced else "unfenced", broker_epoch=self._broker_epoch, metadata_offset=request.current_metadata_offset)
        self._is_fenced = response.is_fenced
        if response.should_shutdown:
            self._should_shutdown.set()
        return response

    async def wait_unfenced(self, timeout_s: float) -> bool:
        """Wait until a heartbeat says this broker is unfenced (caught up with metadata)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._is_fenced and loop.time() < deadline:
            await asyncio.sleep(min(0.05, self._heartbeat_interval_s))
        return not self._is_fenced

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask to shut down and heartbeat until the controller has moved this broker's
        leaderships away (True) or ``timeout_s`` passes (False)."""
        if self._broker_epoch < 0:
            return True
        self._want_shutdown = True
        self._log.info("controlled shutdown requested", broker_epoch=self._broker_epoch)
        try:
            agreed = await asyncio.wait_for(self._shutdown_heartbeats(), timeout_s)
        except asyncio.TimeoutError:
            self._log.warning("controlled shutdown timed out; leaderships move when the session expires", timeout_s=timeout_s)
            return False
        if not agreed:
            self._log.warning("controlled shutdown: no controller answered for a session timeout; leaderships move when one "
                              "does", session_timeout_s=self._session_timeout_s)
            return False
        self._log.info("controlled shutdown complete")
        return True

    async def _shutdown_heartbeats(self) -> bool:
        """Heartbeats asking to shut down until the controller agrees (True). When no controller
        has answered for a whole session timeout there is none to move the leaderships (or it
        has fenced this broker already): waiting longer cannot help, so the shutdown goes on (False)."""
        answered_s = time.monotonic()
        while not self._should_shutdown.is_set():
            try:
                await self.heartbeat()
                answered_s = time.monotonic()
            except ControllerError as e:
                self._log.warning("controlled shutdown heartbeat failed", error=str(e))
                if time.monotonic() - answered_s >= self._session_timeout_s:
                    return False
            if not self._should_shutdown.is_set():
                await asyncio.sleep(min(0.1, self._heartbeat_interval_s))
        return True

    async def stop(self) -> None:
        """Stop heartbeating (the controller fences this broker when its session expires)."""
        tasks = [t for t in (self._heartbeat_task, self._session_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._heartbeat_task = self._session_task = None
        await self._channels.close()
        await self._security_channels.close()

    async def alter_partition(self, partitions: Sequence[pb.AlterPartitionRequest.PartitionState], deadline_s: float = 10.0) -> pb.AlterPartitionResponse:
        """Propose ISR changes for partitions this broker leads; per-partition results."""
        request = pb.AlterPartitionRequest(broker_id=self.broker_id, broker_epoch=self._broker_epoch, partitions=list(partitions))
        return await self._call("AlterPartition", request, deadline_s)

    async def allocate_producer_ids(self, deadline_s: float = 10.0) -> tuple[int, int]:
        """A fresh block of producer ids: (first id, count)."""
        response = await self._call("AllocateProducerIds", pb.AllocateProducerIdsRequest(broker_id=self.broker_id, broker_epoch=self._broker_epoch), deadline_s)
        if response.error_code != ErrorCode.NONE:
            raise ControllerError.from_wire(response.error_code, response.error_message)
        return response.producer_id_start, response.producer_id_len

    async def create_topics(self, request: pb.CreateTopicsRequest, deadline_s: float = 10.0) -> pb.CreateTopicsResponse:
        """Create topics through the active controller (the group coordinator's offsets topic, Kafka clients' CreateTopics)."""
        return await self._call("CreateTopics", request, deadline_s)

    async def delete_topics(self, request: pb.DeleteTopicsRequest, deadline_s: float = 10.0) -> pb.DeleteTopicsResponse:
        """Delete topics through the active controller (Kafka clients' DeleteTopics)."""
        return await self._call("DeleteTopics", request, deadline_s)

    async def create_partitions(self, request: pb.CreatePartitionsRequest, deadline_s: float = 10.0) -> pb.CreatePartitionsResponse:
        """Add partitions through the active controller (Kafka clients' CreatePartitions)."""
        return await self._call("CreatePartitions", request, deadline_s)

    async def alter_configs(self, request: pb.AlterConfigsRequest, deadline_s: float = 10.0) -> pb.AlterConfigsResponse:
        """Change topic configs through the active controller (Kafka clients' IncrementalAlterConfigs)."""
        return await self._call("AlterConfigs", request, deadline_s)

    async def create_acls(self, request: security_pb2.AclsRequest, deadline_s: float = 10.0) -> security_pb2.SecurityWriteResponse:
        """Add ACLs through the active controller (Kafka clients' CreateAcls)."""
        return await self._call("CreateAcls", request, deadline_s, self._security_channels)

    async def delete_acls(self, request: security_pb2.AclsRequest, deadline_s: float = 10.0) -> security_pb2.SecurityWriteResponse:
        """Remove exactly these ACLs through the active controller (Kafka clients' DeleteAcls)."""
        return await self._call("DeleteAcls", request, deadline_s, self._security_channels)


class MetadataFollower:
    def __init__(self, controller_endpoints: Sequence[Endpoint], listener: Listener, credentials: grpc.ChannelCredentials | None = None) -> None:
        """``credentials``: TLS for the channels to the controllers (None: plaintext)."""
        self._router = ControllerRouter(controller_endpoints)
        self._channels = AioChannelPool(controller_pb2_grpc.ControllerServiceStub, CONTROLLER_CHANNEL_OPTIONS, credentials)
        self._listener = listener
        self._image = MetadataImage.empty("")
        self._applied = asyncio.Condition()
        self._task: asyncio.Task | None = None
        self._log = structlog.get_logger("broker")
        self._listening = asyncio.Lock()  # one listener call at a time: the stream's and the retry's
        # The last image the listener fully acted on while ``_image`` is ahead of it (a call
        # failed), and the offset of the last failed call; None when the listener is in step.
        self._acted_on: MetadataImage | None = None
        self._failed_offset = -1
        self._retry_task: asyncio.Task | None = None
        self._active: Endpoint | None = None  # the active controller, as the broker's session found it

    @property
    def unapplied_since(self) -> int | None:
        """The offset after which the listener has not fully acted on the metadata (None: it has)."""
        return None if self._acted_on is None else self._acted_on.offset

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def source(self) -> Endpoint:
        """The controller the stream comes from (or is about to)."""
        return self._router.current()

    def follow_from(self, active: Endpoint) -> None:
        """Stream from ``active``, the active controller, from the next batch on. It applies an
        entry as soon as it is committed, and the other controllers only once it has told them
        so (one Raft message and one process wake-up later): on a failover's path, its fence
        and elections reach this broker sooner from it."""
        self._active = active

    def _moves_to_active(self, target: Endpoint) -> bool:
        """Whether the stream from ``target`` should end to go to the active controller (which
        then becomes the router's current one)."""
        active = self._active
        return active is not None and active[1:] != target[1:] and self._router.point_at(active)

    async def start(self) -> None:
        """Start following in the background (returns at once)."""
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        tasks = [t for t in (self._task, self._retry_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = self._retry_task = None
        await self._channels.close()

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """True once the image has reached ``offset``; False after ``timeout_s``."""
        return await self._wait_until(lambda image: image.offset >= offset, timeout_s)

    async def wait_for_newer_leader(self, awaited: Mapping[tuple[str, int], int], timeout_s: float) -> bool:
        """True once the image shows any of ``awaited`` (partition -> leader epoch) with a newer
        leader epoch, or without the partition; False after ``timeout_s`` (a failover's client
        long-polls Metadata with this)."""
        def moved(image: MetadataImage) -> bool:
            for (topic, index), epoch in awaited.items():
                p = image.partition(topic, index)
                if p is None or p.leader_epoch > epoch:
                    return True
            return False
        return await self._wait_until(moved, timeout_s)

    async def _wait_until(self, reached: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        async with self._applied:
            try:
                await asyncio.wait_for(self._applied.wait_for(lambda: reached(self._image)), timeout_s)
            except asyncio.TimeoutError:
                return False
        return True

    async def _follow(self) -> None:
        while True:
            target = self._router.current()
            catching_up = False
            try:
                stream = self._channels.stub(grpc_address(target)).StreamMetadata(pb.StreamMetadataRequest(from_offset=self._image.offset + 1))
                moved = False
                async for batch in stream:
                    await self._apply(batch)
                    self._router.on_success()
                    if moved := self._moves_to_active(target):
                        stream.cancel()
                        break
                if moved:
                    self._log.info("metadata stream moved to the active controller", source=self._router.describe(target),
                                   active=self._router.describe(self._router.current()), metadata_offset=self._image.offset)
                    continue
                reason = "stream ended"
            except grpc.aio.AioRpcError as e:
                reason = f"{e.code().name} {e.details()}"
                # a controller still catching up after its start: routine while controllers start, not a fault
                catching_up = is_catching_up(e)
            except MetadataStreamError as e:
                reason = str(e)
            except Exception as e:  # a failing listener must not stop metadata: log loudly, resume from the applied offset
                self._log.exception("applying metadata failed", metadata_offset=self._image.offset)
                reason = f"{type(e).__name__}: {e}"
            if self._active is not None and self._active[1:] == target[1:]:
                self._active = None  # no longer to be trusted as active: the next session names the new one
            delay = self._router.on_unreachable()
            (self._log.info if catching_up else self._log.warning)(
                "metadata stream broke; switching controller", source=self._router.describe(target), reason=reason,
                next=self._router.describe(self._router.current()), metadata_offset=self._image.offset)
            await asyncio.sleep(delay)

    async def _apply(self, batch: pb.MetadataBatch) -> None:
        previous = self._image
        if previous.cluster_id and batch.cluster_id != previous.cluster_id:
            raise MetadataStreamError(f"controller {batch.controller_id} belongs to cluster {batch.cluster_id}, this broker to {previous.cluster_id}; check --controllers")
        records = [from_proto(r) for r in batch.records]
        if batch.snapshot:
            delta = MetadataDelta.from_snapshot(previous, image_from_snapshot(batch.cluster_id, records, batch.last_offset))
        else:
            skip = previous.offset + 1 - batch.base_offset
            if skip < 0:
                raise MetadataStreamError(f"metadata gap: have offset {previous.offset}, controller {batch.controller_id} sent from {batch.base_offset}")
            if skip >= len(records):
                return
            delta = MetadataDelta(previous)
            delta.replay_all(records[skip:])
        image = delta.apply()
        if not image.cluster_id:
            image = replace(image, cluster_id=batch.cluster_id)
        assert image.offset >= previous.offset or batch.snapshot, "metadata offsets only grow"
        try:
            await self._call_listener(delta, image)
        except Exception as exc:  # the rest of the broker serves on at this image; the retry completes it
            self._note_unapplied(previous, image, exc)
        self._image = image
        async with self._applied:
            self._applied.notify_all()

    async def _call_listener(self, delta: MetadataDelta, image: MetadataImage) -> None:
        async with self._listening:
            result = self._listener(delta, image)
            if inspect.isawaitable(result):
                await result

    def _note_unapplied(self, acted_on: MetadataImage, image: MetadataImage, exc: Exception) -> None:
        if self._acted_on is None:
            self._acted_on = acted_on
        self._failed_offset = image.offset
        self._log_failure("applying metadata failed; serving on and retrying", image.offset, exc, RETRY_MIN_S)
        if self._retry_task is None or self._retry_task.done():
            self._retry_task = asyncio.create_task(self._retry_unapplied())

    def _log_failure(self, event: str, offset: int, exc: Exception, retry_in_s: float) -> None:
        fields = dict(metadata_offset=offset, acted_on_offset=self.unapplied_since, retry_in_s=retry_in_s)
        if isinstance(exc, MetadataNotApplied):
            failures = sorted(exc.failures.items(), key=str)
            self._log.error(event, reason=str(exc), failed=[f"{key}: {error}" for key, error in failures[:10]], **fields)
        else:
            self._log.error(event, reason=f"{type(exc).__name__}: {exc}", exc_info=exc, **fields)

    async def _retry_unapplied(self) -> None:
        """Call the listener with everything between the last image it fully acted on and the
        current one until it succeeds (backoff RETRY_MIN_S doubling to RETRY_MAX_S)."""
        delay_s = RETRY_MIN_S
        while self._acted_on is not None:
            await asyncio.sleep(delay_s)
            async with self._listening:
                base, target = self._acted_on, self._image
                try:
                    result = self._listener(MetadataDelta.from_snapshot(base, target), target)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    delay_s = min(delay_s * 2, RETRY_MAX_S)
                    self._log_failure("metadata still not applied", target.offset, exc, delay_s)
                    continue
            # a call that failed after ``target`` left more to redo from there
            self._acted_on = target if self._failed_offset > target.offset else None
            delay_s = RETRY_MIN_S
            self._log.info("metadata applied after retrying", metadata_offset=target.offset, acted_on_offset=self.unapplied_since)


class MetadataStreamError(Exception):
    """The stream from a controller cannot be applied here; the follower tries another."""
