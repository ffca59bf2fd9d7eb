"""A streaming copy of one kraftlog topic into another through the exactly-once kraftlog
sink, run as its own process so a test can have it die at an exact point of a micro-batch's
commit.

    python -m tests.spark.eos_sink_query BOOTSTRAP SOURCE TARGET CHECKPOINT_DIR
        [--kill-before-commit N | --kill-after-commit N]

The sink is `kraftlog_killing` (`KillingKraftlogSource`: the kraftlog data source with a
stream writer whose driver-side `commit` SIGKILLs this script's process group, the driver
script and its JVM, for micro-batch N either before committing its transactions or right
after they are committed, before Spark writes N to the checkpoint's commit log; and the
Python workers' group). `run_until_killed` starts it in a session of its own so
the kill takes only this query. Without a kill option the query
runs with Trigger.AvailableNow to its end and the process exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from spark_source.options import parse_sink
from spark_source.source import KraftlogDataSource
from spark_source.stream_writer import KraftlogStreamWriter
from spark_source.writer import validate_schema

MAX_OFFSETS_PER_TRIGGER = 40
_KILL_OPTIONS = ("killbeforecommit", "killaftercommit", "killprocessgroup", "failbeforecommit", "failaftercommit")


class KillingStreamWriter(KraftlogStreamWriter):
    """`commit` runs in a Python worker of PySpark's daemon, which puts itself and its workers
    in a process group of their own: the driver script's group (the script and its JVM) comes
    with the options, and the worker's own group (the daemon, its workers, this one) goes
    last, so nothing of the query goes on after the kill."""

    def __init__(self, opts, kill_before: int | None, kill_after: int | None, group: int | None, fail_before: int | None,
                 fail_after: int | None) -> None:
        super().__init__(opts)
        self.kill_before, self.kill_after, self.group = kill_before, kill_after, group
        self.fail_before, self.fail_after = fail_before, fail_after

    def commit(self, messages, batchId) -> None:
        if batchId == self.kill_before:
            self._kill()
        if batchId == self.fail_before:
            raise RuntimeError(f"failing micro-batch {batchId} before its sink commit (failBeforeCommit)")
        super().commit(messages, batchId)
        if batchId == self.kill_after:
            self._kill()
        if batchId == self.fail_after:
            raise RuntimeError(f"failing micro-batch {batchId} after its sink commit (failAfterCommit)")

    def _kill(self) -> None:
        os.killpg(self.group, signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)


class KillingKraftlogSource(KraftlogDataSource):
    """format("kraftlog_killing"): the kraftlog sink plus the options killBeforeCommit and
    killAfterCommit (a micro-batch id) and killProcessGroup (the process group to kill), and
    failBeforeCommit and failAfterCommit: the query fails right before or after that
    micro-batch's sink commit (before Spark logs it), without a process to kill."""

    @classmethod
    def name(cls) -> str:
        return "kraftlog_killing"

    def streamWriter(self, schema, overwrite):
        options = {k.lower(): v for k, v in self.options.items()}
        kills = [int(options.pop(name)) if name in options else None for name in _KILL_OPTIONS]
        opts = parse_sink(options, streaming=True)
        validate_schema(schema, opts)
        return KillingStreamWriter(opts, *kills)


def start_copy(spark, bootstrap: str, source: str, target: str, checkpoint: Path, exactly_once: bool, trigger: dict, kills: dict | None = None):
    """The query: every record of `source` from the earliest offset, in micro-batches of
    MAX_OFFSETS_PER_TRIGGER records, its values into `target` (same partition)."""
    writer = (
        spark.readStream.format("kraftlog").option("bootstrap", bootstrap).option("subscribe", source)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER).load()
        .selectExpr("value", "partition")
        .writeStream.format("kraftlog_killing").option("bootstrap", bootstrap).option("topic", target)
        .option("exactlyOnce", str(exactly_once).lower()).option("checkpointLocation", str(checkpoint))
    )
    for name, value in (kills or {}).items():
        writer = writer.option(name, str(value))
    return writer.trigger(**trigger).start()


def run_until_killed(args: list[str], log_path: Path, timeout_s: float = 240) -> subprocess.CompletedProcess:
    """Runs this module with `args` in its own session and waits for it to end (the kill)."""
    from tests.spark.spark_processes import REPO

    with open(log_path, "wb") as log_file:
        return subprocess.run([sys.executable, "-m", "tests.spark.eos_sink_query", *args], cwd=REPO, stdout=log_file,
                              stderr=subprocess.STDOUT, start_new_session=True, timeout=timeout_s, check=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--kill-before-commit", type=int)
    parser.add_argument("--kill-after-commit", type=int)
    args = parser.parse_args(argv)
    from tests.spark.session import start_session

    spark = start_session("kraftlog-eos-sink-query")
    spark.dataSource.register(KillingKraftlogSource)
    kills = {"killBeforeCommit": args.kill_before_commit, "killAfterCommit": args.kill_after_commit}
    kills = {k: v for k, v in kills.items() if v is not None}
    if kills:
        kills["killProcessGroup"] = os.getpgid(0)
    trigger = {"processingTime": "0 seconds"} if kills else {"availableNow": True}
    query = start_copy(spark, args.bootstrap, args.source, args.target, args.checkpoint, True, trigger, kills)
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"the query failed: {query.exception()}")
    spark.stop()


if __name__ == "__main__":
    main()
