"""The public contract of kraftlog: `.proto` files (package ``kraftlog.v1``) and the Python
stubs generated from them.

Regenerate the stubs after editing a `.proto` file with::

    python -m proto

``tests/unit/test_proto_drift.py`` fails when the committed stubs no longer match the
`.proto` files.
"""
