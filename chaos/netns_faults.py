"""The nemesis's namespace faults: ``tc`` rules on a NetnsCluster's veth pairs around one
target node (a leader, a follower, the active controller...). Each returns the heal that
removes exactly its rules; ``Nemesis.heal_everything`` removes any left.

* ``net-partition``: the target cut from every other node both ways; with
  ``clients: true`` also from the clients (a node gone from the network entirely).
* ``net-one-way``: only one direction dropped: ``direction: out`` drops what the target
  sends to the other nodes (it still hears them), ``in`` what they send to it.
* ``net-bridge``: the other nodes split in two sides (by the step's pick) that cannot reach
  each other while both reach the target (Jepsen's bridge).
* ``net-shape``: what the target sends to every other node lossy (``loss_percent``), slow
  (``rate``), or half of it slowed so the rest overtakes it (``reorder: true``).
"""

from __future__ import annotations

from collections.abc import Callable

from chaos.netns import Fabric, Rule, Shaping
from chaos.netns_emulated import EmulatedFabric, EmulatedRule
from server_common.local_cluster import LocalCluster

Heal = Callable[[], None]
NETNS_FAULTS = ("net-partition", "net-one-way", "net-bridge", "net-shape")


def fabric_of(cluster: LocalCluster) -> Fabric | EmulatedFabric:
    fabric = getattr(cluster, "fabric", None)
    if fabric is None:
        raise ValueError("namespace faults need a cluster in network namespaces: give the scenario ClusterSettings(namespaces=True)")
    return fabric


def bridge_sides(others: list[str], pick: int) -> tuple[list[str], list[str]]:
    """Two non-empty sides of ``others`` (sorted, rotated by ``pick``, halved)."""
    ordered = sorted(others)
    start = pick % len(ordered)
    rotated = ordered[start:] + ordered[:start]
    half = len(rotated) // 2
    return sorted(rotated[:half]), sorted(rotated[half:])


def _removing(fabric: Fabric | EmulatedFabric, rules: list[Rule] | list[EmulatedRule]) -> Heal:
    def heal() -> None:
        for rule in rules:
            if rule in fabric.rules:
                fabric.remove(rule)

    return heal


def apply(fault: str, cluster: LocalCluster, targets: list[str], params: dict, pick: int) -> Heal:
    """Applies ``fault`` around ``targets[0]``; rewrites ``targets`` to say who was cut from
    whom (the history's and the report timeline's description of the step)."""
    fabric = fabric_of(cluster)
    node = targets[0]
    others = [n.name for n in cluster.nodes if n.name != node]
    rules: list = []  # the fabric's rules (tc classes, or emulator rules)
    if fault == "net-partition":
        for other in others:
            rules += [fabric.shape(node, other, Shaping()), fabric.shape(other, node, Shaping())]
        if params.get("clients"):
            rules += [fabric.shape(node, "clients", Shaping()), fabric.cut_inbound(node)]
        targets[:] = [f"{node} cut from {'everyone' if params.get('clients') else 'every node'}"]
    elif fault == "net-one-way":
        outbound = params.get("direction", "out") == "out"
        for other in others:
            rules.append(fabric.shape(node, other, Shaping()) if outbound else fabric.shape(other, node, Shaping()))
        targets[:] = [f"{node} -> every node dropped" if outbound else f"every node -> {node} dropped"]
    elif fault == "net-bridge":
        left, right = bridge_sides(others, pick)
        for a in left:
            for b in right:
                rules += [fabric.shape(a, b, Shaping()), fabric.shape(b, a, Shaping())]
        targets[:] = [f"{', '.join(left)} | {', '.join(right)} (both see {node})"]
    elif fault == "net-shape":
        shaping = Shaping(
            loss_percent=int(params.get("loss_percent", 100)),
            rate=params.get("rate"),
            delay_ms=int(params.get("delay_ms", 0)),
            jitter_ms=int(params.get("jitter_ms", 0)),
            reorder=bool(params.get("reorder", False)),
        )
        rules += [fabric.shape(node, other, shaping) for other in others]
        targets[:] = [f"{node} -> every node: {shaping.describe()}"]
    else:
        raise ValueError(f"unknown namespace fault {fault}: one of {', '.join(NETNS_FAULTS)}")
    return _removing(fabric, rules)
