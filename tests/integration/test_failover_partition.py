"""``kraftlog perf failover --mode partition``: the leader's namespace cut from every node and
client, a new leader acknowledging, the cut healed and the old leader back in the ISR; and,
as a benchmark, 20 rounds of it against 20 SIGKILLs on the same kind of cluster.

Needs root and the ``ip`` and ``tc`` tools (skipped with the reason otherwise).
"""

from __future__ import annotations

import pytest

from chaos import netns
from tests.integration.test_perf_cmds import kraftlog_json

pytestmark = pytest.mark.skipif(netns.unavailable_reason() is not None, reason=netns.unavailable_reason() or "")


def _failover(mode: str, kills: int) -> dict:
    report = kraftlog_json(
        "perf", "failover", "--kills", str(kills), "--mode", mode, "--namespaces", "--rate", "100", "--round-timeout-s", "60",
        timeout=120 + 60 * kills,
    )
    assert report["kills"] == kills and report["replication_factor"] == 3
    assert all(r["new_leader"] != r["victim"] and r["new_epoch"] > r["old_epoch"] for r in report["rounds"]), report["rounds"]
    assert report["producer"]["failed"] == 0, report["producer"]["first_error"]
    return report


@pytest.mark.integration
def test_partitioned_leader_is_replaced_and_rejoins() -> None:
    [round_] = _failover("partition", 1)["rounds"]
    assert round_["failover_ms"] > 0


@pytest.mark.benchmark
def test_failover_partition_against_sigkill() -> None:
    figures = {mode: _failover(mode, 20)["failover_ms"] for mode in ("partition", "kill")}
    print(f"failover ms over 20 rounds each: {figures}")
