"""The controller's user and ACL decisions: what they commit and what they refuse."""

from metadata_quorum import delta, security_admin
from metadata_quorum.image import MetadataImage
from kraftlog_proto import common_pb2, security_pb2
from server_common import scram

ACL = security_pb2.Acl(principal="User:alice", resource_type="topic", resource_name="orders", operation="write")


def test_acls_commit_once_and_bad_fields_are_named() -> None:
    image = MetadataImage.empty("c")
    created = security_admin.change_acls(image, security_pb2.AclsRequest(acls=[ACL]), create=True)
    assert len(created.records) == 1 and created.response.error_code == common_pb2.NONE
    image = delta.apply_all(image, created.records)
    assert security_admin.change_acls(image, security_pb2.AclsRequest(acls=[ACL]), create=True).records == ()  # already there: no change
    assert [a.permission for a in security_admin.list_acls(image, security_pb2.ListAclsRequest()).acls] == ["allow"]  # defaults filled in
    bad = security_pb2.Acl(principal="alice", resource_type="topic", resource_name="orders", operation="write")
    refused = security_admin.change_acls(image, security_pb2.AclsRequest(acls=[ACL, bad]), create=False)
    assert refused.records == () and refused.response.error_code == common_pb2.INVALID_REQUEST and "User:NAME" in refused.response.error_message
    removed = security_admin.change_acls(image, security_pb2.AclsRequest(acls=[ACL]), create=False)
    assert not delta.apply_all(image, removed.records).acls


def test_users_are_named_sanely_and_deleted_only_when_present() -> None:
    image = MetadataImage.empty("c")
    credential = scram.derive("pw")
    assert security_admin.upsert_user(image, "a:b", credential).response.error_code == common_pb2.INVALID_REQUEST
    image = delta.apply_all(image, security_admin.upsert_user(image, "alice", credential).records)
    assert [u.name for u in security_admin.list_users(image).users] == ["alice"]
    assert security_admin.delete_user(image, "bob").response.error_code == common_pb2.INVALID_REQUEST
    assert not delta.apply_all(image, security_admin.delete_user(image, "alice").records).scram_users
