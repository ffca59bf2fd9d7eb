"""The name of a wire error code, for logs and messages.

A peer on a newer version may send a code this one does not know; naming it must never
raise (a log line that crashes its caller turns a refusal into an outage), so unknown
values stay visible as numbers."""

from __future__ import annotations

from kraftlog_proto import common_pb2


def error_code_name(code: int) -> str:
    """The ErrorCode enum name for a wire value; ``ERROR_CODE_<n>`` for a value this version
    does not know."""
    try:
        return common_pb2.ErrorCode.Name(code)
    except ValueError:
        return f"ERROR_CODE_{code}"
