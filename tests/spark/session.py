"""The local SparkSession of the Spark tests, shared by the pytest fixture and by the query
process that the exactly-once test kills (tests/spark/file_sink_query.py)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def start_session(app_name: str, conf: dict[str, str] | None = None) -> SparkSession:
    """A local[2] SparkSession (or what `conf`, e.g. a `spark.master`, says) with the
    `kraftlog` source registered.

    Workers must run this interpreter (it has pyarrow and kraftlog), and everything stays
    on loopback. The polling delay is short so that idle streaming tests react quickly.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from spark_source import register

    builder = SparkSession.builder.master("local[2]")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.pollingDelay", "50ms")
        # Python processes Spark starts must connect back within this (default 15 s), which a
        # heavily loaded shared machine can exceed.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
