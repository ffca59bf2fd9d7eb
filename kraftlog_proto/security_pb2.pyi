from kraftlog_proto import common_pb2 as _common_pb2
from kraftlog_proto import controller_pb2 as _controller_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UpsertUserRequest(_message.Message):
    __slots__ = ("name", "password", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    password: str
    iterations: int
    def __init__(self, name: _Optional[str] = ..., password: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SecurityWriteResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: _controller_pb2.ActiveControllerHint
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[_controller_pb2.ActiveControllerHint, _Mapping]] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UserDescription(_message.Message):
    __slots__ = ("name", "mechanism", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[UserDescription]
    def __init__(self, users: _Optional[_Iterable[_Union[UserDescription, _Mapping]]] = ...) -> None: ...

class Acl(_message.Message):
    __slots__ = ("principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    principal: str
    host: str
    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    permission: str
    def __init__(self, principal: _Optional[str] = ..., host: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., operation: _Optional[str] = ..., permission: _Optional[str] = ...) -> None: ...

class AclsRequest(_message.Message):
    __slots__ = ("acls",)
    ACLS_FIELD_NUMBER: _ClassVar[int]
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("principal", "resource_type", "resource_name")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    principal: str
    resource_type: str
    resource_name: str
    def __init__(self, principal: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("acls",)
    ACLS_FIELD_NUMBER: _ClassVar[int]
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...
