"""The web console (``kraftlog console``): an aiohttp server and a Preact page that show and
operate a cluster through its public gRPC contract only (docs/console.md).

``snapshots.py`` and ``metrics_rates.py`` are pure (admin answers in, JSON out),
``sessions.py`` holds sign-in and CSRF state, ``gateway.py`` makes the blocking client calls
as one principal, ``server.py`` is the HTTP shell, ``command.py`` the CLI entry point.
"""
