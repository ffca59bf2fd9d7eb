"""The catalogue of scenarios: which faults, on whom, and, for the ``unsafe-`` negative
controls, which broken broker behaviour runs and which anomalies it must cause.

Timings assume the chaos cluster's short timeouts (session 3 s, replica lag 3 s): a
"zombie" pause must outlast the session timeout, a slow follower the replica lag time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from chaos.chaos_cluster import ClusterSettings
from chaos.schedule import FaultSpec

SESSION_S = ClusterSettings().session_timeout_ms / 1000
LAG_S = ClusterSettings().replica_lag_time_max_ms / 1000
PROXIED_CLIENT_ROLES = ("replication-links", "client-links", "leader-client-link", "follower-replication-link")
WRITE_LOSS = frozenset({"lost-write", "unseen", "inconsistent-offsets", "replicas-differ"})


@dataclass(frozen=True)
class Scenario:
    """A named fault mix. ``expected`` is empty for scenarios a correct cluster passes, and
    for ``unsafe-`` ones the anomalies of which at least one must be found."""

    name: str
    description: str
    specs: list[FaultSpec]
    cluster: ClusterSettings = ClusterSettings()
    expected: frozenset[str] = field(default_factory=frozenset)
    workload: str = "records"  # "group" (chaos/group_run.py), "txn" (chaos/txn_run.py), "quorum" (chaos/quorum_run.py): a run with its own faults, not ``specs``
    faults: tuple[str, ...] = ()  # a "txn" run's faults to draw from (empty: chaos/txn_run.py's TXN_FAULTS)

    @property
    def needs_proxied_clients(self) -> bool:
        """Whether a fault acts on client or replication links (which need broker flags)."""
        return self.workload != "records" or any(s.role in PROXIED_CLIENT_ROLES or s.params.get("replication_latency_ms") for s in self.specs)


def _toxic(role: str, duration_s: tuple[float, float], gap_s: tuple[float, float], **params: object) -> FaultSpec:
    return FaultSpec("toxic", role, duration_s, gap_s, dict(params))


# Replication responses delayed 2.5 s: a follower's HW trails the leader's by that much of
# acknowledged data, and a follower that truncated cannot refetch before the next kill.
# Slow followers must stay in the ISR (or killing the leader leaves the partition offline).
_KIP101 = {"kills": 2, "replication_latency_ms": 2500, "lag_build_up_s": 4.0}
_KIP101_LAG_MS = 30_000
# A follower down long enough to miss acknowledged writes (200 a second), then back behind a
# replication link slower than the time it takes to kill the leader once it is unfenced.
_LAGGING = {"down_s": 3.0, "replication_latency_ms": 4000}
# Paused until metadata names another leader (at least this long), then resumed: every
# step is a leader change with the old leader alive, whatever the seed.
_ZOMBIE = FaultSpec("depose-leader", "leader", (SESSION_S + 1.5, SESSION_S + 3), (4, 7))
_LEADER_KILLS = [FaultSpec("kill", "leader", (1, 4), (3, 6))]
_SAFE: list[Scenario] = [
    Scenario("leader-kill-loop", "SIGKILL a partition leader, restart it, again and again", _LEADER_KILLS),
    Scenario("follower-kill", "SIGKILL a follower, restart it", [FaultSpec("kill", "follower", (2, 6), (3, 6))]),
    Scenario("controller-kill", "SIGKILL the active controller, restart it", [FaultSpec("kill", "active-controller", (2, 5), (3, 6))]),
    Scenario(
        "controller-isolation",
        "cut the active controller's Raft links (brokers still reach it), shorter or longer than the session timeout: the others elect a new one, it rejoins when healed",
        [FaultSpec("cut", "active-controller-raft-links", (2, SESSION_S + 5), (4, 8))],
    ),
    Scenario("zombie-leader", "SIGSTOP a leader until metadata names another, then SIGCONT it", [_ZOMBIE]),
    Scenario("short-pause", "SIGSTOP a leader for less than the session timeout", [FaultSpec("pause", "leader", (0.5, SESSION_S - 1), (2, 5))]),
    Scenario(
        "leader-isolated-from-controller",
        "cut a leader's links to every controller (clients and followers still reach it) past the session timeout",
        [FaultSpec("cut", "leader-controller-links", (SESSION_S + 2, SESSION_S + 4), (4, 7))],
    ),
    Scenario(
        "slow-follower",
        "slow one follower's replication link (latency with jitter, or a bandwidth cap) past the replica lag time: it leaves the ISR and rejoins",
        [
            _toxic("follower-replication-link", (LAG_S + 2, LAG_S + 5), (5, 8), type="latency", latency=400, jitter=200),
            _toxic("follower-replication-link", (LAG_S + 2, LAG_S + 5), (5, 8), type="bandwidth", rate=8),
        ],
    ),
    Scenario(
        "flapping-replication",
        "reset every replication connection now and then (reset_peer), or cut them briefly",
        [
            _toxic("replication-links", (0.5, 2), (0.5, 2), type="reset_peer", timeout=200),
            FaultSpec("cut", "replication-links", (0.3, 1.5), (1, 3)),
        ],
    ),
    Scenario(
        "client-network",
        "clients' link to a leader: latency, slicing, slow close, stalls, byte limits and bandwidth caps",
        [
            _toxic("leader-client-link", (2, 5), (2, 4), type="latency", latency=300, jitter=150),
            _toxic("leader-client-link", (2, 5), (2, 4), type="slicer", average_size=64, size_variation=32, delay=200),
            _toxic("leader-client-link", (2, 5), (2, 4), type="slow_close", delay=1000),
            _toxic("leader-client-link", (1, 3), (2, 4), type="timeout", timeout=500),
            _toxic("leader-client-link", (2, 5), (2, 4), type="limit_data", bytes=4096),
            _toxic("leader-client-link", (2, 5), (2, 4), type="bandwidth", rate=16, stream="upstream"),
        ],
    ),
    Scenario(
        "rolling-restart",
        "restart every broker in turn (SIGTERM: controlled shutdown); after each, full ISRs and identical replicas within 10 s",
        [FaultSpec("rolling-restart", "all-brokers", (0.1, 0.2), (5, 10))],
    ),
    Scenario(
        "restart-loop",
        "restart brokers again and again under load: one (SIGTERM or SIGKILL, then start), each in turn, all at once, or with the controllers; "
        "after each restart every partition back in its full ISR within 10 s with identical replicas",
        [
            FaultSpec(fault, role, (0.1, 0.2), (2, 4), {"signal": how})
            for fault, role in (("restart", "broker"), ("rolling-restart", "all-brokers"), ("restart", "all-brokers"), ("restart", "cluster"))
            for how in ("SIGTERM", "SIGKILL")
        ],
    ),
    Scenario("graceful-restart", "restart one broker with SIGTERM (controlled shutdown)", [FaultSpec("graceful-restart", "broker", (0.1, 0.2), (3, 6))]),
    Scenario("all-brokers-killed", "SIGKILL every broker at once, restart them all", [FaultSpec("kill", "all-brokers", (1, 4), (6, 10))]),
    Scenario("quorum-loss", "SIGKILL a majority of controllers (the active one included), restore them", [FaultSpec("kill", "controller-majority", (3, 8), (5, 8))]),
    Scenario(
        "lagging-follower-leader-kill",
        "SIGKILL a follower, restart it behind a slow replication link, then SIGKILL the leader: the in-sync survivor leads, never the lagging replica",
        [FaultSpec("kill-leader-while-follower-lags", "leader", (4, 6), (5, 8), _LAGGING)],
    ),
]
# Disk faults need a cluster of their own (tmpfs data dirs, the fault-injection hook), so
# they are not part of ``mix``.
_DISK: list[Scenario] = [
    Scenario(
        "disk-full",
        "fill the leader's data directory (a 32 MiB tmpfs: a real ENOSPC): its replica goes offline, the controller moves the leadership; healed by freeing the disk and restarting the broker",
        [FaultSpec("disk-full", "leader", (3, 6), (4, 7))],
        ClusterSettings(broker_disk_mb=32),
    ),
    Scenario(
        "disk-io-error",
        "EIO on the leader's appends or segment rolls (the storage fault-injection hook): its replica goes offline, the controller moves the leadership; healed by a restart",
        [FaultSpec("disk-io-error", "leader", (3, 6), (4, 7), {"operation": operation}) for operation in ("append", "roll")],
        ClusterSettings(storage_fault_injection=True),
    ),
]
# Power loss (docs/durability.md): under --durability fsync every acknowledged write survives
# the loss of any set of replicas' power; under the default (page-cache) the loss of every
# replica's power takes what was acknowledged since the last fsync, which the report names.
_DURABLE = ClusterSettings(durability="fsync")
_POWER_LOSS_REPLICAS = FaultSpec("power-loss", "replicas", (1, 3), (4, 7))
_POWER_LOSS: list[Scenario] = [
    Scenario("power-loss-follower", "cut a follower's power (SIGKILL, then its files cut back to their last fsync), "
             "restart it; brokers with --durability fsync", [FaultSpec("power-loss", "follower", (1, 3), (3, 6))], _DURABLE),
    Scenario("power-loss-leader", "cut a partition leader's power, restart it; brokers with --durability fsync",
             [FaultSpec("power-loss", "leader", (1, 3), (3, 6))], _DURABLE),
    Scenario("power-loss-replicas", "cut the power of every replica of a partition at once, restart them; brokers with "
             "--durability fsync: every acknowledged write was fsynced by every in-sync replica", [_POWER_LOSS_REPLICAS], _DURABLE),
    Scenario("power-loss-controllers", "cut every controller's power at once (the Raft journal cut back to its last "
             "fsync), restart them", [FaultSpec("power-loss", "all-controllers", (1, 3), (5, 8))], _DURABLE),
]
_SAFE += _POWER_LOSS
# Durable brokers: the mix includes power losses, which only --durability fsync survives.
_MIX = Scenario("mix", "a random mix of every fault above but the disk faults (brokers with --durability fsync)", [spec for s in _SAFE for spec in s.specs], _DURABLE)
# The same faults with mutual TLS on every port and encrypted Raft links (proxies forward the
# TLS bytes): security must not change what the checker finds.
_SECURE = Scenario("secure-leader-kill-loop", "leader-kill-loop on a cluster with mutual TLS on every port and encrypted Raft links",
                   _LEADER_KILLS, ClusterSettings(secure=True))
_UNSAFE: list[Scenario] = [
    Scenario(
        "unsafe-truncate-to-hw",
        "brokers truncate to their HW on becoming follower (pre-KIP-101); replication slowed, then the leader and its successor killed in turn",
        [FaultSpec("kill-leaders-in-turn", "leader", (6, 8), (6, 9), _KIP101)],
        ClusterSettings(unsafe="truncate-to-hw", replica_lag_time_max_ms=_KIP101_LAG_MS),
        WRITE_LOSS,
    ),
    Scenario(
        "unsafe-ack-before-replication",
        "acks=all answered after the leader's own append; replication slowed, then the leader killed",
        [FaultSpec("kill-leaders-in-turn", "leader", (6, 8), (6, 9), {**_KIP101, "kills": 1})],
        ClusterSettings(unsafe="ack-before-replication", replica_lag_time_max_ms=_KIP101_LAG_MS),
        WRITE_LOSS,
    ),
    Scenario(
        "unsafe-skip-epoch-fencing",
        "leader-epoch checks skipped (a deposed leader ignores the newer epoch and goes on answering as leader); every step "
        "pauses a leader until metadata names another, then resumes it: the observer, asking every broker with the newest "
        "epoch, must be answered by the stale leader with its stale HW",
        [_ZOMBIE],
        ClusterSettings(unsafe="skip-epoch-fencing"),
        WRITE_LOSS | {"duplicate", "hw-backwards", "read-above-hw", "final-read-gap", "unsent-value", "under-replicated"},
    ),
    Scenario(
        "unsafe-stall-fetcher",
        "a restarted broker's followers never fetch the partitions it had on disk; one broker restarted at a time (SIGTERM or SIGKILL)",
        [FaultSpec("restart", "broker", (0.1, 0.2), (2, 4), {"signal": how}) for how in ("SIGTERM", "SIGKILL")],
        ClusterSettings(unsafe="stall-fetcher"),
        frozenset({"under-replicated"}),
    ),
    Scenario(
        "unsafe-elect-outside-isr-elr",
        "the controller elects a replica outside the ISR and ELR whenever one is usable; every step kills a follower, restarts it behind "
        "a slow replication link and kills the leader once it is unfenced: it is elected, missing acknowledged writes",
        [FaultSpec("kill-leader-while-follower-lags", "leader", (4, 6), (5, 8), _LAGGING)],
        ClusterSettings(controller_unsafe="elect-outside-isr-elr"),
        WRITE_LOSS,
    ),
]
_UNSAFE += [
    Scenario(
        "unsafe-skip-fsync",
        "--durability fsync whose group commit skips the fsync it promises (reporting offsets durable anyway); "
        "every replica of a partition loses power at once",
        [_POWER_LOSS_REPLICAS], ClusterSettings(durability="fsync", unsafe="skip-fsync"), WRITE_LOSS,
    ),
    Scenario(
        "unsafe-page-cache-power-loss",
        "the default durability (page-cache: acks=all means every in-sync replica has the batch in memory) under the "
        "loss of every replica's power: what was acknowledged since the last fsync is lost, as docs/durability.md says, "
        "and the report names the power loss and the unflushed offsets",
        [_POWER_LOSS_REPLICAS], ClusterSettings(), WRITE_LOSS,
    ),
]
# Real faults: nodes in network namespaces with tc rules on their links (root, ip and tc
# needed), and one node's wall clock shifted. Durations straddle the session timeout.
_NETNS = ClusterSettings(namespaces=True)
_CLOCK_OFFSETS_MS = [-3_600_000, -60_000, -5_000, 5_000, 60_000, 3_600_000]
_REAL_FAULTS: list[Scenario] = [
    Scenario(
        "netns-leader-partition",
        "a partition leader's namespace cut from every other node both ways (clients still reach it), or from everyone, shorter or longer than the session timeout",
        [FaultSpec("net-partition", "leader", (2, SESSION_S + 4), (4, 7)), FaultSpec("net-partition", "leader", (2, SESSION_S + 4), (4, 7), {"clients": True})],
        _NETNS,
    ),
    Scenario(
        "netns-one-way",
        "asymmetric partition: a leader's packets to every other node dropped while it still hears them, or the other way round",
        [FaultSpec("net-one-way", "leader", (2, SESSION_S + 4), (4, 7), {"direction": d}) for d in ("out", "in")],
        _NETNS,
    ),
    Scenario(
        "netns-bridge",
        "bridge partition: the other nodes split in two sides that cannot reach each other while both reach one node (a leader or the active controller)",
        [FaultSpec("net-bridge", role, (2, SESSION_S + 4), (4, 7)) for role in ("leader", "active-controller")],
        _NETNS,
    ),
    Scenario(
        "netns-controller-partition",
        "the active controller's namespace cut from every other node (brokers and voters), shorter or longer than the session timeout",
        [FaultSpec("net-partition", "active-controller", (2, SESSION_S + 4), (4, 7))],
        _NETNS,
    ),
    Scenario(
        "netns-lossy-links",
        "what a leader or follower sends to every other node: a share of packets dropped, a slow link, or half of it slowed so the rest overtakes it (reordering)",
        [
            *(FaultSpec("net-shape", role, (2, LAG_S + 4), (3, 6), {"loss_percent": p}) for role in ("leader", "follower") for p in (25, 50)),
            FaultSpec("net-shape", "leader", (2, LAG_S + 4), (3, 6), {"rate": "256kbit"}),
            FaultSpec("net-shape", "leader", (2, LAG_S + 4), (3, 6), {"rate": "512kbit", "reorder": True}),
        ],
        _NETNS,
    ),
    Scenario(
        "clock-skew",
        "one node's wall clock (a leader, a follower or the active controller) set off by 5 s to an hour either way, then jumped back",
        [FaultSpec("clock-offset", role, (3, 8), (2, 5), {"offsets_ms": _CLOCK_OFFSETS_MS}) for role in ("leader", "follower", "active-controller")],
    ),
]
# A fixed delay needs netem, which not every kernel has (this one may not): these nodes are
# joined through the userspace link emulator instead (chaos/link_emulator.py).
_DELAYS = Scenario(
    "netns-delay",
    "a leader's or a follower's links to every other node slowed by a fixed delay with jitter (200 ms ± 100 ms), or by "
    "more than the replica lag time (the follower leaves the ISR and comes back); nodes joined through the userspace link emulator",
    [FaultSpec("net-shape", role, (3, 6), (3, 6), {"delay_ms": 200, "jitter_ms": 100}) for role in ("leader", "follower")]
    + [FaultSpec("net-shape", "follower", (LAG_S + 3, LAG_S + 5), (3, 6), {"delay_ms": int(LAG_S * 1000) + 1000})],
    ClusterSettings(namespaces=True, link_emulator=True),
)
_NETNS_MIX = Scenario(
    "netns-mix",
    "a random mix of every namespace, clock and process fault, nodes in namespaces",
    [spec for s in _REAL_FAULTS for spec in s.specs] + [spec for s in _SAFE for spec in s.specs if spec.fault in ("kill", "pause", "depose-leader")],
    _NETNS,
)
# Consumer groups (chaos/group_run.py): member processes, the group checks, faults of their own.
_GROUP_CLUSTER = ClusterSettings(controllers=1)
_GROUP: list[Scenario] = [
    Scenario("group-kills", "a consumer group of member processes reads while brokers, the group's coordinator and members are "
             "SIGKILLed, members leave, and the coordinator's client or replication links are cut", [], _GROUP_CLUSTER, workload="group"),
    Scenario("unsafe-group-assign-before-revoke", "group-kills with coordinators that hand a partition to its new owner before the "
             "old one revoked it (--unsafe-testing assign-before-revoke)", [], replace(_GROUP_CLUSTER, unsafe="assign-before-revoke"),
             frozenset({"double-owner"}), workload="group"),
]
# Transactions (chaos/txn_run.py): transactional producers, read_committed readers, the
# transaction checks, faults aimed at the transactions' coordinators.
_TXN: list[Scenario] = [
    Scenario("txn-kills", "transactional producers (a share of transactions aborted), a consume-transform-produce group and "
             "read_committed readers while brokers and "
             "the transactions' coordinators are SIGKILLed and the coordinators' client or replication links are cut", [], _GROUP_CLUSTER,
             workload="txn"),
    Scenario("unsafe-txn-read-past-lso", "txn-kills with brokers serving read_committed reads up to the HW, past the LSO and without "
             "the aborted transactions (--unsafe-testing read-committed-past-lso)", [],
             replace(_GROUP_CLUSTER, unsafe="read-committed-past-lso"), frozenset({"G1a", "G1b"}), workload="txn"),
    Scenario("unsafe-txn-markers-before-decision", "transactional producers and read_committed readers while the busiest "
             "coordinator's replication is stalled, then it is SIGKILLed, again and again, with coordinators that write a transaction's "
             "markers before its decision is durable (--unsafe-testing markers-before-decision)", [],
             replace(_GROUP_CLUSTER, unsafe="markers-before-decision"), frozenset({"G1a", "G1b"}), workload="txn",
             faults=("stall-and-kill-coordinator",)),
]
# The controller quorum (chaos/quorum_run.py): controllers added and removed while a client
# creates topics, brokers serve a producer and a reader asks every controller.
_QUORUM_CLUSTER = ClusterSettings(controllers=3, brokers=2)
_QUORUM: list[Scenario] = [
    Scenario("quorum-changes", "controllers added (as observers that catch up, then voters) and removed (the active one "
             "included) every few seconds while a client creates topics one after another, brokers serve a producer, and every "
             "controller is read", [], _QUORUM_CLUSTER, workload="quorum"),
    Scenario("unsafe-quorum-join-before-caught-up", "quorum-changes with controllers that serve reads and become voters before "
             "catching up with the metadata log (--unsafe-testing join-before-caught-up)", [],
             replace(_QUORUM_CLUSTER, controller_unsafe="join-before-caught-up"), frozenset({"stale-read", "lost-metadata", "reordered-metadata"}),
             workload="quorum"),
]
SCENARIOS: dict[str, Scenario] = {s.name: s for s in [*_SAFE, _MIX, _SECURE, *_DISK, *_UNSAFE, *_REAL_FAULTS, _NETNS_MIX, _DELAYS, *_GROUP, *_TXN, *_QUORUM]}
