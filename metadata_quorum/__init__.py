"""The controller: metadata records, the state machine, Raft through pysyncobj, broker lifecycle, leader and ISR decisions (docs/architecture.md)."""

import server_common  # noqa: F401  (chooses gRPC's transport before grpc loads: server_common/grpc_core.py)
