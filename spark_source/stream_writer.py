"""writeStream.format("kraftlog"): exactly-once by default, at-least-once with exactlyOnce=false.

Spark calls `write` in every task of a micro-batch, then `commit(messages, batchId)` on the
driver once every task succeeded (and only after it returns writes the micro-batch to the
checkpoint's commit log), or `abort` if one failed.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamArrowWriter

from spark_source.options import SinkOptions
from spark_source.transactional_writer import abort_prepared, commit_prepared, write_transaction
from spark_source.writer import write_batches


class KraftlogStreamWriter(DataSourceStreamArrowWriter):
    """Exactly-once: each task prepares a transaction and `commit` commits them all
    (spark_source/transactional_writer.py). At-least-once: each task's rows are acknowledged
    before it reports success, and a replayed micro-batch writes them again."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator):
        if self.opts.exactly_once:
            return write_transaction(self.opts, iterator)
        return write_batches(self.opts, iterator)

    def commit(self, messages, batchId) -> None:
        if self.opts.exactly_once:
            commit_prepared(self.opts, messages)

    def abort(self, messages, batchId) -> None:
        if self.opts.exactly_once:
            abort_prepared(self.opts, messages)
