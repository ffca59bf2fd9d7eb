"""Synthetic histories for the checker's tests: a clean run, and edits that break it in one
way each (the negative controls)."""

from __future__ import annotations

from dataclasses import replace

from chaos.history import FINAL, ConvergenceOp, FinalReadOp, Op, PollOp, ReplicaOp, SeekOp, SendOp

VALUES = [f"v{i}" for i in range(6)]


def values_of(partition: int) -> list[str]:
    """The six values written to ``partition`` (VALUES for partition 0): unique in the run."""
    return VALUES if partition == 0 else [f"p{partition}-{v}" for v in VALUES]


def clean_history(partition: int = 0) -> list[Op]:
    """Six acknowledged writes, one consumer reading them in two polls, a final read and
    three identical replicas, all in the ISR after healing: a history with nothing wrong."""
    sends: list[Op] = [SendOp("producer-0", partition, v, i, i + 0.5, "ok", offset=i) for i, v in enumerate(values_of(partition))]
    log = list(enumerate(values_of(partition)))
    polls: list[Op] = [
        SeekOp("consumer-0", partition, 0, 1.0),
        poll(partition, log[:3], hw=3, at=3.0),
        poll(partition, log[3:], hw=6, at=7.0),
    ]
    final: list[Op] = [FinalReadOp(partition, 9.0, 0, 6, log, complete=True)]
    replicas: list[Op] = [ReplicaOp(b, partition, 10.0, 0, 6, 6, reads=log) for b in (1, 2, 3)]
    return sends + polls + final + [convergence(partition)] + replicas


def convergence(partition: int = 0, label: str = FINAL, isr: tuple[int, ...] = (1, 2, 3), target: int = 6, **changes) -> ConvergenceOp:
    """A comparison of replicas 1, 2 and 3 led by broker 1 (after healing unless ``label``
    names a restart)."""
    quiescent = label == FINAL
    restart = None if quiescent else int(label.split()[1])
    fields = dict(leader=1, replicas=[1, 2, 3], isr=list(isr), target_offset=target, quiescent=quiescent, restart=restart)
    return ConvergenceOp(partition, label, 9.5, 1.0, **{**fields, **changes})


def poll(partition: int, reads: list[tuple[int, str]], hw: int, at: float, process: str = "consumer-0", log_start: int = 0, took_s: float = 0.1) -> PollOp:
    """A successful poll of one partition, from ``at`` for ``took_s``."""
    return PollOp(process, at, at + took_s, "ok", {partition: reads}, {partition: hw}, {partition: log_start})


def replace_ops(ops: list[Op], kind: type, edit, where=lambda op: True) -> list[Op]:
    """``ops`` with ``edit(op)`` in place of every op of type ``kind`` that ``where`` picks."""
    return [edit(op) if isinstance(op, kind) and where(op) else op for op in ops]


def with_final_reads(ops: list[Op], reads: list[tuple[int, str]], **changes) -> list[Op]:
    """``ops`` whose final read got ``reads`` instead."""
    return replace_ops(ops, FinalReadOp, lambda op: replace(op, reads=reads, **changes))
