"""A PySpark Python Data Source for kraftlog topics: `format("kraftlog")`.

    from spark_source import register
    register(spark)
    df = spark.read.format("kraftlog").option("bootstrap", "127.0.0.1:9092").option("subscribe", "events").load()

See docs/spark.md.
"""

import server_common  # noqa: F401  (chooses gRPC's transport before grpc loads: server_common/grpc_core.py)


def register(spark) -> None:
    """Registers the `kraftlog` data source with a SparkSession."""
    from spark_source.source import register as _register

    _register(spark)


__all__ = ["register"]
