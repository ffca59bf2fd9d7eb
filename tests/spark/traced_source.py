"""The `kraftlog` source, unchanged, plus a record of where each task's read() ran.

Format `kraftlog_traced` takes every kraftlog option and one more, `traceDir`: each read()
writes a file there named for its range, holding the reading process's pid and its
ancestors' pids (from /proc, taken in that process). A test compares them with the pids of
the Spark workers and the driver to prove where tasks ran.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spark_source.options import parse_source
from spark_source.reader import KraftlogBatchReader
from spark_source.source import KraftlogDataSource
from spark_source.stream_reader import KraftlogStreamReader
from tests.spark.spark_processes import ancestors

TRACE_OPTION = "tracedir"


def _trace(trace_dir: str, partition) -> None:
    record = {"pid": os.getpid(), "ancestors": ancestors(os.getpid())}
    name = f"{partition.topic}-{partition.partition}-{partition.start}-{partition.end}-{os.getpid()}.json"
    (Path(trace_dir) / name).write_text(json.dumps(record))


class _Traced:
    """read() of a kraftlog reader, recorded first; `trace_dir` is set by the data source."""

    trace_dir: str

    def read(self, partition):
        _trace(self.trace_dir, partition)
        return super().read(partition)


class TracedBatchReader(_Traced, KraftlogBatchReader):
    pass


class TracedStreamReader(_Traced, KraftlogStreamReader):
    pass


class TracedKraftlogSource(KraftlogDataSource):
    @classmethod
    def name(cls) -> str:
        return "kraftlog_traced"

    def _traced(self, reader_class, streaming: bool):
        options = {k: v for k, v in self.options.items() if k.lower() != TRACE_OPTION}
        reader = reader_class(parse_source(options, streaming=streaming))
        reader.trace_dir = next(v for k, v in self.options.items() if k.lower() == TRACE_OPTION)
        return reader

    def reader(self, schema):
        return self._traced(TracedBatchReader, streaming=False)

    def streamReader(self, schema):
        return self._traced(TracedStreamReader, streaming=True)


def read_traces(trace_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in Path(trace_dir).glob("*.json")]
