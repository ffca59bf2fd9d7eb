"""The faults of the coordinator scenarios (consumer groups, transactions), aimed at whichever
broker coordinates the workload when the fault starts:

- ``kill-coordinator`` / ``kill-broker``: SIGKILL the coordinator's broker, or another one,
  restarted after a draw from ``down_s``;
- ``cut-coordinator-clients``: the coordinator's client link cut (every client loses it);
- ``cut-coordinator-replication``: the replication links into the coordinator's broker cut
  (the followers of what it leads, its internal partition included, stop fetching, so its
  writes stall and, past the replica lag time, fall below min.insync.replicas),

each cut restored after a draw from ``cut_s``; and ``STALL_AND_KILL`` (for the transactional
scenarios): the replication links into the coordinator's broker cut for a draw from
``STALL_S`` (shorter than the replica lag time, so its followers stay in the ISR while its
latest writes reach none of them), then SIGKILL it: a follower without those writes takes
over, so whatever the coordinator had decided but not yet replicated is lost. With
``hold_commits`` (the transactional runs) the stall does not wait for a decision to happen
along: the producers the coordinator serves are held just before their commit
(`CommitGate`), the links cut, then the producers released, so every stall meets commits
whose decisions it loses. ``heal`` brings back what is due; the run's fault loop calls it on
every tick and with ``inf`` at the end.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from chaos.chaos_cluster import ChaosCluster
from chaos.network import client_link, replication_link
from server_common.local_cluster import Node, wait_ready

FAULTS = ("kill-coordinator", "kill-broker", "cut-coordinator-clients", "cut-coordinator-replication")
STALL_AND_KILL = "stall-and-kill-coordinator"
STALL_S = (1.0, 2.0)  # below the chaos cluster's replica lag time (3 s)


class CoordinatorFaults:
    """Broker kills and link cuts on one cluster; ``coordinator()`` names the broker to aim at
    (-1: unknown now)."""

    def __init__(self, cluster: ChaosCluster, rng: random.Random, coordinator: Callable[[], int],
                 down_s: tuple[float, float], cut_s: tuple[float, float],
                 hold_commits: Callable[[int], Callable[[], None]] | None = None) -> None:
        self.cluster, self.rng, self.coordinator = cluster, rng, coordinator
        # Holds the commits of broker N's producers at their gates; returns what releases them.
        self.hold_commits = hold_commits
        self.down_s, self.cut_s = down_s, cut_s
        self.down: dict[str, tuple[Node, float]] = {}  # killed brokers, restarted at the time given
        self.cut: dict[str, float] = {}  # cut links, restored at the time given

    def heal(self, now: float) -> None:
        """Restarts the killed brokers and restores the cut links whose time has come (all of
        them, and waits for the cluster to be ready, when ``now`` is ``inf``)."""
        for name, (node, until) in list(self.down.items()):
            if now >= until:
                self.cluster.start_node(node)
                del self.down[name]
        for link, until in list(self.cut.items()):
            if now >= until:
                self.cluster.network.restore(link)
                del self.cut[link]
        if now == float("inf"):
            wait_ready(self.cluster)

    def inject(self, fault: str) -> str:
        """Carries out one of ``FAULTS``; returns what was done."""
        cluster, rng = self.cluster, self.rng
        if fault.startswith("cut-"):
            coordinator = self.coordinator()
            if coordinator < 0 or any(b.node_id == coordinator and b.name in self.down for b in cluster.brokers):
                return f"{fault}: skipped (no coordinator up to cut off)"
            links = ([client_link(coordinator)] if fault == "cut-coordinator-clients"
                     else [replication_link(b.node_id, coordinator) for b in cluster.brokers if b.node_id != coordinator])
            until = time.monotonic() + rng.uniform(*self.cut_s)
            for link in links:
                cluster.network.cut(link)
                self.cut[link] = until
            return f"{fault}: cut {', '.join(links)} for {until - time.monotonic():.1f}s (coordinator broker {coordinator})"
        if fault == STALL_AND_KILL:
            return self._stall_and_kill()
        assert fault in ("kill-coordinator", "kill-broker"), f"unknown fault {fault}"
        up = [b for b in cluster.brokers if b.name not in self.down]
        if len(up) < 2:
            return f"{fault}: skipped (only {len(up)} broker up)"
        coordinator = self.coordinator()
        victim = rng.choice([b for b in up if (b.node_id == coordinator) == (fault == "kill-coordinator")] or up)
        cluster.kill(victim)
        self.down[victim.name] = (victim, time.monotonic() + rng.uniform(*self.down_s))
        return f"{fault}: SIGKILL {victim.name} (coordinator was broker {coordinator})"

    def _stall_and_kill(self) -> str:
        cluster, coordinator = self.cluster, self.coordinator()
        victim = next((b for b in cluster.brokers if b.node_id == coordinator and b.name not in self.down), None)
        if victim is None or sum(1 for b in cluster.brokers if b.name not in self.down) < 2:
            return f"{STALL_AND_KILL}: skipped (coordinator {coordinator} down or unknown, or no other broker up)"
        links = [replication_link(b.node_id, coordinator) for b in cluster.brokers if b.node_id != coordinator]
        stall_s = self.rng.uniform(*STALL_S)
        release = self.hold_commits(coordinator) if self.hold_commits is not None else None
        try:
            for link in links:
                cluster.network.cut(link)
        finally:
            if release is not None:
                release()
        time.sleep(stall_s)  # the fault's length: the coordinator's writes pile up unreplicated
        cluster.kill(victim)
        for link in links:
            cluster.network.restore(link)
        self.down[victim.name] = (victim, time.monotonic() + self.rng.uniform(*self.down_s))
        return f"{STALL_AND_KILL}: cut {', '.join(links)} for {stall_s:.1f}s, then SIGKILL {victim.name}"

    def play(self, duration_s: float, gap_s: tuple[float, float], faults: tuple[str, ...], inject: Callable[[str], str],
             clock: Callable[[], float], progress: Callable[[str], None]) -> list[tuple[float, str]]:
        """For ``duration_s``: a fault drawn from ``faults`` every ``gap_s`` (``inject`` carries
        it out and says what it did), what is due healed on every tick; then everything
        healed. Returns (run time, what was done) of each fault."""
        played: list[tuple[float, str]] = []
        next_fault = time.monotonic() + self.rng.uniform(*gap_s)
        end = time.monotonic() + duration_s
        while time.monotonic() < end:
            self.heal(time.monotonic())
            if time.monotonic() >= next_fault:
                played.append((round(clock(), 3), inject(self.rng.choice(faults))))
                progress(f"[{played[-1][0]:6.1f}s] {played[-1][1]}")
                next_fault = time.monotonic() + self.rng.uniform(*gap_s)
            time.sleep(0.1)  # the fault loop's tick: nothing waits on it
        self.heal(float("inf"))
        return played
