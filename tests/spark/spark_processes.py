"""Spark's own server processes, started from the PySpark package (no Spark download): a
standalone cluster (a master and workers, each its own JVM started with `spark-class`) and
a Spark Connect server (`spark-submit` of its server class, as `start-connect-server.sh` does).

Every process binds port 0 and the address is read from its log, so parallel test runs
never collide. Each JVM runs in its own process group: executors the
worker launches (and their Python workers) share it, so stopping the group stops them all.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from server_common.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
# Small heaps: the machine is shared, and these daemons only schedule.
DAEMON_MEMORY = "256m"
EXECUTOR_MEMORY = "512m"
CONNECT_SERVER_MEMORY = "1g"
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = "Successfully registered with master"
_CONNECT_URL = re.compile(r"Spark Connect server started at: (\S+:\d+)")
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env() -> dict[str, str]:
    """Environment for Spark's JVMs and their Python workers: this interpreter (it has
    pyarrow and kraftlog's dependencies) with this checkout first on the path."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return env


@dataclass
class Daemon:
    """One JVM started by spark-class or spark-submit (both exec java, so `proc.pid` is the JVM)."""

    name: str
    proc: subprocess.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_log(self, what: str, pattern: re.Pattern[str] | str, timeout_s: float = 90) -> re.Match[str] | bool:
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern

        def seen():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; its log:\n{self.text()[-3000:]}")
            return regex.search(self.text())

        try:
            return wait_for(seen, timeout_s, f"{self.name}: {what}")
        except TimeoutError as err:
            raise TimeoutError(f"{err}; its log ({self.log}):\n{self.text()[-3000:]}") from None

    def stop(self) -> None:
        """SIGTERM to the JVM's process group (executors and Python workers included), then SIGKILL."""
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group


@dataclass
class StandaloneCluster:
    master_url: str
    master: Daemon
    workers: list[Daemon] = field(default_factory=list)

    @property
    def worker_pids(self) -> set[int]:
        return {w.proc.pid for w in self.workers}


def _start(name: str, script: str, args: list[str], log: Path, env: dict[str, str], cwd: Path) -> Daemon:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / script), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    return Daemon(name, proc, log)


@contextlib.contextmanager
def standalone_cluster(work_dir: Path, workers: int = 2, cores_per_worker: int = 1) -> Iterator[StandaloneCluster]:
    """Starts a master and `workers` workers, waits until every worker is registered, and
    always stops every JVM on exit."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    env = spark_env()
    daemons: list[Daemon] = []
    try:
        master = _start(
            "spark master",
            "spark-class",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
            work_dir / "master.log",
            env,
            work_dir,
        )
        daemons.append(master)
        url = master.wait_log("its URL", _MASTER_URL).group(1)
        cluster = StandaloneCluster(url, master)
        for i in range(workers):
            worker_dir = work_dir / f"worker-{i}"
            worker_dir.mkdir(exist_ok=True)
            worker = _start(
                f"spark worker {i}",
                "spark-class",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host", "127.0.0.1",
                    "--port", "0",
                    "--webui-port", "0",
                    "--cores", str(cores_per_worker),
                    "--memory", EXECUTOR_MEMORY,
                    "--work-dir", str(worker_dir),
                ],
                work_dir / f"worker-{i}.log",
                env,
                worker_dir,
            )
            daemons.append(worker)
            cluster.workers.append(worker)
        for worker in cluster.workers:
            worker.wait_log("registration with the master", _REGISTERED)
        yield cluster
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


@contextlib.contextmanager
def connect_server(work_dir: Path, master: str = "local[2]") -> Iterator[str]:
    """Starts a Spark Connect server whose driver runs on `master`, yields its `sc://` URL
    and always stops it. Its Python workers run this interpreter with this checkout first
    on the path: that is where the data source a client registers gets unpickled."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    server = _start(
        "spark connect server",
        "spark-submit",
        [
            "--class", CONNECT_SERVER_CLASS,
            "--master", master,
            "--driver-memory", CONNECT_SERVER_MEMORY,
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.connect.grpc.binding.port=0",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.streaming.pollingDelay=50ms",
            "spark-internal",
        ],
        work_dir / "connect-server.log",
        # The launcher sizes the server as a daemon; its driver also runs the local[2] tasks.
        {**spark_env(), "SPARK_DAEMON_MEMORY": CONNECT_SERVER_MEMORY},
        work_dir,
    )
    try:
        address = server.wait_log("its address", _CONNECT_URL, timeout_s=180).group(1)
        yield f"sc://{address}"
    finally:
        server.stop()


def standalone_conf(master_url: str, executors: int) -> dict[str, str]:
    """SparkSession settings for a driver on `master_url`: one 1-core executor per worker."""
    return {
        "spark.master": master_url,
        "spark.executor.cores": "1",
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.cores.max": str(executors),
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": spark_env()["PYTHONPATH"],
        # Start tasks only once every executor is there, so both workers get work.
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
    }


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, grandparent, ... up to init, from /proc."""
    chain = []
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        chain.append(pid)
    return chain


def run_driver(command: list[str], log_path: Path, timeout_s: float) -> subprocess.Popen:
    """Runs a driver process (`command`, from the checkout, output into `log_path`) to its
    end and returns it (its pid and returncode). It gets its own process group, with the JVM it starts,
    so a driver still running after `timeout_s` is SIGKILLed with its JVM and workers."""
    with open(log_path, "wb") as log_file:
        driver = subprocess.Popen(command, cwd=REPO, env=spark_env(), stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            driver.wait(timeout_s)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)
    return driver
