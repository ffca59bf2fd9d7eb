"""The Python stubs generated from kraftlog's public contract, the `.proto` files in ``proto/``
(package ``kraftlog.v1``).

The stubs live here, not beside the `.proto` files, so that installing kraftlog claims no
import name another package owns (``proto`` is proto-plus's, which every Google Cloud
client library depends on). Regenerate them after editing a `.proto` file with::

    python -m kraftlog_proto

``tests/unit/test_proto_drift.py`` fails when the committed stubs no longer match the
`.proto` files.
"""
