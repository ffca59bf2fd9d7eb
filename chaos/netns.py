"""Nodes in network namespaces of their own, joined to one bridge, and the network faults
made there with ``tc``: the faults a proxy cannot make (one-way and bridge partitions, a
node cut from links no proxy sits on, packet loss and reordering).

Topology (every name starts with ``NAME_PREFIX``, then the owning process id in 6 hex
digits and a per-process counter, so a crashed run's leftovers are found and removed):

* a bridge in the root namespace holding ``SUBNET_PREFIX.N.1/24`` (the clients' side: the
  harness's workload, observer and final read run in the root namespace and reach every
  node through it);
* per node a namespace, and a veth pair: the host end enslaved to the bridge, the other end
  inside the namespace with the node's address ``SUBNET_PREFIX.N.(10+i)``;
* on the namespace end an HTB root qdisc whose default class passes everything. A fault
  adds a class with its own leaf qdisc and a u32 filter matching the destination address
  (and, for a fraction of packets, bits of the IP header checksum) that steers packets into
  it. The host end gets the same root for faults on what enters a node (``cut_inbound``).

The leaf is ``netem`` where the kernel has it (delay, loss, reordering as configured) and
otherwise what every kernel with HTB has: a ``pfifo limit 0`` drops every packet steered to
it (the loss fraction picked by checksum bits: 1/2, 1/4, 1/8, 1/16), and a low-rate HTB
class queues them (a slow link; with half the packets steered into it, the other half
overtakes them: reordering). ``Fabric.netem`` says which one this machine has.

The argv builders (``*_argv``) are pure; ``Fabric`` runs them. Requires root and the ``ip``
and ``tc`` tools; ``unavailable_reason`` says what is missing.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from server_common.local_cluster import _pid_alive

NAME_PREFIX = "klx"
SUBNET_PREFIX = "10.213"
ROOT_HANDLE = "1:"
DEFAULT_CLASS = "1:1"
FAST_RATE = "10gbit"
LOSS_SHIFTS = {50: 1, 25: 2, 12: 3, 6: 4}  # loss percent -> checksum bits that must be zero
_counter = itertools.count()


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command failed; the message has the command and its stderr."""


def unavailable_reason() -> str | None:
    """Why namespace scenarios cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "network-namespace scenarios need root (they create namespaces, veth pairs and a bridge): run as root, or pick a proxy scenario from kraftlog chaos list"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"network-namespace scenarios need the {' and '.join(missing)} tool(s) (iproute2): install iproute2, or pick a proxy scenario"
    return None


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def owner_pid(name: str) -> int | None:
    """The process that created a namespace or link named ``name`` (None: not ours)."""
    if not name.startswith(NAME_PREFIX) or len(name) < len(NAME_PREFIX) + 6:
        return None
    try:
        return int(name[len(NAME_PREFIX) : len(NAME_PREFIX) + 6], 16)
    except ValueError:
        return None


def remove_leftovers() -> list[str]:
    """Deletes the namespaces and links a dead process of ours left behind (a crashed run);
    returns their names. A live process's fabric is left alone."""
    removed = []
    namespaces = [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]
    links = [line.split(":")[1].strip().split("@")[0] for line in _run(["ip", "-o", "link", "show"]).stdout.splitlines()]
    for name in namespaces + links:
        pid = owner_pid(name)
        if pid is not None and not _pid_alive(pid):
            kind = ["ip", "netns", "del", name] if name in namespaces else ["ip", "link", "del", name]
            if _run(kind, check=False).returncode == 0:
                removed.append(name)
    return removed


# ---------------------------------------------------------------------- pure argv builders


def in_namespace(namespace: str | None, argv: list[str]) -> list[str]:
    """``argv`` run inside ``namespace`` (None: the root namespace). ``ip netns exec`` execs
    the command, so the process id a caller gets is the command's own."""
    return argv if namespace is None else ["ip", "netns", "exec", namespace, *argv]


def root_qdisc_argv(namespace: str | None, device: str) -> list[list[str]]:
    """An HTB root whose default class passes everything at full speed."""
    tc = ["tc"] if namespace is None else ["tc", "-n", namespace]
    return [
        [*tc, "qdisc", "replace", "dev", device, "root", "handle", ROOT_HANDLE, "htb", "default", DEFAULT_CLASS.split(":")[1], "r2q", "100000"],
        [*tc, "class", "replace", "dev", device, "parent", ROOT_HANDLE, "classid", DEFAULT_CLASS, "htb", "rate", FAST_RATE],
    ]


