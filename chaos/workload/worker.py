"""What every workload thread shares: a name (its process in the history), where the cluster
is, the settings, the history it records into and the event that stops it."""

from __future__ import annotations

import threading

from chaos.history import History
from chaos.workload.settings import WorkloadSettings


class Worker(threading.Thread):
    """A daemon thread recording into ``history`` until ``stopping`` is set."""

    def __init__(self, name: str, bootstrap: str, settings: WorkloadSettings, history: History) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.settings = settings
        self.history = history
        self.stopping = threading.Event()
