"""An in-process, in-memory stand-in for one broker, so the client's I/O paths (batching,
retries, leader hints, fetch positions) are tested without processes or disks.

It implements just enough of the Broker service: Metadata, Produce (stamps offsets with
record_batch.stamp_batch), Fetch (whole batches from the fetch offset, long poll),
ListOffsets (-2/-1 only), OffsetForLeaderEpoch and DescribeLogs. Idempotent batches go through the broker's own
sequence rules (data_plane/replication/producer_state.py): duplicates are answered with their
original offsets, gaps with OUT_OF_ORDER_SEQUENCE. Faults, one per request, per partition:
`init_producer_id_error`, while set, is InitProducerId's answer; `metadata_unavailable`, while
set, makes Metadata fail with UNAVAILABLE; `fail_produce[tp]` answers an error code without appending; `lose_answer[tp]` appends and
then answers an error code (the outcome a client cannot know); `on_append(tp)`, when set,
runs after each append, under the broker's lock (to change faults at an exact point);
`leader_add(transactional_id, tp, producer_id, epoch)`, when set, is asked before appending a
produce with ``add_to_transaction`` (a transactional batch's leader adding its partition to the
transaction, KIP-890 part 2) and answers an error code (NONE: append);
`list_offsets_error[tp]`, while set, is ListOffsets' answer for tp (a partition whose leader cannot
answer), `epoch_end_error[tp]` the same for OffsetForLeaderEpoch; `produce_delay_s[tp]` holds every request for tp that long, `delay_next_s[tp]` only the next ones,
one delay each (so a later request overtakes an earlier one). `overlaps` counts requests
that reached the broker while another request for one of their partitions was being handled.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent import futures

import grpc

from data_plane import record_batch
from data_plane.replication.producer_state import Duplicate, ProducerState, Rejected
from data_plane.client.channels import CHANNEL_OPTIONS
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2

BROKER_ID = 1


class FakeBroker(broker_pb2_grpc.BrokerServicer):
    """One broker leading every partition of `topics` ({name: partition count})."""

    def __init__(self, topics: dict[str, int], leader_epoch: int = 0) -> None:
        self.topics = dict(topics)
        self.leader_epoch = leader_epoch
        self.batches: dict[tuple[str, int], list[tuple[int, bytes]]] = defaultdict(list)  # (base offset, bytes)
        self.end_offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.fail_produce: dict[tuple[str, int], deque[int]] = defaultdict(deque)
        self.lose_answer: dict[tuple[str, int], deque[int]] = defaultdict(deque)
        self.producers: dict[tuple[str, int], ProducerState] = defaultdict(ProducerState)
        self.next_producer_id = 1000
        self.init_producer_id_error: int | None = None  # InitProducerId answers this code while set
        self.metadata_unavailable = False  # Metadata fails with UNAVAILABLE while set
        self.metadata_refusals = 0
        self.init_producer_ids = 0
        self.produce_delay_s: dict[tuple[str, int], float] = {}
        self.delay_next_s: dict[tuple[str, int], deque[float]] = defaultdict(deque)
        self.on_append: Callable[[tuple[str, int]], None] | None = None
        self.leader_add: Callable[[str, tuple[str, int], int, int], int] | None = None
        self.overlaps = 0
        self.epoch_ends: dict[tuple[str, int], tuple[int, int]] = {}  # OffsetForLeaderEpoch's answer per partition
        self.list_offsets_error: dict[tuple[str, int], int] = {}  # ListOffsets answers this code for the partition while set
        self.list_offsets_asked: dict[tuple[str, int], int] = defaultdict(int)
        self.epoch_end_error: dict[tuple[str, int], int] = {}  # OffsetForLeaderEpoch answers this code for the partition while set
        self._handling: set[tuple[str, int]] = set()
        self.produce_requests = 0
        self.fetch_requests = 0
        self._cond = threading.Condition()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=CHANNEL_OPTIONS)
        broker_pb2_grpc.add_BrokerServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop(grace=None)

    def _hint(self) -> common_pb2.LeaderHint:
        return common_pb2.LeaderHint(leader_id=BROKER_ID, leader_epoch=self.leader_epoch)

    def Metadata(self, request, context):
        if self.metadata_unavailable:
            self.metadata_refusals += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "no cluster metadata yet (fault)")
        names = list(request.topics) or sorted(self.topics)
        response = broker_pb2.MetadataResponse(
            cluster_id="fake",
            brokers=[common_pb2.BrokerEndpoint(broker_id=BROKER_ID, host="127.0.0.1", port=self.port)],
            answering_broker_id=BROKER_ID,
            controllers=[common_pb2.BrokerEndpoint(broker_id=1000, host="127.0.0.1", port=1)],
        )
        for name in names:
            if name not in self.topics:
                response.topics.add(name=name, error_code=common_pb2.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            topic = response.topics.add(name=name, topic_id=f"id-{name}")
            for p in range(self.topics[name]):
                topic.partitions.add(partition=p, leader_id=BROKER_ID, leader_epoch=self.leader_epoch, replicas=[1], isr=[1])
        return response

    def InitProducerId(self, request, context):
        self.init_producer_ids += 1
        if self.init_producer_id_error is not None:
            return broker_pb2.InitProducerIdResponse(error_code=self.init_producer_id_error, error_message="fault")
        with self._cond:
            producer_id, self.next_producer_id = self.next_producer_id, self.next_producer_id + 1
        return broker_pb2.InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)

    def ProduceStream(self, request_iterator, context):
        """The producer's stream: each request served by ``Produce`` on a thread of its own
        (as the broker serves each in a task), answers in completion order."""
        answers: queue.Queue = queue.Queue()

        def serve(request) -> None:
            response = self.Produce(request, context)
            response.correlation_id = request.correlation_id
            answers.put(response)

        def read() -> None:
            serving = []
            try:
                for request in request_iterator:
                    serving.append(threading.Thread(target=serve, args=(request,), daemon=True))
                    serving[-1].start()
            except grpc.RpcError:
                pass  # the call ended (the client closed it, or the server stopped)
            for thread in serving:
                thread.join()
            answers.put(None)

        threading.Thread(target=read, daemon=True).start()
        while context.is_active():  # a stopped server ends the call; its pool thread must not stay behind
            try:
                answer = answers.get(timeout=0.05)
            except queue.Empty:
                continue
            if answer is None:
                return
            yield answer

    def Produce(self, request, context):
        self.produce_requests += 1
        tps = {(t.topic, p.partition) for t in request.topics for p in t.partitions}
        with self._cond:
            if tps & self._handling:
                self.overlaps += 1
            self._handling |= tps
        try:
            delay_s = max((self.produce_delay_s.get(tp, 0.0) for tp in tps), default=0.0)
            for tp in tps:
                if self.delay_next_s[tp]:
                    delay_s = max(delay_s, self.delay_next_s[tp].popleft())
            if delay_s:
                threading.Event().wait(delay_s)  # a slow partition: its answer comes after others'
            return self._produce(request)
        finally:
            with self._cond:
                self._handling -= tps

    def _added(self, request) -> dict[tuple[str, int], int]:
        """Per partition of a produce with ``add_to_transaction``: ``leader_add``'s answer for
        its transactional batches (asked outside the broker's lock, as a leader awaits it)."""
        refused: dict[tuple[str, int], int] = {}
        if self.leader_add is None or not request.add_to_transaction:
            return refused
        for topic in request.topics:
            for data in topic.partitions:
                tp = (topic.topic, data.partition)
                for _, header in record_batch.iter_batches(data.batches):
                    if header.is_transactional and tp not in refused:
                        code = self.leader_add(request.transactional_id, tp, header.producer_id, header.producer_epoch)
                        if code != common_pb2.NONE:
                            refused[tp] = code
        return refused

    def _produce(self, request) -> broker_pb2.ProduceResponse:
        response = broker_pb2.ProduceResponse()
        refused = self._added(request)
        with self._cond:
            for topic in request.topics:
                answer_topic = response.topics.add(topic=topic.topic)
                for data in topic.partitions:
                    tp = (topic.topic, data.partition)
                    answer = answer_topic.partitions.add(partition=data.partition, log_append_time_ms=-1)
                    if self.fail_produce[tp]:
                        answer.error_code = self.fail_produce[tp].popleft()
                        answer.current_leader.CopyFrom(self._hint())
                        continue
                    if tp in refused:
                        answer.error_code = refused[tp]
                        continue
                    headers = [header for _, header in record_batch.iter_batches(data.batches)]
                    verdict = self.producers[tp].check_run(headers)
                    if isinstance(verdict, Rejected):
                        answer.error_code = int(verdict.error)
                        continue
                    if isinstance(verdict, Duplicate):
                        answer.base_offset = verdict.first_offset
                        continue
                    answer.base_offset = self.end_offsets[tp]
                    buf = bytearray(data.batches)
                    for pos, header in record_batch.iter_batches(buf):
                        base = self.end_offsets[tp]
                        record_batch.stamp_batch(buf, pos, base, self.leader_epoch)
                        self.batches[tp].append((base, bytes(buf[pos : pos + header.batch_length])))
                        self.end_offsets[tp] += header.record_count
                        self.producers[tp].on_appended(
                            header.producer_id, header.producer_epoch, header.base_sequence, base, base + header.record_count - 1
                        )
                    if self.on_append is not None:
                        self.on_append(tp)
                    if self.lose_answer[tp]:
                        answer.error_code = self.lose_answer[tp].popleft()
            self._cond.notify_all()
        return response

    def stored(self, tp: tuple[str, int]) -> list[record_batch.DecodedBatch]:
        """The partition's batches as stored, decoded (headers carry producer id and sequence)."""
        return [record_batch.decode_batch(data) for _, data in self.batches[tp]]

    def _fetch_answer(self, topic: str, p: broker_pb2.FetchPartition) -> broker_pb2.FetchPartitionResponse:
        tp = (topic, p.partition)
        answer = broker_pb2.FetchPartitionResponse(partition=p.partition, high_watermark=self.end_offsets[tp])
        if p.fetch_offset > self.end_offsets[tp]:
            answer.error_code = common_pb2.OFFSET_OUT_OF_RANGE
            return answer
        chunks, size = [], 0
        for base, data in self.batches[tp]:
            last = record_batch.read_header(data).last_offset
            if last < p.fetch_offset:
                continue
            if chunks and size + len(data) > p.partition_max_bytes:
                break
            chunks.append(data)
            size += len(data)
        answer.batches = b"".join(chunks)
        return answer

    def Fetch(self, request, context):
        self.fetch_requests += 1
        with self._cond:
            def build():
                response = broker_pb2.FetchResponse()
                for topic in request.topics:
                    answer_topic = response.topics.add(topic=topic.topic)
                    for p in topic.partitions:
                        answer_topic.partitions.append(self._fetch_answer(topic.topic, p))
                return response

            response = build()
            if not any(p.batches or p.error_code for t in response.topics for p in t.partitions):
                self._cond.wait(request.max_wait_ms / 1000.0)
                response = build()
        return response

    def ListOffsets(self, request, context):
        response = broker_pb2.ListOffsetsResponse()
        for topic in request.topics:
            answer_topic = response.topics.add(topic=topic.topic)
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                self.list_offsets_asked[tp] += 1
                if (error := self.list_offsets_error.get(tp)) is not None:
                    answer_topic.partitions.add(partition=p.partition, error_code=error, error_message="fault", current_leader=self._hint())
                    continue
                offset = 0 if p.timestamp == -2 else self.end_offsets[tp]
                answer_topic.partitions.add(partition=p.partition, offset=offset, timestamp=-1)
        return response

    def OffsetForLeaderEpoch(self, request, context):
        """Every epoch asked about is the current one and ends at the log end, unless
        ``epoch_ends[tp]`` says otherwise (a truncation the consumer must detect)."""
        response = broker_pb2.OffsetForLeaderEpochResponse()
        for topic in request.topics:
            answer_topic = response.topics.add(topic=topic.topic)
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                if (error := self.epoch_end_error.get(tp)) is not None:
                    answer_topic.partitions.add(partition=p.partition, error_code=error, error_message="fault")
                    continue
                epoch, end = self.epoch_ends.get(tp, (self.leader_epoch, self.end_offsets[tp]))
                answer_topic.partitions.add(partition=p.partition, leader_epoch=epoch, end_offset=end)
        return response

    def DescribeLogs(self, request, context):
        response = broker_pb2.DescribeLogsResponse(broker_id=BROKER_ID)
        for (topic, partition), end in sorted(self.end_offsets.items()):
            response.partitions.add(topic=topic, partition=partition, is_leader=True, log_end_offset=end, high_watermark=end)
        return response
