"""Parsing controller addresses: the quorum description every controller is started with
(``id@host:raft_port:grpc_port,...``) and the controller list clients and brokers use
(``host:port,...``, or the quorum form, whose gRPC ports are used)."""

from __future__ import annotations

from dataclasses import dataclass

Endpoint = tuple[int, str, int]  # (controller id or -1 when unknown, host, gRPC port)


def grpc_address(endpoint: Endpoint) -> str:
    """"host:port" of an endpoint's gRPC service (its channel's key: the id may be learned later)."""
    return f"{endpoint[1]}:{endpoint[2]}"


@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    raft_port: int
    grpc_port: int

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def grpc_address(self) -> str:
        return f"{self.host}:{self.grpc_port}"


def _port(text: str, what: str, item: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{what} '{text}' in '{item}' is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"{what} {port} in '{item}' is out of range 1-65535")
    return port


def parse_quorum(text: str) -> list[Voter]:
    """``1@127.0.0.1:19091:19191,2@...`` -> voters sorted by id; ValueError says what is wrong."""
    voters = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        node_id, at, rest = item.partition("@")
        pieces = rest.rsplit(":", 2)
        if not at or len(pieces) != 3 or not node_id.isdigit():
            raise ValueError(f"quorum entry '{item}' must look like id@host:raft_port:grpc_port, e.g. 1@127.0.0.1:19091:19191")
        host, raft, grpc_port = pieces
        voters.append(Voter(int(node_id), host, _port(raft, "raft port", item), _port(grpc_port, "gRPC port", item)))
    if not voters:
        raise ValueError("the quorum is empty; give every voter as id@host:raft_port:grpc_port, comma separated")
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ValueError(f"controller ids in the quorum must be unique, got {ids}")
    return sorted(voters, key=lambda v: v.node_id)


def parse_endpoints(text: str) -> list[Endpoint]:
    """``host:port,host:port`` (ids unknown) or a quorum description (ids known)."""
    if "@" in text:
        return [(v.node_id, v.host, v.grpc_port) for v in parse_quorum(text)]
    out = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        host, colon, port = item.rpartition(":")
        if not colon or not host:
            raise ValueError(f"controller address '{item}' must look like host:port, e.g. 127.0.0.1:19191")
        out.append((-1, host, _port(port, "port", item)))
    if not out:
        raise ValueError("no controller addresses given; pass host:port[,host:port...]")
    return out


def parse_address_overrides(values: list[str], flag: str) -> dict[int, tuple[str, int]]:
    """``ID=HOST:PORT`` entries (``--peer-address``, ``--raft-peer-address``): reach node ID at
    this address instead of its own, for example through a proxy on that one link."""
    overrides: dict[int, tuple[str, int]] = {}
    for value in values:
        node_id, sep, address = value.partition("=")
        host, _, port = address.rpartition(":")
        if not sep or not node_id.strip().isdigit() or not host or not port.isdigit():
            raise ValueError(f"{flag} '{value}' is not ID=HOST:PORT (for example 2=127.0.0.1:19093)")
        overrides[int(node_id)] = (host, int(port))
    return overrides

