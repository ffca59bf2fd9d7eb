"""Keeps Spark's per-task garbage collection cheap in the Python workers that run tasks.

Spark's Python worker calls `gc.collect()` after every task it runs (pyspark/daemon.py, with
worker reuse on, the default). A full collection visits every object the collector tracks,
and a worker that has imported kraftlog's client (gRPC, protobuf, structlog, pyarrow) holds
about twice as many as one that has imported pyarrow and PySpark only: about 45 ms per task
against 15 on this project's loaded 2-core machine, over a hundred milliseconds of CPU per
micro-batch of three tasks. Almost all of them are modules, classes and functions that live as long as
the worker, so the first task in a worker moves them to the permanent generation
(`gc.freeze()`), which later collections skip; objects created afterwards are collected as
usual.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_long_lived() -> None:
    """Once per process: collect what is garbage now, then freeze every object left."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
