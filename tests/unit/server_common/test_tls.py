"""TLS settings without processes: the listener options refuse what cannot work, a client
config loads from JSON or properties, the probe's outcomes become the right advice, and the
reloading fetcher keeps the last good pair through a half-done rotation."""

from __future__ import annotations

import argparse
from pathlib import Path

import grpc
import pytest

from server_common import tls_probe
from server_common.client_security import ClientSecurity
from server_common.tls import ServerTls, TlsConfigError, _ReloadingFiles, add_tls_arguments, server_tls_from_args
from server_common.tls_certs import CertificateAuthority, common_name, write_identity, write_private


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.create()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_tls_arguments(parser)
    return parser.parse_args(list(argv))


def test_plaintext_is_the_default_and_require_tls_refuses_it() -> None:
    assert server_tls_from_args(parse()) is None
    with pytest.raises(TlsConfigError, match="--require-tls is set but no certificate is"):
        server_tls_from_args(parse("--require-tls"))


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (("--tls-cert-file", "c.crt"), "pass both --tls-cert-file and --tls-key-file"),
        (("--tls-ca-file", "ca.crt"), "need TLS: pass --tls-cert-file"),
        (("--tls-cert-file", "c.crt", "--tls-key-file", "c.key", "--tls-client-auth", "required"), "needs --tls-ca-file"),
        (("--tls-cert-file", "missing.crt", "--tls-key-file", "missing.key"), "cannot read TLS file"),
    ],
)
def test_settings_that_cannot_work_are_refused_with_the_fix(argv: tuple[str, ...], complaint: str) -> None:
    with pytest.raises(TlsConfigError, match=complaint):
        server_tls_from_args(parse(*argv))


def test_a_key_that_is_not_the_certificates_is_refused(ca: CertificateAuthority, tmp_path: Path) -> None:
    node = write_identity(tmp_path, "broker-1", ca, ca.issue("broker-1"))
    other = write_identity(tmp_path, "broker-2", ca, ca.issue("broker-2"))
    with pytest.raises(TlsConfigError, match="is not the key of"):
        server_tls_from_args(parse("--tls-cert-file", str(node.cert_file), "--tls-key-file", str(other.key_file)))
    tls = server_tls_from_args(parse("--tls-cert-file", str(node.cert_file), "--tls-key-file", str(node.key_file),
                                     "--tls-ca-file", str(node.ca_file), "--tls-client-auth", "required"))
    assert tls == ServerTls(node.cert_file, node.key_file, node.ca_file, "required")
    assert common_name(node.cert_file.read_bytes()) == "broker-1"


def test_the_fetcher_reloads_a_changed_pair_and_keeps_the_last_good_one_meanwhile(ca: CertificateAuthority, tmp_path: Path) -> None:
    node = write_identity(tmp_path, "broker-1", ca, ca.issue("broker-1"))
    files = _ReloadingFiles(ServerTls(node.cert_file, node.key_file, node.ca_file, "required"))
    files.load()
    assert files.fetch() is None  # nothing changed: keep the current configuration
    renewed = ca.issue("broker-1")
    write_private(node.key_file, renewed.key_pem)  # the key first: for now key and certificate differ
    assert files.fetch() is None
    node.cert_file.write_bytes(renewed.cert_pem)
    assert isinstance(files.fetch(), grpc.ServerCertificateConfiguration)
    assert files.fetch() is None


def test_client_config_loads_from_json_and_properties_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "client.json").write_text('{"ca_file": "tls/ca.crt", "cert_file": "/abs/admin.crt", "key_file": "tls/admin.key"}')
    loaded = ClientSecurity.load(tmp_path / "client.json")
    assert loaded == ClientSecurity(tmp_path / "tls/ca.crt", Path("/abs/admin.crt"), tmp_path / "tls/admin.key")
    assert loaded.tls
    (tmp_path / "client.properties").write_text("# alice\nca_file = ca.crt\nusername=alice\npassword=s3cret\n")
    props = ClientSecurity.load(tmp_path / "client.properties")
    assert props == ClientSecurity(ca_file=tmp_path / "ca.crt", username="alice", password="s3cret")
    assert "s3cret" not in repr(props)
    assert not ClientSecurity(username="alice", password="x").tls
    assert ClientSecurity().channel_credentials() is None


