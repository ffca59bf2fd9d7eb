"""Each replica's log after the run, for the checker's replica comparison.

Two sources, behind one shape (``ReplicaOp``):

* ``describe_replicas`` asks every broker (DescribeLogs with checksums) for each replica's
  log start, HW, log end and a CRC of its bytes below the HW: works against any cluster,
  compares replicas whose HWs are equal.
* ``read_replica_files`` reads the segment files of a stopped local cluster directly and
  adds the records below each replica's HW, so the checker can say at which offset two
  replicas differ even when their HWs differ.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chaos.history import History, Read, ReplicaOp
from data_plane import record_batch
from data_plane.client import Admin


def describe_replicas(bootstrap: str, topic: str, history: History) -> list[ReplicaOp]:
    """Every replica of ``topic`` on every live broker, from DescribeLogs."""
    with Admin(bootstrap) as admin:
        answers = admin.describe_logs(topics=[topic], include_checksums=True)
    now = history.now()
    return [
        ReplicaOp(broker, p.partition, now, p.log_start_offset, p.high_watermark, p.log_end_offset, checksum=p.checksum_below_hw)
        for broker, answer in sorted(answers.items())
        for p in answer.partitions
        if p.topic == topic and p.error_code == 0
    ]


def read_replica_files(replicas: list[ReplicaOp], data_dirs: dict[int, Path], topic: str) -> list[ReplicaOp]:
    """``replicas`` with the records below their HW read from each broker's data dir
    (the brokers must be stopped: the files are read as they lie)."""
    return [replace(r, reads=[(o, v) for o, v in _log_records(data_dirs[r.broker] / f"{topic}-{r.partition}") if o < r.high_watermark]) for r in replicas]


def _log_records(partition_dir: Path) -> list[Read]:
    """The records of a partition directory's segments, in offset order, up to the first
    batch that does not validate (a torn tail left by a kill)."""
    records: list[Read] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        try:
            for batch in record_batch.decode_batches(data):
                records.extend((o, v.decode()) for o, v in zip(batch.offsets, batch.values))
        except record_batch.CorruptBatchError:
            break
    return records
