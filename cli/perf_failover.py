"""``kraftlog perf failover``: how long a partition cannot take acks=all writes when its leader's
broker is killed (SIGKILL), frozen (SIGSTOP), shut down (SIGTERM: controlled shutdown) or cut
off by a network partition (``--mode partition``: every node in a network namespace, the
leader's cut from every other node and from the clients with ``tc`` rules, healed once a new
leader has acknowledged; ``--namespaces`` runs the other modes on the same kind of cluster).

Each round faults the broker leading partition 0 of the test topic and measures from the
signal to the first acks=all write acknowledged under a newer leader epoch. A probe makes
that write, not the load producer: it asks a live broker who leads, in a long poll that the
broker answers as soon as its metadata names a leader newer than the faulted one (as the
producer's own metadata request does during a failover), and writes only to such a leader,
naming that epoch in the request (a deposed leader answers UNKNOWN_LEADER_EPOCH to it). So the acknowledgement is known to come
from the new leader, and the figure is the cluster's failover, not the producer's retry
backoff or request timeout. An acks=all producer writes at a steady rate throughout, as
load and as the application's view: its longest wait between acknowledgements in each round
and its errors are reported alongside. Then the broker is restarted (or continued) and the
round ends once it is back in the ISR and the producer's writes are acknowledged again.

The broker processes come from ``cluster.json`` (``--data-dir`` of a cluster started with
``kraftlog cluster up --detach``); without ``--data-dir`` a throwaway local cluster is started.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from cli.output import emit, table
from cli.failover_timeline import STAGES, LogLine, parse_lines, round_stages
from cli.perf_common import DeliveryLog, Schedule, ensure_one_partition_topic, percentiles
from server_common.client_security import ClientSecurity
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.channel_pool import ChannelPool
from server_common.local_cluster import LocalCluster, Node, wait_ready
from server_common.logging_setup import configure_logging
from server_common.waiting import wait_for
from server_common.errors import ErrorCode

if TYPE_CHECKING:
    from data_plane.client import Producer

FAULT_SIGNALS = {"kill": signal.SIGKILL, "pause": signal.SIGSTOP, "shutdown": signal.SIGTERM}
PARTITION = 0
PROBE_INTERVAL_S = 0.005  # between attempts that found no newer leader (each waited in a long poll first)
PROBE_RPC_TIMEOUT_S = 0.5  # a broker that does not answer this fast is skipped for this attempt
PROBE_NEWER_LEADER_WAIT_MS = 200  # a long poll's wait for a newer leader; within PROBE_RPC_TIMEOUT_S
PROBE_ACK_TIMEOUT_MS = 1000  # how long the probe's acks=all write may wait for the high watermark
PROBE_VALUE = b"perf-failover-probe"
LOAD_VALUE = b"perf-failover-load".ljust(100, b".")


@dataclass(frozen=True)
class Leadership:
    """Partition 0's leader and replica sets as one broker's metadata shows them."""

    leader: int  # -1: offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class Round:
    """One fault and its outcome: a row of the report."""

    number: int
    victim: int
    old_epoch: int
    new_leader: int
    new_epoch: int
    failover_ms: float  # signal to the first acks=all write acknowledged by the new leader
    producer_stall_ms: float  # the load producer's longest wait between acknowledgements
    signalled_unix: float  # wall clock of the signal: the nodes' log lines are timed against it
    producer_acked_ms: float | None  # signal to the load producer's first acknowledgement after it


class Probe:
    """Talks to brokers directly, one at a time, with short deadlines: a frozen broker costs
    one timeout per attempt, and a dead one a refused connection."""

    def __init__(self, brokers: list[Node], topic: str) -> None:
        self.topic = topic
        self._addresses = {b.node_id: b.address for b in brokers}
        # gRPC's default options: a probe is small.
        self._channels = ChannelPool(broker_pb2_grpc.BrokerStub, options=[], credentials=ClientSecurity.from_environment().channel_credentials())

    def close(self) -> None:
        """Closes the channels (calls still in flight fail)."""
        self._channels.close()

    def leadership(self, skip: frozenset[int] = frozenset(), newer_than: int | None = None) -> Leadership | None:
        """Partition 0's leadership from the first broker (not in ``skip``) that answers;
        ``newer_than``: a leader epoch the broker waits to see exceeded before it answers (a
        long poll of up to PROBE_NEWER_LEADER_WAIT_MS)."""
        for broker_id in self._addresses:
            if broker_id not in skip and (seen := self._leadership_at(broker_id, newer_than)) is not None:
                return seen
        return None

    def agreed_leadership(self) -> Leadership | None:
        """Partition 0's leadership when every broker answers with the same one (None
        otherwise): a broker just back from a partition may still serve its old metadata,
        naming itself leader, until its metadata stream catches up."""
        seen = {self._leadership_at(broker_id) for broker_id in self._addresses}
        return seen.pop() if len(seen) == 1 else None

    def _leadership_at(self, broker_id: int, newer_than: int | None = None) -> Leadership | None:
        request = broker_pb2.MetadataRequest(topics=[self.topic])
        if newer_than is not None:
            request.newer_leader_than.add(topic=self.topic, partition=PARTITION, leader_epoch=newer_than)
            request.max_wait_ms = PROBE_NEWER_LEADER_WAIT_MS
        try:
            response = self._channels.stub(self._addresses[broker_id]).Metadata(request, timeout=PROBE_RPC_TIMEOUT_S)
        except grpc.RpcError:
            return None
        for topic in response.topics:
            for p in topic.partitions:  # an offline partition comes with leader -1 and an error code
                if topic.name == self.topic and p.partition == PARTITION:
                    return Leadership(p.leader_id, p.leader_epoch, tuple(p.replicas), tuple(p.isr))
        return None

    def write_under_new_leader(self, old_epoch: int, skip: frozenset[int]) -> tuple[float, Leadership] | None:
        """One attempt: if metadata names a leader with an epoch newer than ``old_epoch``, write
        one record to it with acks=all; returns when it was acknowledged, and by whom."""
        after = self.leadership(skip, newer_than=old_epoch)
        if after is None or after.leader < 0 or after.leader_epoch <= old_epoch or after.leader in skip:
            return None
        request = broker_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=PROBE_ACK_TIMEOUT_MS,
            client_id="perf-failover-probe",
            topics=[
                broker_pb2.TopicProduceData(
                    topic=self.topic,
                    partitions=[
                        broker_pb2.PartitionProduceData(
                            partition=PARTITION,
                            records=[common_pb2.Record(value=PROBE_VALUE)],
                            current_leader_epoch=after.leader_epoch,
                        )
                    ],
                )
            ],
        )
        try:
            response = self._channels.stub(self._addresses[after.leader]).Produce(request, timeout=PROBE_ACK_TIMEOUT_MS / 1000 + PROBE_RPC_TIMEOUT_S)
        except grpc.RpcError:
            return None
        acked_at = time.monotonic()
        answer = response.topics[0].partitions[0]
        return (acked_at, after) if answer.error_code == ErrorCode.NONE else None


def _fault(cluster: LocalCluster, node: Node, mode: str) -> Callable[[], None] | None:
    """Fault the leader: a signal, or for ``partition`` its namespace cut from everyone
    (returns the heal that removes the cut)."""
    if mode == "partition":
        from chaos.netns_faults import apply

        return apply("net-partition", cluster, [node.name], {"clients": True}, 0)
    cluster.signal(node, FAULT_SIGNALS[mode])
    return None


def _revive(cluster: LocalCluster, node: Node, mode: str, detach: bool, timeout_s: float, heal: Callable[[], None] | None = None) -> None:
    """Undo the fault: heal a partition; SIGCONT a frozen broker; restart a killed or
    shut-down one once it has exited."""
    if heal is not None:
        heal()
        return
    if mode == "pause":
        cluster.signal(node, signal.SIGCONT)
        return
    wait_for(lambda: not cluster.is_running(node), timeout_s, f"{node.name} (pid {node.pid}) to exit")
    cluster.start_node(node, detach)


def _wait_healthy(cluster: LocalCluster, probe: Probe, deliveries: DeliveryLog, since_s: float, timeout_s: float) -> Leadership:
    """Every broker live, the partition led with every replica in its ISR as every broker
    sees it, and the producer's
    writes acknowledged after ``since_s``: the state every round starts from."""
    wait_ready(cluster, timeout_s)

    def fully_in_sync() -> Leadership | None:
        now = probe.agreed_leadership()
        return now if now is not None and now.leader >= 0 and set(now.isr) == set(now.replicas) else None

    leadership = wait_for(fully_in_sync, timeout_s, f"{probe.topic}-{PARTITION} to be led with every replica in its ISR, as every broker sees it")
    wait_for(lambda: deliveries.acked_after(since_s), timeout_s, "the producer's writes to be acknowledged again")
    return leadership


def _round(number: int, cluster: LocalCluster, probe: Probe, deliveries: DeliveryLog, args: argparse.Namespace, detach: bool) -> Round:
    """Fault the leader, time the first write under a new leader, undo the fault, wait until whole."""
    before = _wait_healthy(cluster, probe, deliveries, time.monotonic(), args.round_timeout_s)
    victim = cluster.node("broker", before.leader)
    victim_only = frozenset({victim.node_id})
    started, signalled_unix = time.monotonic(), time.time()
    heal = _fault(cluster, victim, args.mode)
    revived = False
    try:
        if len(before.replicas) == 1:
            # Nobody else can lead (replication factor 1): bring the broker back once the
            # controller has taken leadership from it; the next epoch is then its own.
            wait_for(
                lambda: (now := probe.leadership(victim_only)) is not None
                and (now.leader != before.leader or now.leader_epoch > before.leader_epoch),
                args.round_timeout_s,
                f"the controller to take leadership of {probe.topic}-{PARTITION} from broker {victim.node_id}",
            )
            _revive(cluster, victim, args.mode, detach, args.round_timeout_s, heal)
            revived = True
        acked_at, after = wait_for(
            lambda: probe.write_under_new_leader(before.leader_epoch, frozenset() if revived else victim_only),
            args.round_timeout_s,
            f"an acks=all write acknowledged by a leader newer than epoch {before.leader_epoch}",
            interval_s=PROBE_INTERVAL_S,
        )
    finally:
        if not revived:
            _revive(cluster, victim, args.mode, detach, args.round_timeout_s, heal)
    _wait_healthy(cluster, probe, deliveries, time.monotonic(), args.round_timeout_s)
    return Round(
        number,
        victim.node_id,
        before.leader_epoch,
        after.leader,
        after.leader_epoch,
        round((acked_at - started) * 1000, 3),
        deliveries.longest_gap_ms(started, time.monotonic()),
        signalled_unix,
        None if (first := deliveries.first_ack_after(started)) is None else round((first - started) * 1000, 3),
    )


def _load(producer: Producer, topic: str, rate: float, deliveries: DeliveryLog, stop: threading.Event) -> None:
    """The load producer's thread: acks=all writes to partition 0 at a fixed rate."""
    for seq in Schedule(rate).ticks(stop):
        producer.send(topic, LOAD_VALUE, partition=PARTITION, on_delivery=deliveries.callback(seq, time.monotonic_ns()))




