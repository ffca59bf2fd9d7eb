"""When the controller's Raft transport fsyncs its journal (``raft_journal.syncing_transport``):
after a leader's entries have gone out, so that its fsync overlaps the follower's, and before
anything else (a follower's acknowledgement, a vote) leaves."""

from __future__ import annotations

import pytest
from pysyncobj.transport import TCPTransport

from metadata_quorum.raft_journal import syncing_transport


class RecordingJournal:
    def __init__(self, happened: list[str]) -> None:
        self.happened = happened

    def sync(self) -> None:
        self.happened.append("fsync")


@pytest.fixture
def sent(monkeypatch) -> tuple[TCPTransport, list[str]]:
    happened: list[str] = []
    monkeypatch.setattr(TCPTransport, "send", lambda self, node, message: happened.append(f"send {message['type']}") or True)
    transport = object.__new__(syncing_transport(lambda: RecordingJournal(happened)))  # no sockets: only send is exercised
    return transport, happened


def test_a_leaders_entries_leave_before_its_fsync(sent) -> None:
    transport, happened = sent
    assert transport.send("follower", {"type": "append_entries", "entries": [], "commit_index": 3}) is True
    assert happened == ["send append_entries", "fsync"]


@pytest.mark.parametrize("kind", ["next_node_idx", "request_vote", "response_vote", "apply_command"])
def test_every_other_message_waits_for_the_fsync(sent, kind: str) -> None:
    transport, happened = sent
    transport.send("peer", {"type": kind})
    assert happened == ["fsync", f"send {kind}"]
