"""A controller's command-line options (``kraftlog controller``, ``python -m metadata_quorum``).

Apart from the controller itself so that building the CLI's parser, which every ``kraftlog``
command does, does not import the controller (its Raft node, the active controller's rules,
gRPC services): that cost 0.45 s of every fresh CLI process.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from metadata_quorum.broker_heartbeats import DEFAULT_SESSION_TIMEOUT_MS
from server_common import power_loss
from server_common.event_loops import add_event_loop_argument
from server_common.security_options import add_security_arguments
from server_common.tls import add_tls_arguments

# leader.imbalance.check.interval.seconds: how often the active controller looks for partitions
# not led by their preferred replica.
DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_S = 10.0

PASSWORD_ENV = "KRAFTLOG_QUORUM_PASSWORD"

UNSAFE_ELECT_OUTSIDE_ISR_ELR = "elect-outside-isr-elr"
UNSAFE_JOIN_BEFORE_CAUGHT_UP = "join-before-caught-up"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node-id", type=int, required=True, help="this controller's id (must appear in --quorum)")
    parser.add_argument(
        "--quorum",
        required=True,
        help="every voter as id@host:raft_port:grpc_port, comma separated, e.g. 1@127.0.0.1:19091:19191,2@127.0.0.1:19092:19192,3@127.0.0.1:19093:19193",
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="where the Raft journal and snapshot live")
    parser.add_argument("--session-timeout-ms", type=int, default=DEFAULT_SESSION_TIMEOUT_MS, help="broker.session.timeout.ms: fence a broker after this long without a heartbeat")
    parser.add_argument(
        "--auto-leader-rebalance-enable",
        type=_parse_bool,
        default=True,
        metavar="{true,false}",
        help="auto.leader.rebalance.enable: periodically move leadership back to each partition's first replica once it is a usable in-sync replica",
    )
    parser.add_argument(
        "--leader-imbalance-check-interval-seconds",
        type=_positive_seconds,
        default=DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_S,
        help="leader.imbalance.check.interval.seconds: how often the active controller looks for partitions not led by their preferred replica",
    )
    parser.add_argument("--password", default=None,
                        help=f"encrypt and authenticate Raft traffic with this shared secret (or set {PASSWORD_ENV}, or --raft-secret-file); all voters must agree")
    parser.add_argument("--raft-secret-file", type=Path, default=None,
                        help="read the Raft shared secret from this file (keeps it out of the process list; mode 0600)")
    parser.add_argument("--raft-tls", action="store_true",
                        help="carry the Raft links between controllers over mutual TLS with this node's --tls-cert-file, "
                             "--tls-key-file and --tls-ca-file (a relay in this process; docs/security.md, Raft links)")
    parser.add_argument("--raft-principals", default="", metavar="User:A,User:B",
                        help="with --raft-tls, the certificate names of the controllers, the only ones that may reach the Raft port "
                             "(default: User:controller-ID for each voter of --quorum, as cluster up --secure names them)")
    parser.add_argument("--raft-journal", choices=["fsync", "page-cache"], default="fsync",
                        help="fsync: the Raft journal is fsynced (batched) before this controller acknowledges, sends or votes "
                             "on an entry, so committed metadata survives a power failure of every controller; page-cache: "
                             "left to the OS, faster, survives process crashes only (docs/durability.md) (default: %(default)s)")
    add_event_loop_argument(parser)
    parser.add_argument(power_loss.FLAG, action="store_true", help=power_loss.FLAG_HELP)
    parser.add_argument("--join", default=None, metavar="HOST:RAFT_PORT:GRPC_PORT",
                        help="this controller's addresses when it is not in --quorum (give the current voters there): it starts as an "
                             "observer, catches up, and becomes a voter once `kraftlog quorum add-controller` adds it (docs/operations.md)")
    parser.add_argument("--cluster-id", default=None, help="cluster id reported to brokers (default: derived from --quorum)")
    parser.add_argument("--raft-peer-address", action="append", default=[], metavar="ID=HOST:PORT",
                        help="reach voter ID's Raft port here instead of its quorum address (repeatable; e.g. a proxy on that link)")
    add_security_arguments(parser)
    parser.add_argument("--metrics-port", type=_port_or_off, default=0,
                        help="serve Prometheus metrics at http://HOST:PORT/metrics, HOST from this voter's --quorum entry; https with the --tls-* files "
                             "and the same --tls-client-auth when TLS is on (0: off; default: %(default)s)")
    parser.add_argument("--log-format", choices=["json", "console"], default="console", help="console: lines for people, json: one object per line (default: %(default)s)")
    add_tls_arguments(parser)
    parser.add_argument("--unsafe-testing", choices=[UNSAFE_ELECT_OUTSIDE_ISR_ELR, UNSAFE_JOIN_BEFORE_CAUGHT_UP],
                        help="DELIBERATELY WRONG behaviour, for chaos negative controls only: never in production "
                             f"({UNSAFE_ELECT_OUTSIDE_ISR_ELR}: a leader from outside the ISR and ELR whenever one is usable; "
                             f"{UNSAFE_JOIN_BEFORE_CAUGHT_UP}: serve reads, and become a voter when added, before catching up "
                             "with the metadata log)")


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got '{raw}'")
    return lowered == "true"


def _port_or_off(raw: str) -> int:
    if not raw.isdigit() or int(raw) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, or 0 to turn metrics off, got '{raw}'")
    return int(raw)


def _positive_seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got '{raw}'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {raw}")
    return value
