"""The broker (storage, replication, request handling) and the client library that speaks to it (docs/architecture.md)."""

import server_common  # noqa: F401  (chooses gRPC's transport before grpc loads: server_common/grpc_core.py)
