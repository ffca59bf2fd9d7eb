"""The ``kraftlog`` command (``cli/main.py``; the README lists its commands)."""

import server_common  # noqa: F401  (chooses gRPC's transport before grpc loads: server_common/grpc_core.py)
