"""The quorum checks on hand-written histories: each kind found where it happened, and a
history a correct quorum makes (stale but prefix-closed reads of controllers that caught up)
passes."""

from __future__ import annotations

from chaos.checker.quorum_checks import MetadataRead, check_quorum

ACKED = {0: 1.0, 1: 2.0, 2: 3.0}


def kinds(reads, finals) -> dict[str, list[int]]:
    return {kind: [a.partition for a in found] for kind, found in check_quorum(ACKED, reads, finals).by_kind.items()}


def test_a_correct_history_passes_stale_reads_included() -> None:
    reads = [MetadataRead(1, 0.0, 2.5, frozenset({0})),  # behind what was acknowledged, but it started before all of it
             MetadataRead(4, 2.5, 2.9, frozenset({0, 1})), MetadataRead(4, 2.5, 3.5, frozenset({0, 1, 2, 3}))]
    assert kinds(reads, [MetadataRead(4, 2.5, 9.0, frozenset({0, 1, 2}))]) == {}


def test_each_kind_is_found() -> None:
    reads = [MetadataRead(4, 2.5, 2.6, frozenset()),  # started after q-0 and q-1 were acknowledged: stale
             MetadataRead(2, 0.0, 3.1, frozenset({0, 2})),  # a hole
             MetadataRead(3, 0.0, 3.2, frozenset({0, 1})), MetadataRead(3, 0.0, 3.3, frozenset({0}))]  # went back
    finals = [MetadataRead(1, 0.0, 9.0, frozenset({0, 1}))]  # q-2 lost
    assert kinds(reads, finals) == {"lost-metadata": [1], "stale-read": [4], "reordered-metadata": [2], "read-went-back": [3]}


def test_a_restarted_process_starts_over_for_went_back() -> None:
    # q-3 was in flight (never acknowledged): the old process served it, the restarted one not yet
    reads = [MetadataRead(3, 0.0, 3.2, frozenset({0, 1, 2, 3})), MetadataRead(3, 3.25, 3.6, frozenset({0, 1, 2}))]
    assert kinds(reads, []) == {}
