"""User and ACL records: the protobuf round trip, replay into the image, snapshot and removal."""

from metadata_quorum import delta, image, records
from server_common import scram

ACL = ("User:alice", "*", "topic", "orders", "literal", "read", "allow")


def test_replay_snapshot_and_remove() -> None:
    c = scram.derive("pw")
    added = [records.UserScramCredentialRecord("alice", c.salt, c.stored_key, c.server_key, c.iterations), records.AccessControlEntryRecord(*ACL)]
    added = [records.decode(records.encode(r)) for r in added]
    im = delta.apply_all(image.MetadataImage.empty("c"), added)
    assert scram.verify("pw", im.scram_users["alice"]) and len(im.acls) == 1
    rebuilt = delta.image_from_snapshot("c", image.image_to_records(im), im.offset)
    assert rebuilt.scram_users == im.scram_users and rebuilt.acls == im.acls
    removed = delta.apply_all(im, [records.RemoveAccessControlEntryRecord(*ACL), records.RemoveUserScramCredentialRecord("alice")])
    assert not removed.scram_users and not removed.acls
