"""How a client connects securely: the TLS files (CA, and a certificate and key for mutual
TLS) and the user name and password of credential authentication.

One frozen value (``from data_plane.client import ClientSecurity``; it lives here, below the
client and the controller client, which both take it), passed to Producer, Consumer, Admin
and ControllerClient as ``security=``, or loaded from a client config file: JSON
(``{"ca_file": ..., "cert_file": ..., "key_file": ..., "username": ..., "password": ...}``)
or Java-style properties (the same keys, ``key=value`` per line, ``#`` comments). Relative paths in a file are taken from the
file's directory, so a config file travels with its certificates.

A client given no ``security`` uses ``from_environment()``: the file named by
``KRAFTLOG_CLIENT_CONFIG`` when set, else plaintext. The CLI sets that variable from
``--command-config`` or the config ``kraftlog cluster up --secure`` wrote, so every command
and every client it makes agree.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path

import grpc

from server_common import tls_probe
from server_common.tls import TlsConfigError, channel_credentials

CLIENT_CONFIG_ENV = "KRAFTLOG_CLIENT_CONFIG"


@dataclass(frozen=True)
class ClientSecurity:
    """TLS files and credentials of one client. All None: plaintext, anonymous."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    username: str | None = None
    password: str | None = None

    @property
    def tls(self) -> bool:
        """Whether channels use TLS (any TLS file given)."""
        return any(f is not None for f in (self.ca_file, self.cert_file, self.key_file))

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials for a channel, None for a plaintext channel."""
        if not self.tls:
            return None
        return channel_credentials(self.ca_file, self.cert_file, self.key_file)

    def explain_failure(self, address: str, status: grpc.StatusCode, details: str) -> str | None:
        """When a call to ``address`` failed with ``status`` because of TLS (a plaintext
        client at a TLS port, a missing or foreign certificate, the reverse), what to
        configure; None otherwise. Probes the address once: use on failure paths only."""
        if status != grpc.StatusCode.UNAVAILABLE or not tls_probe.may_be_tls(details):
            return None
        return tls_probe.explain(address, self.ca_file, self.cert_file, self.key_file, self.tls)

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        """The credentials every call sends (server_common/authentication.py); () without a username."""
        if self.username is None:
            return ()
        return (("kraftlog-username", self.username), ("kraftlog-password", self.password or ""))

    def __repr__(self) -> str:  # never print the password
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if shown["password"] is not None:
            shown["password"] = "***"
        return f"ClientSecurity({', '.join(f'{k}={v!r}' for k, v in shown.items() if v is not None)})"

    @classmethod
    def load(cls, path: str | Path) -> ClientSecurity:
        """A client config file (JSON or properties). Raises TlsConfigError with the fix."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise TlsConfigError(f"cannot read client config {path}: {exc.strerror}; pass an existing file with --command-config or {CLIENT_CONFIG_ENV}") from None
        values = _parse(text, path)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TlsConfigError(f"{path}: unknown keys {unknown}; the keys are {sorted(known)}")
        base = path.parent
        files = {k: (base / v if not Path(v).is_absolute() else Path(v)) for k, v in values.items() if k.endswith("_file") and v}
        secrets = {k: str(v) for k, v in values.items() if not k.endswith("_file") and v is not None}
        return cls(**files, **secrets)

    @classmethod
    def from_environment(cls) -> ClientSecurity:
        """The config named by ``KRAFTLOG_CLIENT_CONFIG``, else plaintext."""
        path = os.environ.get(CLIENT_CONFIG_ENV)
        return cls.load(path) if path else cls()

    def to_json(self) -> str:
        """The JSON form ``load`` reads (absolute paths)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps({k: str(v) for k, v in values.items() if v is not None}, indent=2) + "\n"


def resolve(security: ClientSecurity | None) -> ClientSecurity:
    """What a client given ``security=`` uses: that, or ``from_environment()``."""
    return security if security is not None else ClientSecurity.from_environment()


def _parse(text: str, path: Path) -> dict[str, str]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TlsConfigError(f"{path} is not valid JSON ({exc}); write an object of ca_file, cert_file, key_file, username, password") from None
        if not isinstance(data, dict):
            raise TlsConfigError(f"{path} must hold a JSON object")
        return {str(k): v for k, v in data.items()}
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise TlsConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        values[key.strip()] = value.strip()
    return values
