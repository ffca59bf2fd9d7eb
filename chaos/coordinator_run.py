"""What the scenarios with a workload of their own (``chaos/group_run.py``,
``chaos/txn_run.py``) share around it: a proxied cluster with their broker flags, and the
report and result of their findings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from chaos.chaos_cluster import ChaosCluster
from chaos.checker.findings import Findings
from chaos.checker.verdict import judge
from chaos.network import Network
from chaos.toxiproxy import start_toxiproxy
from chaos.run_options import RunOptions, RunResult

ANOMALIES_IN_REPORT = 50


@contextmanager
def proxied_cluster(options: RunOptions, broker_args: list[str]) -> Iterator[ChaosCluster]:
    """Toxiproxy and a ChaosCluster of the scenario's settings (not started), every broker
    with ``broker_args`` too; the proxy stops on the way out (the run kills its nodes)."""
    report_dir = options.report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    with open(report_dir / "toxiproxy.log", "ab") as log, start_toxiproxy(log_file=log) as proxy:
        cluster = ChaosCluster.build(report_dir / "cluster", options.scenario.cluster, Network(proxy))
        for node in cluster.brokers:
            node.extra_args = [*node.extra_args, *broker_args]
        cluster.save()
        yield cluster


def findings_result(options: RunOptions, result: Findings, faults: list[tuple[float, str]], counts: dict[str, int],
                    headline: str, file_name: str) -> RunResult:
    """The verdict on ``result``, the report ``file_name`` (JSON: the run, its ``counts``,
    faults and anomalies) and the summary (``headline``: the counts for people)."""
    scenario = options.scenario
    verdict = judge(result, scenario.expected)
    title = f"kraftlog chaos: {scenario.name}, seed {options.seed}, {options.duration_s:.0f}s"
    lines = [title, f"  verdict: {verdict.outcome.label.upper()}, {verdict.sentence}", f"  {headline}, {len(faults)} faults"]
    for kind, found in result.by_kind.items():
        lines.append(f"  {kind}: {len(found)}")
        lines.extend(f"    {a.message}" for a in found[:3])
    report = options.report_dir / file_name
    report.write_text(json.dumps({
        "scenario": scenario.name, "seed": options.seed, "duration_s": options.duration_s, "verdict": verdict.to_json(),
        "faults": faults, **counts,
        "anomalies": [{"kind": a.kind, "partition": a.partition, "message": a.message, **a.details}
                      for a in result.anomalies[:ANOMALIES_IN_REPORT]],
    }, indent=2, default=str))
    return RunResult(result, verdict, report, "\n".join(lines), [f for _, f in faults])
