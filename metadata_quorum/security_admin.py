"""Pure controller decisions for users and ACLs (docs/security.md): validate a change against
the image and return the records to commit, or list what the image holds. No I/O or clock
(deriving a user's SCRAM keys draws a random salt and runs PBKDF2: the shell does it before).
"""

from __future__ import annotations

from dataclasses import astuple

from metadata_quorum.decision import Decision
from metadata_quorum.image import MetadataImage
from metadata_quorum.records import AccessControlEntryRecord, Record, RemoveAccessControlEntryRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from server_common.authorizer import AclBinding
from server_common.scram import ScramCredential
from kraftlog_proto import security_pb2 as pb
from server_common.errors import ErrorCode

USER_NAME_LENGTH_MAX = 255


def user_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a user name, or None."""
    if not name or len(name) > USER_NAME_LENGTH_MAX or any(c in name for c in ":,*\n"):
        return f"user name {name!r} must be 1 to {USER_NAME_LENGTH_MAX} characters without ':', ',', '*' or newlines; choose another name"
    return None


def _refused(message: str) -> Decision[pb.SecurityWriteResponse]:
    return Decision((), pb.SecurityWriteResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=message))


def upsert_user(image: MetadataImage, name: str, credential: ScramCredential) -> Decision[pb.SecurityWriteResponse]:
    problem = user_name_problem(name)
    if problem:
        return _refused(problem)
    record = UserScramCredentialRecord(name, credential.salt, credential.stored_key, credential.server_key, credential.iterations,
                                       credential.stored_key_sha512, credential.server_key_sha512)
    return Decision((record,), pb.SecurityWriteResponse())


def delete_user(image: MetadataImage, name: str) -> Decision[pb.SecurityWriteResponse]:
    if name not in image.scram_users:
        return _refused(f"no user {name!r}; `kraftlog users list` shows the users")
    return Decision((RemoveUserScramCredentialRecord(name),), pb.SecurityWriteResponse())


def list_users(image: MetadataImage) -> pb.ListUsersResponse:
    return pb.ListUsersResponse(users=[pb.UserDescription(name=n, mechanism=",".join(c.mechanisms), iterations=c.iterations) for n, c in sorted(image.scram_users.items())])


def binding_of(acl: pb.Acl) -> AclBinding:
    return AclBinding(acl.principal, acl.host or "*", acl.resource_type, acl.resource_name, acl.pattern_type or "literal", acl.operation, acl.permission or "allow")


def acl_message(binding: AclBinding) -> pb.Acl:
    return pb.Acl(**{name: value for name, value in zip(pb.Acl.DESCRIPTOR.fields_by_name, astuple(binding))})


def change_acls(image: MetadataImage, request: pb.AclsRequest, create: bool) -> Decision[pb.SecurityWriteResponse]:
    """One record per ACL added (or removed); any invalid ACL refuses the whole request."""
    if not request.acls:
        return _refused("no ACLs given; name at least one")
    records: list[Record] = []
    for acl in request.acls:
        binding = binding_of(acl)
        try:
            binding.validate()
        except ValueError as exc:
            return _refused(str(exc))
        if create and binding not in image.acls:
            records.append(AccessControlEntryRecord(*astuple(binding)))
        elif not create and binding in image.acls:
            records.append(RemoveAccessControlEntryRecord(*astuple(binding)))
    return Decision(tuple(records), pb.SecurityWriteResponse())


def list_acls(image: MetadataImage, request: pb.ListAclsRequest) -> pb.ListAclsResponse:
    chosen = [
        b for b in image.acls
        if (not request.principal or b.principal == request.principal)
        and (not request.resource_type or b.resource_type == request.resource_type)
        and (not request.resource_name or b.resource_name == request.resource_name)
    ]
    return pb.ListAclsResponse(acls=[acl_message(b) for b in sorted(chosen, key=astuple)])