@dataclass(frozen=True)
class Shaping:
    """What happens to the packets a rule steers: dropped (``loss_percent`` of them, 100 for
    all), or queued behind a ``rate`` (a slow link), or delayed by ``delay_ms`` (netem only).
    ``reorder``: only half the packets are steered, so the rest overtake them."""

    loss_percent: int = 100
    rate: str | None = None
    delay_ms: int = 0
    jitter_ms: int = 0
    reorder: bool = False

    def describe(self) -> str:
        if self.rate or self.delay_ms:
            what = f"rate {self.rate}" if self.rate else f"delay {self.delay_ms}ms±{self.jitter_ms}ms"
            return f"{what}{', half the packets (reordering)' if self.reorder else ''}"
        return "drop all" if self.loss_percent >= 100 else f"drop {self.loss_percent}%"


def fraction_match(shaping: Shaping, netem: bool) -> list[str]:
    """u32 match terms that select the share of packets the leaf acts on, when the leaf
    itself cannot pick them (no netem): checksum bits, which differ packet to packet."""
    if netem:
        return []
    if shaping.reorder:
        bits = 1
    elif shaping.rate is None and shaping.loss_percent < 100:
        if shaping.loss_percent not in LOSS_SHIFTS:
            raise ValueError(f"without netem the loss is one of {sorted(LOSS_SHIFTS)} percent, not {shaping.loss_percent}: pick one of those")
        bits = LOSS_SHIFTS[shaping.loss_percent]
    else:
        return []
    return ["match", "u16", "0", hex((1 << bits) - 1), "at", "10"]  # the IP header checksum's low bits


def leaf_argv(shaping: Shaping, netem: bool) -> list[str]:
    """The qdisc the steered packets go through."""
    if netem:
        args = ["netem"]
        if shaping.delay_ms or shaping.reorder:
            args += ["delay", f"{max(shaping.delay_ms, 10)}ms", f"{shaping.jitter_ms}ms"]
            if shaping.reorder:
                args += ["reorder", "50%"]
        if shaping.rate:
            args += ["rate", shaping.rate]
        if not (shaping.delay_ms or shaping.reorder or shaping.rate):
            args += ["loss", f"{shaping.loss_percent}%"]
        return args
    if shaping.delay_ms and not shaping.rate:
        raise ValueError("this kernel has no netem qdisc, so no fixed delay: give a rate (a slow link) instead")
    return ["pfifo", "limit", "1000"] if shaping.rate else ["pfifo", "limit", "0"]


def rule_argv(namespace: str | None, device: str, minor: int, destination: str | None, shaping: Shaping, netem: bool) -> list[list[str]]:
    """A class ``1:minor`` with its leaf, and the filter steering packets for
    ``destination`` (an IPv4 address; None: every packet) into it."""
    tc = ["tc"] if namespace is None else ["tc", "-n", namespace]
    classid = f"1:{minor:x}"
    rate = shaping.rate if shaping.rate and not netem else FAST_RATE
    match = ["match", "ip", "dst", f"{destination}/32"] if destination else ["match", "u32", "0", "0", "at", "0"]
    return [
        [*tc, "class", "add", "dev", device, "parent", ROOT_HANDLE, "classid", classid, "htb", "rate", rate, "ceil", rate],
        [*tc, "qdisc", "add", "dev", device, "parent", classid, "handle", f"{minor:x}:", *leaf_argv(shaping, netem)],
        [*tc, "filter", "add", "dev", device, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1", "handle", f"800::{minor:x}", "u32",
         *match, *fraction_match(shaping, netem), "flowid", classid],
    ]


