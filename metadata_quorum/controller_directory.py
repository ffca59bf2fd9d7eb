"""Who is in the metadata quorum: the voters and the observers (controllers catching up to
become voters), with the addresses clients and peers reach them at.

The directory is replicated through the metadata log (``raft_node.MetadataStateMachine``
``set_controllers``) beside pysyncobj's own voter set (its Raft addresses only), so that every
controller maps a Raft leader to its id and gRPC address, brokers and clients learn new
controllers from hints and DescribeCluster, and a controller learns that it was promoted or
removed. Until the first membership change it is the ``--quorum`` voters.

The pure rules of changing it (KIP-853's, on pysyncobj's one-change-at-a-time membership) live
here: a new controller is registered as an observer first, and becomes a voter only once it
has caught up (first in the directory, so that it restarts its Raft node as a voter, then in
pysyncobj's voter set, whose commit then needs its acknowledgement: with a voter down, the
new one's is what makes the majority); ids and addresses are unique; the last voter is never
removed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from metadata_quorum.endpoints import Voter

VOTER = "voter"
OBSERVER = "observer"
REMOVED = "removed"

EncodedEntry = tuple[int, str, int, int, str]  # (id, host, raft port, gRPC port, role): what the log carries


@dataclass(frozen=True)
class ControllerDirectory:
    voters: tuple[Voter, ...]
    observers: tuple[Voter, ...] = ()

    @classmethod
    def of_voters(cls, voters: list[Voter] | tuple[Voter, ...]) -> "ControllerDirectory":
        return cls(tuple(sorted(voters, key=lambda v: v.node_id)))

    @classmethod
    def decode(cls, entries: list[EncodedEntry]) -> "ControllerDirectory":
        voters = tuple(Voter(i, h, r, g) for i, h, r, g, role in entries if role == VOTER)
        observers = tuple(Voter(i, h, r, g) for i, h, r, g, role in entries if role == OBSERVER)
        return cls(voters, observers)

    def encode(self) -> list[EncodedEntry]:
        return [(v.node_id, v.host, v.raft_port, v.grpc_port, role) for role, group in ((VOTER, self.voters), (OBSERVER, self.observers)) for v in group]

    @property
    def members(self) -> tuple[Voter, ...]:
        return self.voters + self.observers

    def role_of(self, node_id: int) -> str:
        if any(v.node_id == node_id for v in self.voters):
            return VOTER
        return OBSERVER if any(v.node_id == node_id for v in self.observers) else REMOVED

    def member(self, node_id: int) -> Voter | None:
        return next((v for v in self.members if v.node_id == node_id), None)

    def with_observer(self, new: Voter) -> "ControllerDirectory":
        return replace(self, observers=tuple(sorted((*self.observers, new), key=lambda v: v.node_id)))

    def promoted(self, node_id: int) -> "ControllerDirectory":
        new = self.member(node_id)
        assert new is not None and self.role_of(node_id) == OBSERVER
        return ControllerDirectory(tuple(sorted((*self.voters, new), key=lambda v: v.node_id)), tuple(v for v in self.observers if v.node_id != node_id))

    def without(self, node_id: int) -> "ControllerDirectory":
        return ControllerDirectory(tuple(v for v in self.voters if v.node_id != node_id), tuple(v for v in self.observers if v.node_id != node_id))


CATCH_UP_TIMEOUT_MS_MAX = 600_000


def request_problem(new: Voter, catch_up_timeout_ms: int) -> str | None:
    """Why an AddController request is malformed (None: it is well formed)."""
    if new.node_id < 0:
        return f"controller id {new.node_id} is negative; give the new controller's --node-id"
    if not new.host or any(c.isspace() or c in ",@" for c in new.host):
        return f"host {new.host!r} is not a host name or address; give the new controller's --join host"
    if not (0 < new.raft_port < 65536 and 0 < new.grpc_port < 65536):
        return f"ports {new.raft_port} (Raft) and {new.grpc_port} (gRPC) must be 1-65535; give the new controller's --join ports"
    if not 0 <= catch_up_timeout_ms <= CATCH_UP_TIMEOUT_MS_MAX:
        return f"catch_up_timeout_ms {catch_up_timeout_ms} must be 0 (the default, 30 s) to {CATCH_UP_TIMEOUT_MS_MAX}"
    return None


def add_problem(directory: ControllerDirectory, new: Voter, raft_voters: set[str]) -> str | None:
    """Why ``new`` cannot be added (None: it can). ``raft_voters``: the Raft addresses of
    pysyncobj's voter set. Adding again a controller of the same addresses that is an
    observer, or a voter in the directory but not yet in pysyncobj's set, is allowed: it
    resumes an add that did not finish."""
    same = directory.member(new.node_id)
    if same is not None:
        if same == new and (directory.role_of(new.node_id) == OBSERVER or new.raft_address not in raft_voters):
            return None
        return (f"controller id {new.node_id} is already a {directory.role_of(new.node_id)} of the quorum (at {same.raft_address}); "
                "give the new controller an id no controller has had")
    for member in directory.members:
        if member.raft_address == new.raft_address or member.grpc_address == new.grpc_address:
            return (f"controller {member.node_id} already uses {member.raft_address} (Raft) / {member.grpc_address} (gRPC); "
                    "give the new controller addresses of its own")
    if directory.observers:
        return (f"controller {directory.observers[0].node_id} is still being added (an observer); finish that first "
                f"(add it again once it runs) or remove it: one membership change at a time")
    return None


def remove_problem(directory: ControllerDirectory, node_id: int) -> str | None:
    """Why controller ``node_id`` cannot be removed (None: it can)."""
    role = directory.role_of(node_id)
    if role == REMOVED:
        return (f"controller {node_id} is not in the quorum (voters {[v.node_id for v in directory.voters]}, "
                f"observers {[v.node_id for v in directory.observers]}); check the id with `kraftlog quorum describe`")
    if role == VOTER and len(directory.voters) == 1:
        return f"controller {node_id} is the last voter; add another controller first"
    return None
