"""Which controller to ask next: the pure part of every controller client (admin client,
broker lifecycle). Writes must reach the active controller; a NOT_CONTROLLER answer names it,
an unreachable controller means trying the next one, with bounded exponential backoff."""

from __future__ import annotations

from typing import Sequence

import grpc

from metadata_quorum.endpoints import Endpoint
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode, error_code_name, from_wire_code
from server_common.limits import MESSAGE_BYTES_MAX

BACKOFF_S_MIN = 0.05
BACKOFF_S_MAX = 1.0
# Channel options of every controller client: a metadata snapshot arrives as one message.
CONTROLLER_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MESSAGE_BYTES_MAX)]
# Trailing metadata key of an UNAVAILABLE read refused by a controller that has not caught up
# with the metadata log since it started: it answers, and another controller may serve the read.
CATCHING_UP_METADATA_KEY = "kraftlog-catching-up"


def is_catching_up(error: Exception) -> bool:
    """Whether a failed call was refused by a controller still catching up (see above)."""
    return isinstance(error, (grpc.Call, grpc.aio.AioRpcError)) and any(key == CATCHING_UP_METADATA_KEY for key, _ in error.trailing_metadata() or ())


class ControllerError(Exception):
    """A controller refused a request, or none answered in time; the message says what to do.
    ``code`` is the refusal's `ErrorCode` (``from_wire`` reads an answer's fields)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        assert isinstance(code, ErrorCode), code
        self.code = code
        self.code_name = code.name
        self.message = message
        super().__init__(f"{self.code_name}: {message}")

    @classmethod
    def from_wire(cls, code: int, message: str) -> ControllerError:
        """An answer's ``error_code``/``error_message``; a number this version does not know
        stays visible in the message (the code reads as an unknown server error)."""
        known = from_wire_code(code)
        return cls(known, message if known == code else f"{error_code_name(code)}: {message}")


class ControllerRouter:
    def __init__(self, endpoints: Sequence[Endpoint]) -> None:
        assert endpoints, "at least one controller endpoint is needed"
        self.endpoints: list[Endpoint] = list(endpoints)
        self._index = 0
        self._failures = 0

    def current(self) -> Endpoint:
        return self.endpoints[self._index]

    def describe(self, endpoint: Endpoint) -> str:
        node_id, host, port = endpoint
        return f"controller {node_id} at {host}:{port}" if node_id >= 0 else f"controller at {host}:{port}"

    def on_success(self) -> None:
        self._failures = 0

    def on_unreachable(self) -> float:
        """The current controller did not answer: move to the next; returns the delay before retrying."""
        self._index = (self._index + 1) % len(self.endpoints)
        return self._backoff()

    def point_at(self, target: Endpoint) -> bool:
        """Make ``target`` the current controller (added if unknown); whether that moved away
        from another one."""
        known = [i for i, (_, host, port) in enumerate(self.endpoints) if (host, port) == target[1:]]
        if known:
            self.endpoints[known[0]] = target
            moved = self._index != known[0]
            self._index = known[0]
        else:
            self.endpoints.append(target)
            self._index, moved = len(self.endpoints) - 1, True
        return moved

    def on_not_controller(self, hint: pb.ActiveControllerHint) -> float:
        """Follow the hint at once when it names someone else; otherwise back off and rotate."""
        if hint.controller_id >= 0 and hint.host:
            moved = self.point_at((hint.controller_id, hint.host, hint.port))
            delay = self._backoff()
            # follow a fresh hint at once, but never ping-pong between stale hints without pause
            return 0.0 if moved and self._failures <= len(self.endpoints) else delay
        return self.on_unreachable()

    def _backoff(self) -> float:
        """No delay after the first failure since the last success (the controller in use has
        just gone: the next one is likely fine), then exponential."""
        self._failures += 1
        return 0.0 if self._failures == 1 else min(BACKOFF_S_MAX, BACKOFF_S_MIN * 2 ** (self._failures - 2))
