"""Which transport gRPC's C core uses in every kraftlog process, chosen before grpc loads.

grpcio's C core reads ``GRPC_EXPERIMENTS`` once, when ``grpc`` is first imported. In grpcio 1.85
the default client and listener run on the EventEngine, which hands each read and write to
its own thread pool before gRPC's poller passes it to the Python event loop; the older
iomgr transport reads on the polling thread itself. On this machine (2 cores, loopback,
uvloop) one 100-byte message each way on an open stream costs 0.14–0.15 ms with iomgr against
0.22–0.29 ms with the EventEngine, and the client's CPU per round trip 138–143 µs against
173–190 µs (``cli/grpc_floor.py``, docs/performance.md). Every gRPC message of a replicated
write pays that, so kraftlog asks for iomgr unless the operator chose otherwise.

``choose_transport`` runs from the ``__init__`` of every kraftlog package that talks gRPC, so
it precedes the first ``import grpc`` of a kraftlog process; an application that imported
grpc before kraftlog keeps gRPC's default. Set ``GRPC_EXPERIMENTS`` yourself (even to the empty
string, which restores gRPC's defaults) and kraftlog leaves it alone. Processes a kraftlog
process starts inherit the choice through the environment.
"""

from __future__ import annotations

import os

#: The C core's experiments kraftlog turns off: the EventEngine client and listener.
IOMGR_TRANSPORT = "-event_engine_client,-event_engine_listener"


def choose_transport() -> None:
    """Ask gRPC for the iomgr transport, unless ``GRPC_EXPERIMENTS`` is already set."""
    os.environ.setdefault("GRPC_EXPERIMENTS", IOMGR_TRANSPORT)
