"""What every kraftlog process and tool shares, below the packages that use it.

Logging setup (``logging_setup``), waiting for a condition with a deadline (``waiting``),
starting and stopping a local cluster of processes (``local_cluster``), the limits both
sides of a connection must agree on (``limits``) and the gRPC channel pool
(``channel_pool``). It imports nothing of kraftlog but the generated ``proto`` modules, so
the broker, the controller, the CLI and the chaos harness can all import it without
importing each other (docs/architecture.md, Layers).

Importing it chooses gRPC's transport before grpc loads (``grpc_core``).
"""

from server_common.grpc_core import choose_transport

choose_transport()