@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[tuple[LocalCluster, bool]]:
    """The cluster of ``--data-dir`` (restarted brokers detach, as ``cluster up --detach``
    started them), or a throwaway one, stopped at the end; its directory is deleted unless
    the run failed (including any failed producer record), so that its logs can be read."""
    namespaces = args.namespaces or args.mode == "partition"
    if args.data_dir is not None:
        if namespaces:
            raise ValueError("--mode partition and --namespaces start their own cluster in network namespaces: leave out --data-dir")
        yield LocalCluster.load(args.data_dir), True
        return
    if namespaces:
        yield from _namespace_cluster(args)
        return
    with throwaway_cluster("kraftlog-failover-", brokers=args.brokers) as cluster:
        yield cluster, False


@contextlib.contextmanager
def throwaway_cluster(prefix: str, controllers: int = 3, brokers: int = 3) -> Iterator[LocalCluster]:
    """A local cluster in a new temporary directory, ready, stopped at the end; the directory
    is deleted unless the block failed, so that its logs can be read."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = LocalCluster.create(directory, controllers=controllers, brokers=brokers)
    print(f"starting a local cluster in {directory}", file=sys.stderr, flush=True)
    cluster.start()
    try:
        wait_ready(cluster)
        yield cluster
    except BaseException:
        print(f"cluster logs kept in {directory / 'logs'}", file=sys.stderr)
        raise
    finally:
        cluster.stop()
    shutil.rmtree(directory)


def _namespace_cluster(args: argparse.Namespace) -> Iterator[tuple[LocalCluster, bool]]:
    """A throwaway cluster with every node in its own network namespace (removed, with its
    directory, at the end; the directory is kept when the run failed)."""
    from chaos import netns
    from chaos.chaos_cluster import ClusterSettings
    from chaos.netns_cluster import netns_cluster

    reason = netns.unavailable_reason()
    if reason:
        raise ValueError(reason)
    directory = Path(tempfile.mkdtemp(prefix="kraftlog-failover-netns-"))
    with netns_cluster(directory, ClusterSettings(brokers=args.brokers), lambda line: print(line, file=sys.stderr, flush=True)) as cluster:
        try:
            yield cluster, False
        except BaseException:
            print(f"cluster logs kept in {directory / 'logs'}", file=sys.stderr)
            raise
    shutil.rmtree(directory)


def run(args: argparse.Namespace) -> int:
    from data_plane.client import Producer

    configure_logging(level="WARNING")  # the producer's retries during a failover are expected, not news
    if args.kills < 1 or args.replication_factor < 1 or args.rate <= 0:
        raise ValueError("--kills, --replication-factor and --rate must be positive")
    min_insync = args.min_insync_replicas or min(2, args.replication_factor)
    rounds: list[Round] = []
    deliveries = DeliveryLog()
    stop = threading.Event()
    with _cluster(args) as (cluster, detach):
        if len(cluster.brokers) < 2:
            raise ValueError("perf failover needs at least 2 brokers: one to fault, one to ask who leads")
        ensure_one_partition_topic(cluster.bootstrap, args.topic, args.replication_factor, {"min.insync.replicas": str(min_insync)})
        probe = Probe(cluster.brokers, args.topic)
        with (
            contextlib.closing(probe),
            Producer(cluster.bootstrap, acks="all") as producer,
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="perf-failover-load") as pool,
        ):
            loading = pool.submit(_load, producer, args.topic, args.rate, deliveries, stop)
            try:
                first = _wait_healthy(cluster, probe, deliveries, time.monotonic(), args.round_timeout_s)
                for number in range(1, args.kills + 1):
                    done = _round(number, cluster, probe, deliveries, args, detach)
                    rounds.append(done)
                    print(
                        f"  round {number}/{args.kills}: {args.mode} broker {done.victim} (leader, epoch {done.old_epoch}) -> "
                        f"broker {done.new_leader} epoch {done.new_epoch} acknowledged after {done.failover_ms:.1f} ms; "
                        f"producer stalled {done.producer_stall_ms:.1f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
                    if loading.done():
                        break  # the load thread failed: its error is raised below
            finally:
                stop.set()
            loading.result()
        document = {
            "mode": args.mode,
            "topic": args.topic,
            "replication_factor": len(first.replicas),
            "min_insync_replicas": min_insync,
            "kills": len(rounds),
            "failover_ms": _p50_max([r.failover_ms for r in rounds]),
            "producer": {
                "rate": args.rate,
                "acked": deliveries.acked,
                "failed": deliveries.failed,
                "first_error": deliveries.first_error,
                "stall_ms": _p50_max([r.producer_stall_ms for r in rounds]),
            },
            "rounds": [asdict(r) | {"stages_ms": stages} for r, stages in zip(rounds, _stages(cluster, rounds))],
        }
        document["timeline_ms"] = _timeline([r["stages_ms"] for r in document["rounds"]])
        _report(args.json, document)
        if deliveries.failed:  # inside the cluster's block: a throwaway cluster keeps its logs
            raise ValueError(f"{deliveries.failed:,} records of the acks=all producer failed: {deliveries.first_error}")
    return 0


def _p50_max(samples_ms: list[float]) -> dict[str, float]:
    figures = percentiles(samples_ms)
    return {"p50": figures["p50"], "p99": figures["p99"], "max": figures["max"]}


def _stages(cluster: LocalCluster, rounds: list[Round]) -> list[dict[str, float | None]]:
    """Each round's stages (``failover_timeline.py``), from the nodes' logs."""
    def lines(node: Node) -> list[LogLine]:
        path = cluster.log_path(node)
        return parse_lines(path.read_text(errors="replace").splitlines()) if path.exists() else []

    controllers = [lines(node) for node in cluster.controllers]
    brokers = {node.node_id: lines(node) for node in cluster.brokers}
    return [round_stages(r.signalled_unix, r.victim, r.new_leader, controllers, brokers, r.failover_ms, r.producer_acked_ms) for r in rounds]


def _timeline(stages: list[dict[str, float | None]]) -> dict[str, dict[str, float] | None]:
    """p50/p99/max of each stage over the rounds; None for a stage no round's logs showed."""
    summary: dict[str, dict[str, float] | None] = {}
    for stage in STAGES:
        seen = [s[stage] for s in stages if s[stage] is not None]
        summary[stage] = _p50_max(seen) if seen else None
    return summary


