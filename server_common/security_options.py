"""The authentication and authorization options every broker and controller takes (docs/security.md)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class SecurityOptions:
    authentication_required: bool = False  # refuse calls with neither a client certificate nor credentials
    authorization: bool = False  # check ACLs on every call (off: every principal may do everything)
    super_users: tuple[str, ...] = ()  # principals every check allows (operators, brokers)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "SecurityOptions":
        return cls(args.authentication_required, args.authorization, parse_principals(args.super_users, "--super-users"))


def parse_principals(text: str | None, option: str) -> tuple[str, ...]:
    """``User:A,User:B`` as a tuple; a name without its type stops the node with what to write."""
    principals = tuple(s.strip() for s in (text or "").split(",") if s.strip())
    bad = [s for s in principals if ":" not in s]
    if bad:
        raise SystemExit(f"{option}: {bad} have no principal type; write User:NAME,User:broker-1,...")
    return principals


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--authentication-required", action="store_true",
                        help="refuse calls that present neither a client certificate (mTLS) nor a username and password (docs/security.md)")
    parser.add_argument("--authorization", action="store_true",
                        help="check ACLs on every call; nothing matching means deny (docs/security.md)")
    parser.add_argument("--super-users", default="", metavar="User:A,User:B",
                        help="principals allowed everything, e.g. the admin and the brokers' certificate names (User:broker-1,...)")
