"""``kraftlog chaos list``, ``kraftlog chaos run``, ``kraftlog chaos soak`` (many
seeded runs, ``chaos.soak``) and ``kraftlog chaos attack`` (``chaos.attacker``): the harness
as a command.

``run`` starts its own cluster behind Toxiproxy (or, with ``--bootstrap``, runs only the
workload against an existing cluster), prints progress, writes the report directory and
exits with the verdict's code (``chaos.checker.verdict.Outcome``): 0 when a safe scenario
found nothing or a negative control (``unsafe-``) was caught as expected, 1 when a safe
scenario found anomalies, 2 when a negative control found none of the anomalies its bug must
cause (the checker missed it).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from chaos.scenarios import SCENARIOS


def add_subcommand(sub: argparse._SubParsersAction) -> None:
    """Adds ``chaos list``, ``chaos run`` and ``chaos soak`` to the kraftlog command."""
    chaos = sub.add_parser("chaos", help="fault-injection scenarios with a history checker").add_subparsers(dest="action", required=True)
    listing = chaos.add_parser("list", help="the scenarios, with what each does")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    listing.set_defaults(func=list_scenarios)
    run = chaos.add_parser("run", help="run one scenario and check its history")
    run.add_argument("--scenario", required=True, choices=sorted(SCENARIOS), metavar="NAME", help="see kraftlog chaos list")
    run.add_argument("--duration", type=float, default=60.0, help="seconds of faults (the run adds setup, recovery and checking)")
    run.add_argument("--seed", type=int, help="fault schedule seed (default: random, printed so the run can be replayed)")
    run.add_argument("--report", type=Path, help="report directory (default: a new temporary directory)")
    run.add_argument("--bootstrap", help="run the workload only against this existing cluster (no faults)")
    run.add_argument("--partitions", type=int, default=3, help="partitions of the workload topic (default: %(default)s)")
    run.add_argument("--replication-factor", type=int, default=3, help="replicas of each partition of the workload topic (default: %(default)s)")
    run.add_argument("--min-insync-replicas", type=int, default=2, help="the topic's min.insync.replicas: acks=all writes fail below it (default: %(default)s)")
    run.add_argument("--rate", type=int, default=100, help="records per second per producer")
    run.add_argument("--producer-client", choices=["kraftlog", "librdkafka"], default="kraftlog",
                     help="librdkafka: the retrying producers write through the brokers' Kafka listeners (confluent-kafka) "
                          "(default: %(default)s)")
    run.set_defaults(func=run_scenario)
    soak = chaos.add_parser("soak", help="many seeded schedules, a summary table; exit 1 on any anomaly")
    soak.add_argument("--schedules", type=int, default=100, help="how many runs (default: %(default)s)")
    soak.add_argument("--seed-base", type=int, default=0, help="run i uses seed seed-base + i (default: %(default)s)")
    soak.add_argument("--duration", type=float, default=20.0, help="seconds of faults per run (default: %(default)s)")
    soak.add_argument("--report", type=Path, help="directory for every run's report and soak.txt (default: a new temporary directory)")
    soak.add_argument("--scenarios", help="comma-separated scenario names to draw from (default: every scenario a correct cluster passes)")
    soak.add_argument("--with-negative-controls", action="store_true", help="also run the unsafe- scenarios (a catch passes, a miss fails)")
    soak.set_defaults(func=soak_scenarios)
    attack = chaos.add_parser("attack", help="a hostile client against a secure cluster: wrong passwords, expensive requests, bare TLS handshakes")
    attack.add_argument("--command-config", type=Path, required=True, metavar="FILE",
                        help="client config with the cluster's CA and the attacker's certificate (ca_file, cert_file, key_file)")
    attack.add_argument("--brokers", required=True, help="comma-separated broker addresses")
    attack.add_argument("--controllers", required=True, help="comma-separated controller addresses")
    attack.add_argument("--metrics", default="", help="comma-separated host:port of metrics endpoints to handshake with")
    attack.add_argument("--user", required=True, help="a user the attacker signs in as (it should have no ACLs)")
    attack.add_argument("--password", required=True, help="that user's password")
    attack.add_argument("--victim", default="admin", help="a real user name whose password the attacker guesses (default: %(default)s)")
    attack.add_argument("--duration", type=float, default=30.0, help="seconds (default: %(default)s)")
    attack.set_defaults(func=attack_command)


def list_scenarios(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([{"name": name, "description": s.description, "workload": s.workload, "negative_control": bool(s.expected),
                           "must_find": sorted(s.expected)} for name, s in SCENARIOS.items()], indent=2))
        return 0
    width = max(map(len, SCENARIOS))
    for name, scenario in SCENARIOS.items():
        expect = f" [must find one of: {', '.join(sorted(scenario.expected))}]" if scenario.expected else ""
        print(f"{name:<{width}}  {scenario.description}{expect}")
    return 0


def soak_scenarios(args: argparse.Namespace) -> int:
    from chaos.soak import plan, scenario_names, soak, table
    from server_common.logging_setup import configure_logging

    configure_logging("console", "ERROR")
    try:
        names = scenario_names(args.with_negative_controls, args.scenarios.split(",") if args.scenarios else None)
        plan(args.schedules, args.seed_base, names)
    except ValueError as error:
        print(f"kraftlog chaos soak: {error}")
        return 2
    report_root = args.report or Path(tempfile.mkdtemp(prefix="kraftlog-chaos-soak-"))
    print(f"soak: {args.schedules} schedules from seed {args.seed_base}, {args.duration:g}s each, over {len(names)} scenarios; reports in {report_root}", flush=True)
    runs = soak(args.schedules, args.seed_base, args.duration, report_root, names, lambda line: print(line, flush=True))
    print(table(runs))
    print(f"summary: {report_root / 'soak.txt'}")
    return 1 if any(r.failed for r in runs) else 0


def run_scenario(args: argparse.Namespace) -> int:
    from chaos.runner import RunOptions, replay_command, run
    from chaos.workload import WorkloadSettings
    from server_common.logging_setup import configure_logging

    configure_logging("console", "ERROR")  # the clients' retry chatter would drown the progress lines

    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    report_dir = args.report or Path(tempfile.mkdtemp(prefix=f"kraftlog-chaos-{args.scenario}-"))
    workload = WorkloadSettings(
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        min_insync_replicas=args.min_insync_replicas,
        rate_per_s=args.rate,
        producer_client=args.producer_client,
    )
    if args.bootstrap:  # someone else's cluster: a topic of our own
        workload = replace(workload, topic=f"chaos-{seed}-{int(time.time())}")
    options = RunOptions(SCENARIOS[args.scenario], args.duration, seed, report_dir, workload, args.bootstrap, progress=lambda line: print(line, flush=True))
    print(f"scenario {args.scenario}, seed {seed} (replay: {replay_command(options)})")
    outcome = run(options)
    print(outcome.summary)
    print(f"report: {outcome.report}")
    print(f"verdict: {outcome.verdict.outcome.label} (exit {outcome.verdict.outcome.exit_code})")
    return outcome.verdict.outcome.exit_code


def attack_command(args: argparse.Namespace) -> int:
    from chaos.attacker import Target, attack
    from server_common.client_security import ClientSecurity

    certificate = ClientSecurity.load(args.command_config)
    if certificate.ca_file is None or certificate.cert_file is None:
        print("kraftlog chaos attack: give --command-config a client config with ca_file, cert_file and key_file (the attacker's certificate)")
        return 2
    split = lambda text: [a for a in text.split(",") if a]  # noqa: E731
    print(attack(Target(split(args.brokers), split(args.controllers), split(args.metrics)), certificate, args.user, args.password,
                 args.victim, args.duration, lambda: print(f"attacking for {args.duration:g}s", flush=True)), flush=True)
    return 0
