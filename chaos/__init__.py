"""Fault injection and history checking for kraftlog (``kraftlog chaos``; docs/chaos.md).

``runner`` runs a ``scenarios`` entry: a ``chaos_cluster`` behind Toxiproxy (``network``),
the ``workload`` recording a ``history``, the ``nemesis`` carrying out a seeded
``schedule``, then the ``checker`` and the ``report``.
"""

import server_common  # noqa: F401  (chooses gRPC's transport before grpc loads: server_common/grpc_core.py)
