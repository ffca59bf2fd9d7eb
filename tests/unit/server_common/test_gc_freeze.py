"""What survives a full collection leaves the cyclic GC's walks, and comes back to them now
and then so that old cycles are still found (gc_freeze.py)."""

from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from server_common.gc_freeze import freeze_after_full_collections


class Cycle:
    me: "Cycle"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def clock() -> Iterator[FakeClock]:
    """The policy installed for the test only; the test process's objects back to the collector afterwards."""
    fake = FakeClock()
    callback = freeze_after_full_collections(thaw_interval_s=600, clock=fake)
    yield fake
    gc.callbacks.remove(callback)
    gc.unfreeze()


def walked(obj: object) -> bool:
    """Whether a collection of some generation would walk ``obj`` (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


def a_dead_cycle() -> weakref.ref:
    cycle = Cycle()
    cycle.me = cycle
    return weakref.ref(cycle)


def test_survivors_of_a_full_collection_are_frozen_and_garbage_is_still_collected(clock: FakeClock) -> None:
    kept = {"replica": ["a", "b"]}
    young_garbage = a_dead_cycle()
    gc.collect()
    assert young_garbage() is None, "a cycle was frozen instead of collected"
    assert not walked(kept), "a survivor of a full collection is still walked by the next one"
    assert gc.get_freeze_count() > 0


def test_every_thaw_interval_a_full_collection_walks_the_old_objects_again(clock: FakeClock) -> None:
    old = Cycle()
    old.me = old
    gc.collect()  # frozen from here on
    dies_frozen = weakref.ref(old)
    del old
    clock.now = 599
    gc.collect()
    assert dies_frozen() is not None, "a frozen object is walked before the thaw interval is up"
    clock.now = 600
    gc.collect()  # thaws
    gc.collect()  # walks everything: the old cycle is garbage
    assert dies_frozen() is None, "an old object that died in a cycle is kept for ever"
