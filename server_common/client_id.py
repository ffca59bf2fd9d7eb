"""The client id travels in gRPC metadata (``kraftlog-client-id``) on every call a client makes,
so that a broker knows it for any RPC (quotas, logs), not only for those whose request body
has a ``client_id`` field. Clients in other languages set the same metadata key.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

CLIENT_ID_METADATA_KEY = "kraftlog-client-id"
CLIENT_ID_LENGTH_MAX = 255  # longer ids are cut: a metadata header is no place for a payload


def client_id_from_metadata(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The client id a call carries in its metadata ("" when none)."""
    for key, value in metadata or ():
        if key == CLIENT_ID_METADATA_KEY:
            text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
            return text[:CLIENT_ID_LENGTH_MAX]
    return ""


class _MethodWithMetadata:
    """One stub method, called with the client id added to its metadata (plain calls, and
    ``.future`` on blocking stubs)."""

    __slots__ = ("_method", "_metadata")

    def __init__(self, method: Any, metadata: tuple[tuple[str, str], ...]) -> None:
        self._method = method
        self._metadata = metadata

    def __call__(self, *args: Any, metadata: Iterable[tuple[str, str]] = (), **kwargs: Any) -> Any:
        return self._method(*args, metadata=(*self._metadata, *metadata), **kwargs)

    def future(self, *args: Any, metadata: Iterable[tuple[str, str]] = (), **kwargs: Any) -> Any:
        return self._method.future(*args, metadata=(*self._metadata, *metadata), **kwargs)


class _StubWithClientId:
    """A generated stub whose every method sends the client id."""

    def __init__(self, stub: Any, metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str) -> _MethodWithMetadata:
        method = _MethodWithMetadata(getattr(self._stub, name), self._metadata)
        setattr(self, name, method)  # built once per method
        return method


def with_client_id(stub_class: Callable[[Any], Any], client_id: str, credentials: tuple[tuple[str, str], ...] = ()) -> Callable[[Any], Any]:
    """A stub factory for a channel pool: ``stub_class`` whose calls carry ``client_id`` and
    the ``credentials`` metadata (``stub_class`` itself when there is neither)."""
    metadata = (((CLIENT_ID_METADATA_KEY, client_id[:CLIENT_ID_LENGTH_MAX]),) if client_id else ()) + credentials
    if not metadata:
        return stub_class
    return lambda channel: _StubWithClientId(stub_class(channel), metadata)
