"""``python -m metadata_quorum ...`` runs one controller (see controller_main)."""

from metadata_quorum.controller_main import main

main()
