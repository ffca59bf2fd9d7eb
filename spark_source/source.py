"""The `kraftlog` PySpark data source: spark.read / readStream / write / writeStream."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from spark_source.arrow_rows import schema_ddl
from spark_source.options import parse_sink, parse_source
from spark_source.reader import KraftlogBatchReader
from spark_source.stream_reader import KraftlogStreamReader
from spark_source.stream_writer import KraftlogStreamWriter
from spark_source.writer import KraftlogWriter, validate_schema


class KraftlogDataSource(DataSource):
    """Reads and writes kraftlog topics with the schema of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "kraftlog"

    def schema(self):
        value = str(self.options.get("includeHeaders", "false")).strip().lower()
        return schema_ddl(value in ("true", "1", "yes"))

    def reader(self, schema):
        return KraftlogBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema):
        return KraftlogStreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema, overwrite):
        opts = parse_sink(self.options, streaming=False)
        validate_schema(schema, opts)
        return KraftlogWriter(opts)

    def streamWriter(self, schema, overwrite):
        opts = parse_sink(self.options, streaming=True)
        validate_schema(schema, opts)
        return KraftlogStreamWriter(opts)


def register(spark) -> None:
    """Makes format("kraftlog") available in `spark`."""
    spark.dataSource.register(KraftlogDataSource)