@pytest.mark.parametrize(
    "text, complaint",
    [("{not json", "is not valid JSON"), ('{"ca": "x"}', "unknown keys \\['ca'\\]"), ("ca_file", "expected key=value")],
)
def test_a_bad_client_config_says_what_is_wrong(tmp_path: Path, text: str, complaint: str) -> None:
    (tmp_path / "bad").write_text(text)
    with pytest.raises(TlsConfigError, match=complaint):
        ClientSecurity.load(tmp_path / "bad")
    with pytest.raises(TlsConfigError, match="cannot read client config"):
        ClientSecurity.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    "outcome, client_tls, advice",
    [
        (tls_probe.SERVES_TLS, False, "requires TLS but this client connects in plaintext"),
        (tls_probe.PLAINTEXT_SERVER, True, "serves plaintext but this client uses TLS"),
        (tls_probe.CERT_REQUIRED, True, "requires a client certificate"),
        (tls_probe.CERT_REFUSED, True, "refused this client's certificate"),
        (tls_probe.SERVER_UNTRUSTED, True, "does not trust"),
        (tls_probe.ACCEPTED, True, None),
        (tls_probe.UNREACHABLE, False, None),
        (tls_probe.SERVES_TLS, True, None),  # a TLS client at a TLS port: TLS is not why it failed
    ],
)
def test_probe_outcomes_become_advice(outcome: str, client_tls: bool, advice: str | None) -> None:
    said = tls_probe.classify("127.0.0.1:9092", outcome, client_tls)
    if advice is None:
        assert said is None
    else:
        assert said is not None and advice in said and "127.0.0.1:9092" in said


def test_refused_tcp_connections_and_timeouts_are_not_probed() -> None:
    security = ClientSecurity()
    assert security.explain_failure("127.0.0.1:1", grpc.StatusCode.UNAVAILABLE, "ipv4:127.0.0.1:1: Connection refused") is None
    assert security.explain_failure("127.0.0.1:1", grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") is None


def test_the_same_advice_from_every_broker_is_said_once_naming_them_all() -> None:
    from data_plane.client.metadata_cache import no_broker_answered

    advice = tls_probe.classify("{}", tls_probe.SERVES_TLS, client_tls=False) or ""
    addresses = ["127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"]
    errors = [advice.replace("{}", a) for a in addresses[:2]] + ["127.0.0.1:9094: UNAVAILABLE: ipv4:127.0.0.1:9094: Connection refused"]
    said = str(no_broker_answered(addresses, errors))
    assert said.count("requires TLS") == 1 and "127.0.0.1:9092, 127.0.0.1:9093 requires TLS" in said
    assert "127.0.0.1:9094: UNAVAILABLE: ipv4:127.0.0.1:9094: Connection refused" in said


class _Refused(grpc.RpcError):
    def __init__(self, address: str) -> None:
        self.address = address

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return f"failed to connect to all addresses; last error: UNKNOWN: ipv4:{self.address}: Failed to connect to remote host: Connection refused"


def test_refused_connections_are_said_once_with_their_reason() -> None:
    from data_plane.client.metadata_cache import explain_refusal, no_broker_answered

    addresses = ["127.0.0.1:1", "127.0.0.1:2"]
    said = str(no_broker_answered(addresses, [explain_refusal(_Refused(a), a, ClientSecurity()) for a in addresses]))
    assert "(127.0.0.1:1, 127.0.0.1:2: UNAVAILABLE (Connection refused))" in said and said.count("Connection refused") == 1


def test_the_raft_secret_comes_from_one_place_and_require_tls_demands_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from metadata_quorum import controller_main, controller_options

    parser = argparse.ArgumentParser()
    controller_options.add_arguments(parser)
    base = ["--node-id", "1", "--quorum", "1@127.0.0.1:1:2", "--data-dir", str(tmp_path)]
    monkeypatch.delenv(controller_options.PASSWORD_ENV, raising=False)
    (tmp_path / "secret").write_text("s3cret\n")
    assert controller_main.raft_secret(parser.parse_args([*base, "--raft-secret-file", str(tmp_path / "secret")])) == "s3cret"
    assert controller_main.raft_secret(parser.parse_args([*base, "--password", "pw"])) == "pw"
    assert controller_main.raft_secret(parser.parse_args(base)) is None
    with pytest.raises(TlsConfigError, match="not both"):
        controller_main.raft_secret(parser.parse_args([*base, "--password", "pw", "--raft-secret-file", str(tmp_path / "secret")]))
    with pytest.raises(TlsConfigError, match="--require-tls also protects the Raft links"):
        controller_main.raft_secret(parser.parse_args([*base, "--require-tls"]))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(TlsConfigError, match="is empty"):
        controller_main.raft_secret(parser.parse_args([*base, "--raft-secret-file", str(tmp_path / "empty")]))
