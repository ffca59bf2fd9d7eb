"""``python -m data_plane.broker``: run one broker (same as ``kraftlog broker``)."""

from data_plane.broker.server import main

main()