def _report(as_json: bool, document: dict) -> None:
    rows = [
        [r["number"], r["victim"], r["old_epoch"], r["new_leader"], r["new_epoch"], r["failover_ms"], r["producer_stall_ms"]]
        for r in document["rounds"]
    ]
    failover, producer = document["failover_ms"], document["producer"]
    human = (
        table(["ROUND", "FAULTED", "EPOCH", "NEW LEADER", "NEW EPOCH", "FAILOVER MS", "PRODUCER STALL MS"], rows)
        + f"\n{document['mode']} of the leader, {document['kills']} rounds, replication factor {document['replication_factor']}, "
        f"min.insync.replicas {document['min_insync_replicas']}:\n"
        f"failover (signal to the first acks=all write acknowledged by the new leader): p50 {failover['p50']} ms, p99 {failover['p99']} ms, worst {failover['max']} ms\n"
        f"producer at {producer['rate']:,}/s: {producer['acked']:,} acked, {producer['failed']:,} failed; "
        f"longest stall per round p50 {producer['stall_ms']['p50']} ms, p99 {producer['stall_ms']['p99']} ms, worst {producer['stall_ms']['max']} ms\n"
        "timeline, ms after the signal (the stages: cli/failover_timeline.py):\n"
        + table(["STAGE", "P50", "P99", "WORST"], [[stage, *(("-",) * 3 if f is None else (f["p50"], f["p99"], f["max"]))]
                                                    for stage, f in document["timeline_ms"].items()])
    )
    emit(as_json, document, human)
