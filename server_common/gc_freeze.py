"""Keep Python's cyclic garbage collector off the objects a server holds for good.

A broker hosting 50,000 replicas holds millions of long-lived objects (its partitions, logs,
segments, fetch sessions, the metadata image). CPython starts a full (generation-2)
collection whenever the objects promoted since the last one reach a quarter of those that
survived it, and a full collection walks every tracked object: measured in the
50,000-partition benchmark, each broker ran 16 to 18 of them while its replicas were created
and their ISRs filled, 0.5 to 3.8 s each and 15 to 21 s in all, every one a stall of the
event loop (heartbeats, fetches, produces). Freezing once, after a metadata batch, was not
enough: what the fetchers and sessions build afterwards stayed in generation 2, and a small
frozen-out generation 2 made full collections come more often (100 in the same run).

So what survives a full collection moves to the permanent generation (`gc.freeze`), which
collections skip: each full collection walks only what was promoted since the one before,
and each long-lived object is walked about once instead of at every full collection.
Frozen objects are still freed by reference counting when dropped; what freezing gives up is
finding garbage *cycles* among them. So that a broker whose old objects die in cycles
(deleted topics, closed streams) does not keep them for ever, every THAW_INTERVAL_S the
frozen objects go back to generation 2 for one full collection, which is then as long as
before the change (seconds at 50,000 replicas, once in that interval instead of every few
seconds while replicas are created).
"""

from __future__ import annotations

import gc
import time
from typing import Callable

THAW_INTERVAL_S = 600.0  # how often one full collection walks everything again, for old cycles


def freeze_after_full_collections(thaw_interval_s: float = THAW_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> Callable[[str, dict], None]:
    """Install (in `gc.callbacks`) and return the callback that freezes what each full
    collection leaves, and thaws everything every ``thaw_interval_s``. Once per process, at
    start."""
    last_thaw = clock()

    def after_collection(phase: str, info: dict) -> None:
        nonlocal last_thaw
        if phase != "stop" or info["generation"] != 2:
            return
        if clock() - last_thaw >= thaw_interval_s:
            last_thaw = clock()
            gc.unfreeze()  # the next full collection walks everything once, cycles among the old included
        else:
            gc.freeze()

    gc.callbacks.append(after_collection)
    return after_collection
