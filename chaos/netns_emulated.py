"""Namespaces joined through the userspace link emulator (``chaos/link_emulator.py``) instead
of veth pairs and a bridge, for the faults this kernel's ``tc`` cannot make without ``netem``:
a fixed delay with jitter on chosen links.

The layout is ``chaos.netns.Fabric``'s (one namespace per node, the nodes on
``SUBNET_PREFIX.N.(10+i)``, the clients in the root namespace on ``.1``), but each address is
on a TUN interface whose packets the emulator process carries. The interface is Fabric's too
(``shape``, ``cut_inbound``, ``remove``, ``heal_all``, ``destroy``), so the namespace faults
(``chaos/netns_faults.py``) run on either; here each rule is one emulator rule, so the loss
share is any percentage and a delay needs no netem. Scenarios choose it with
``ClusterSettings(namespaces=True, link_emulator=True)``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from chaos.netns import NAME_PREFIX, NetnsError, Shaping, _free_subnet, _run, remove_leftovers, unavailable_reason

ROOT = Path(__file__).resolve().parents[1]
_counter = itertools.count()


def emulator_unavailable_reason() -> str | None:
    """Why the emulated fabric cannot run here (None: it can)."""
    reason = unavailable_reason()
    if reason:
        return reason
    if not os.path.exists("/dev/net/tun"):
        return "the link emulator needs /dev/net/tun (the tun module): load it (modprobe tun), or pick a scenario without delays"
    return None


def fabric_unavailable_reason(link_emulator: bool) -> str | None:
    """Why a namespace cluster (with the link emulator, or veth pairs) cannot run here."""
    return emulator_unavailable_reason() if link_emulator else unavailable_reason()


def link_rule(shaping: Shaping) -> dict:
    """The emulator's rule for a fabric ``Shaping``: a delay (with jitter, or reordering:
    half the packets delayed), else a loss share (100%: a cut)."""
    if shaping.rate:
        raise ValueError("the link emulator has no rate limit: give a delay (delay_ms, jitter_ms) or a loss instead")
    if shaping.delay_ms or shaping.reorder:
        return {"delay_ms": max(shaping.delay_ms, 10) if shaping.reorder else shaping.delay_ms, "jitter_ms": shaping.jitter_ms,
                "reorder": shaping.reorder}
    return {"loss": shaping.loss_percent / 100}


@dataclass(frozen=True)
class EmulatedRule:
    rule_id: int
    describe: str


@dataclass
class EmulatedFabric:
    """The namespaces, the emulator process that joins them, and the rules in force."""

    tag: str
    subnet: str
    process: subprocess.Popen | None = None
    namespaces: dict[str, str] = field(default_factory=dict)  # node -> namespace
    addresses: dict[str, str] = field(default_factory=dict)  # node -> address
    rules: list[EmulatedRule] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    kind: str = "links through the userspace emulator (delays without netem)"

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    @classmethod
    def create(cls, node_names: list[str]) -> EmulatedFabric:
        """A namespace per node and the emulator with a TUN in each; on any failure, what
        was made is removed."""
        reason = emulator_unavailable_reason()
        if reason:
            raise NetnsError(reason)
        remove_leftovers()
        tag = f"{NAME_PREFIX}{os.getpid():06x}{next(_counter) % 16:x}"
        fabric = cls(tag, _free_subnet())
        try:
            tuns = [{"name": f"{tag}tc", "namespace": None, "address": f"{fabric.gateway}/24"}]
            for i, name in enumerate(node_names, start=1):
                namespace, address = f"{tag}-{name}", f"{fabric.subnet}.{10 + i}"
                fabric.namespaces[name], fabric.addresses[name] = namespace, address
                _run(["ip", "netns", "add", namespace])
                _run(["ip", "-n", namespace, "link", "set", "lo", "up"])
                tuns.append({"name": f"{tag}t{i}", "namespace": namespace, "address": f"{address}/24"})
            fabric.process = subprocess.Popen([sys.executable, "-m", "chaos.link_emulator"], cwd=ROOT, text=True,
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            answer = fabric._say({"tuns": tuns})
            if answer != "ready":
                raise NetnsError(f"the link emulator did not start: {fabric.process.stderr.read().strip() or answer}")
        except BaseException:
            fabric.destroy()
            raise
        return fabric

    def _say(self, message: dict) -> str:
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def address(self, node: str) -> str:
        return self.addresses[node]

    def namespace(self, node: str) -> str:
        return self.namespaces[node]

    def shape(self, source: str, destination: str | None, shaping: Shaping) -> EmulatedRule:
        """``shaping`` on what ``source`` (a node) sends to ``destination`` (a node,
        ``"clients"``, or None for everyone)."""
        target = None if destination is None else (self.gateway if destination == "clients" else self.address(destination))
        return self._add(self.address(source), target, shaping)

    def cut_inbound(self, node: str) -> EmulatedRule:
        """Drops every packet to ``node``, from nodes and clients alike."""
        return self._add(None, self.address(node), Shaping())

    def _add(self, source: str | None, destination: str | None, shaping: Shaping) -> EmulatedRule:
        rule = EmulatedRule(next(self._ids), f"{source or '*'} -> {destination or '*'}: {shaping.describe()}")
        answer = self._say({"op": "add", "id": rule.rule_id, "source": source, "destination": destination, **link_rule(shaping)})
        if answer != f"ok {rule.rule_id}":
            raise NetnsError(f"the link emulator refused {rule.describe}: {answer or self._stderr()}")
        self.rules.append(rule)
        return rule

    def _stderr(self) -> str:
        return "it exited" if self.process is None or self.process.poll() is None else self.process.stderr.read().strip()

    def remove(self, rule: EmulatedRule) -> None:
        self._say({"op": "remove", "id": rule.rule_id})
        self.rules.remove(rule)

    def heal_all(self) -> None:
        for rule in list(self.rules):
            self.remove(rule)

    def destroy(self) -> None:
        """The emulator stopped (its TUNs go with it) and the namespaces removed. Safe to
        call twice."""
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for namespace in self.namespaces.values():
            _run(["ip", "netns", "del", namespace], check=False)
        self.rules.clear()
