"""Records survive the protobuf encoding used in Raft entries and the metadata stream."""

from __future__ import annotations

import pytest

from metadata_quorum import records as r
from kraftlog_proto import controller_pb2 as pb

SAMPLES = [
    r.TopicRecord("orders", "id-1"),
    r.PartitionRecord("id-1", 3, (1, 2, 3), (1, 2), 1, 4, 7, (3,), ()),
    r.PartitionChangeRecord("id-1", 3, 7),
    r.PartitionChangeRecord("id-1", 3, 7, leader=2, isr=(2,), replicas=(1, 2), adding_replicas=(), removing_replicas=(3,)),
    r.PartitionChangeRecord("id-1", 0, 0, leader=-1, isr=()),
    r.RegisterBrokerRecord(4, r.NEW_BROKER_EPOCH, "h", 9092, "rack-a", "inc", True, False),
    r.RegisterBrokerRecord(4, 17, "h", 9092, "", "inc", False, True),
    r.UnregisterBrokerRecord(4, 17),
    r.FenceBrokerRecord(4, 17),
    r.UnfenceBrokerRecord(4, 17),
    r.BrokerRegistrationChangeRecord(4, 17, True),
    r.ConfigRecord("orders", "retention.ms", "1000"),
    r.ConfigRecord("orders", "retention.ms", None),
    r.ConfigRecord("orders", "cleanup.policy", ""),
    r.RemoveTopicRecord("id-1"),
    r.ProducerIdsRecord(4, 17, 2000),
    r.ClientQuotaRecord("alice", None, "producer_byte_rate", 1024.0),
    r.ClientQuotaRecord("", "app", "request_rate", None),
    r.ClientQuotaRecord(None, "", "consumer_byte_rate", 0.5),
    r.UserScramCredentialRecord("alice", b"salt", b"stored", b"server", 4096),
    r.RemoveUserScramCredentialRecord("alice"),
    r.AccessControlEntryRecord("User:alice", "*", "topic", "orders", "prefixed", "write", "deny"),
    r.RemoveAccessControlEntryRecord("User:*", "10.0.0.1", "group", "g", "literal", "read", "allow"),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda rec: type(rec).__name__)
def test_encode_decode_round_trip(record):
    assert r.decode(r.encode(record)) == record


def test_every_record_type_is_sampled():
    assert {type(s) for s in SAMPLES} == set(r._ONEOF_FIELD)


def test_absent_list_differs_from_empty_list():
    """isr=None keeps the ISR, isr=() empties it: presence must survive the wire."""
    assert r.decode(r.encode(r.PartitionChangeRecord("t", 0, 0))).isr is None
    assert r.decode(r.encode(r.PartitionChangeRecord("t", 0, 0, isr=()))).isr == ()


def test_empty_record_is_refused():
    with pytest.raises(ValueError, match="no body"):
        r.decode(pb.MetadataRecord().SerializeToString())