def remove_rule_argv(namespace: str | None, device: str, minor: int) -> list[list[str]]:
    tc = ["tc"] if namespace is None else ["tc", "-n", namespace]
    classid = f"1:{minor:x}"
    return [
        [*tc, "filter", "del", "dev", device, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1", "handle", f"800::{minor:x}", "u32"],
        [*tc, "qdisc", "del", "dev", device, "parent", classid, "handle", f"{minor:x}:"],
        [*tc, "class", "del", "dev", device, "classid", classid],
    ]


# ---------------------------------------------------------------------- the fabric


@dataclass
class Port:
    """One node's namespace and veth pair."""

    namespace: str
    inner: str  # the veth end inside the namespace
    outer: str  # the host end, on the bridge
    address: str


@dataclass
class Rule:
    namespace: str | None
    device: str
    minor: int


@dataclass
class Fabric:
    """The bridge, namespaces and veth pairs of one cluster, and the fault rules in force."""

    tag: str
    subnet: str
    bridge: str
    netem: bool
    ports: dict[str, Port] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    _minors: itertools.count = field(default_factory=lambda: itertools.count(0x10))

    @property
    def gateway(self) -> str:
        """The bridge's address: what the nodes see the clients' packets come from."""
        return f"{self.subnet}.1"

    @classmethod
    def create(cls, node_names: list[str]) -> Fabric:
        """A bridge and one namespace per node; on any failure, what was made is removed."""
        reason = unavailable_reason()
        if reason:
            raise NetnsError(reason)
        remove_leftovers()
        tag = f"{NAME_PREFIX}{os.getpid():06x}{next(_counter) % 16:x}"
        subnet = _free_subnet()
        fabric = cls(tag, subnet, f"{tag}b", netem=False)
        try:
            _run(["ip", "link", "add", fabric.bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{fabric.gateway}/24", "dev", fabric.bridge])
            _run(["ip", "link", "set", fabric.bridge, "up"])
            for i, name in enumerate(node_names, start=1):
                fabric._add_port(name, i)
            fabric.netem = fabric._probe_netem()
        except BaseException:
            fabric.destroy()
            raise
        return fabric

    def _add_port(self, name: str, index: int) -> None:
        port = Port(f"{self.tag}-{name}", f"{self.tag}n{index}", f"{self.tag}h{index}", f"{self.subnet}.{10 + index}")
        self.ports[name] = port
        _run(["ip", "netns", "add", port.namespace])
        _run(["ip", "link", "add", port.outer, "type", "veth", "peer", "name", port.inner])
        _run(["ip", "link", "set", port.inner, "netns", port.namespace])
        _run(["ip", "link", "set", port.outer, "master", self.bridge, "up"])
        _run(["ip", "-n", port.namespace, "addr", "add", f"{port.address}/24", "dev", port.inner])
        _run(["ip", "-n", port.namespace, "link", "set", port.inner, "up"])
        _run(["ip", "-n", port.namespace, "link", "set", "lo", "up"])
        for argv in root_qdisc_argv(port.namespace, port.inner) + root_qdisc_argv(None, port.outer):
            _run(argv)

    def _probe_netem(self) -> bool:
        """Whether this kernel has the netem qdisc (tried on a throwaway class)."""
        port = next(iter(self.ports.values()))
        tc = ["tc", "-n", port.namespace]
        _run([*tc, "class", "add", "dev", port.inner, "parent", ROOT_HANDLE, "classid", "1:f", "htb", "rate", FAST_RATE])
        has = _run([*tc, "qdisc", "add", "dev", port.inner, "parent", "1:f", "handle", "f:", "netem", "delay", "1ms"], check=False).returncode == 0
        _run([*tc, "qdisc", "del", "dev", port.inner, "parent", "1:f"], check=False)
        _run([*tc, "class", "del", "dev", port.inner, "classid", "1:f"])
        return has

    @property
    def kind(self) -> str:
        """What makes the faults, for progress lines."""
        return "netem" if self.netem else "no netem: HTB/pfifo faults"

    def address(self, node: str) -> str:
        return self.ports[node].address

    def namespace(self, node: str) -> str:
        return self.ports[node].namespace

    def shape(self, source: str, destination: str | None, shaping: Shaping) -> Rule:
        """Applies ``shaping`` to what ``source`` (a node) sends to ``destination`` (a node,
        ``"clients"`` for the root namespace, or None for everyone)."""
        port = self.ports[source]
        target = None if destination is None else (self.gateway if destination == "clients" else self.address(destination))
        return self._add(port.namespace, port.inner, target, shaping)

    def cut_inbound(self, node: str) -> Rule:
        """Drops every packet entering ``node`` (on the bridge's side of its veth)."""
        port = self.ports[node]
        return self._add(None, port.outer, None, Shaping())

    def _add(self, namespace: str | None, device: str, destination: str | None, shaping: Shaping) -> Rule:
        rule = Rule(namespace, device, next(self._minors))
        for argv in rule_argv(namespace, device, rule.minor, destination, shaping, self.netem):
            _run(argv)
        self.rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        for argv in remove_rule_argv(rule.namespace, rule.device, rule.minor):
            _run(argv, check=False)
        self.rules.remove(rule)

    def heal_all(self) -> None:
        """Every fault rule removed (the root qdiscs stay)."""
        for rule in list(self.rules):
            self.remove(rule)

    def destroy(self) -> None:
        """Namespaces, veth pairs and the bridge removed (a namespace's veth end goes with
        it, and its host end with that). Safe to call twice."""
        for port in self.ports.values():
            _run(["ip", "netns", "del", port.namespace], check=False)
            _run(["ip", "link", "del", port.outer], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)
        self.rules.clear()


def _free_subnet() -> str:
    """A ``SUBNET_PREFIX.N`` /24 no interface here has an address in."""
    used = _run(["ip", "-o", "-4", "addr", "show"]).stdout
    for n in range(1, 255):
        if f" {SUBNET_PREFIX}.{n}." not in used:
            return f"{SUBNET_PREFIX}.{n}"
    raise NetnsError(f"every {SUBNET_PREFIX}.N.0/24 subnet is in use: remove stale bridges (ip -o -4 addr show)")
