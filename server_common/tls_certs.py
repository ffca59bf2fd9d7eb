"""A throwaway certificate authority and the certificates it signs, for ``kraftlog cluster up
--secure`` and the tests: real X.509 (``cryptography``), never a production CA.

Keys are ECDSA P-256 (small, fast to make and to handshake with); every certificate names
127.0.0.1 and localhost in its subject alternative names, so one certificate serves a node
whether a peer dials it by address or by name. The common name carries the identity (a
node's ``broker-N`` / ``controller-N``, a client's ``admin``): authorization reads principals
from it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for a laptop cluster or a test run, short enough that a leaked throwaway key
# soon stops mattering.
VALIDITY_DAYS = 30
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_ADDRESSES = ("127.0.0.1",)


@dataclass(frozen=True)
class Issued:
    """A PEM certificate and its PEM private key (unencrypted: the file's mode protects it)."""

    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA that signs node and client certificates."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, name: str = "kraftlog throwaway CA") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate small clock skew
            .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str) -> Issued:
        """A certificate for ``common_name``, good as a server and as a client (a broker is
        both: it serves clients and dials other brokers and the controllers)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        names = [x509.DNSName(n) for n in LOOPBACK_NAMES] + [x509.IPAddress(ipaddress.ip_address(a)) for a in LOOPBACK_ADDRESSES]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), key_pem)


@dataclass(frozen=True)
class CertPaths:
    """Where one identity's files were written."""

    cert_file: Path
    key_file: Path
    ca_file: Path


def write_identity(directory: Path, name: str, ca: CertificateAuthority, issued: Issued) -> CertPaths:
    """``NAME.crt``, ``NAME.key`` (mode 0600) and ``ca.crt`` in ``directory``. Each file is
    written to a temporary name and renamed, so a server reloading its files never reads a
    half-written one."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = CertPaths(directory / f"{name}.crt", directory / f"{name}.key", directory / "ca.crt")
    write_private(paths.key_file, issued.key_pem)
    write_atomic(paths.cert_file, issued.cert_pem)
    write_atomic(paths.ca_file, ca.cert_pem)
    return paths


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` in one rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def write_private(path: Path, data: bytes) -> None:
    """A secret (private key, Raft secret): readable by its owner only."""
    write_atomic(path, data, 0o600)


def common_name(cert_pem: bytes) -> str:
    """The subject CN of a PEM certificate."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


SECURE_DIR = "tls"
RAFT_SECRET_FILE = "raft.secret"
ADMIN_CLIENT = "admin"


def write_cluster_identities(directory: Path, node_names: list[str], client_names: tuple[str, ...] = (ADMIN_CLIENT,)) -> CertificateAuthority:
    """A new CA, a certificate per node (CN = its name, e.g. ``broker-1``) and per client
    (CN ``admin``), and a random Raft secret, all under ``directory``. The CA's key is not
    written: nothing can be signed by this CA after this call, so a leaked directory cannot
    mint new identities."""
    ca = CertificateAuthority.create()
    for name in [*node_names, *client_names]:
        write_identity(directory, name, ca, ca.issue(name))
    write_private(directory / RAFT_SECRET_FILE, os.urandom(32).hex().encode() + b"\n")
    return ca
