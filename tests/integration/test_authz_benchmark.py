"""`kraftlog perf produce` RF=3 acks=all over mutual TLS, with authentication and ACLs off and on,
in one run (printed; nothing asserted on speed).

Run: pytest -m benchmark -s tests/integration/test_authz_benchmark.py
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from metadata_quorum.security_client import SecurityClient
from server_common.authorizer import CLUSTER_NAME, AclBinding
from tests.cluster import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.benchmark]
SUPERS = "User:admin,User:broker-1,User:broker-2,User:broker-3,User:controller-1"
SECURITY_ON = ["--authentication-required", "--authorization", "--super-users", SUPERS]
RECORDS = "1000000"


def test_perf_produce_with_authentication_and_acls_off_and_on(tmp_path) -> None:
    for label, args in (("off", []), ("on", SECURITY_ON)):
        with local_cluster(tmp_path / label, controllers=1, brokers=3, secure=True, controller_args=args, broker_args=args) as cluster:
            cluster.create_topic("bench", partitions=3, replication_factor=3)
            config = json.loads(cluster.client_config_path.read_text())
            if args:
                with SecurityClient(",".join(c.address for c in cluster.controllers), security=cluster.client_security) as admin:
                    admin.upsert_user("bench", "bench-pw")
                    admin.create_acls([AclBinding("User:bench", "*", "topic", "bench", "literal", "write", "allow"),
                                       AclBinding("User:bench", "*", "cluster", CLUSTER_NAME, "literal", "idempotent_write", "allow")])
                config.update(username="bench", password="bench-pw")
            path = tmp_path / f"client-{label}.json"
            path.write_text(json.dumps(config))
            out = subprocess.run([sys.executable, "-m", "cli", "perf", "produce", "--topic", "bench", "--num-records", RECORDS, "--acks", "all",
                                  "--bootstrap", cluster.bootstrap, "--command-config", str(path)], capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, out.stderr
            print(f"\nauthentication + ACLs {label}: {out.stdout.strip()}")
