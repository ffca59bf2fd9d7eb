"""Driver-side logic without a cluster or a SparkSession."""

import json

import pytest

from spark_source import offsets
from spark_source.options import OptionError, parse_sink, parse_source
from spark_source.reader import DataLossError, check_data_loss, plan_ranges
from spark_source.stream_reader import spread_limit

pytestmark = pytest.mark.spark


def test_offsets_canonical_json():
    a = offsets.encode({("b", 10): 5, ("a", 2): 1, ("b", 2): 7})
    b = offsets.encode({("b", 2): 7, ("a", 2): 1, ("b", 10): 5})
    assert json.dumps(a) == json.dumps(b) == json.dumps(a, sort_keys=True)
    assert offsets.decode(json.dumps(a)) == {("b", 10): 5, ("a", 2): 1, ("b", 2): 7}


@pytest.mark.parametrize(
    "opts,needle",
    [
        ({"subscribe": "t"}, "bootstrap"),
        ({"bootstrap": "x:1"}, "subscribe"),
        ({"bootstrap": "x:1", "subscribe": "t", "assign": '{"t":[0]}'}, "exactly one"),
        ({"bootstrap": "x:1", "assign": "[1]"}, "assign"),
        ({"bootstrap": "x:1", "subscribe": "t", "failondataloss": "maybe"}, "failOnDataLoss"),
        ({"bootstrap": "x:1", "subscribepattern": "(", "x": "1"}, "'x'"),
        ({"bootstrap": "x:1", "subscribepattern": "("}, "subscribePattern"),
        ({"bootstrap": "x:1", "subscribe": "t", "endingoffsets": "earliest"}, "endingOffsets"),
    ],
)
def test_option_errors_name_the_option(opts, needle):
    with pytest.raises(OptionError, match=needle):
        parse_source(opts, streaming=False)


def test_options_parsed():
    o = parse_source(
        {"kraftlog.bootstrap.servers": "h:1", "subscribe": "b,a", "startingoffsets": '{"a":{"0":-2,"1":5}}', "maxoffsetspertrigger": "9"},
        streaming=True,
    )
    assert o.bootstrap == "h:1" and o.subscribe == ("a", "b") and o.max_offsets_per_trigger == 9
    assert o.starting_offsets == {("a", 0): -2, ("a", 1): 5} and o.fail_on_data_loss is True
    assert parse_sink({"bootstrap": "h:1", "topic": "t"}).topic == "t"


def test_spread_limit_proportional_and_exact():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 300, ("t", 1): 100, ("t", 2): 100}
    end = spread_limit(start, latest, 100)
    assert sum(end[tp] - start[tp] for tp in start) == 100
    assert end == {("t", 0): 75, ("t", 1): 25, ("t", 2): 100}
    assert spread_limit(start, latest, 10_000) == latest
    # Tiny limits still make progress.
    assert sum(e - start[tp] for tp, e in spread_limit(start, latest, 1).items()) == 1


def test_plan_ranges_min_partitions():
    o = parse_source({"bootstrap": "h:1", "subscribe": "t", "minpartitions": "4"}, streaming=False)
    parts = plan_ranges(o, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 30, ("t", 1): 10})
    assert len(parts) == 4
    assert sum(p.end - p.start for p in parts) == 40
    assert [(p.start, p.end) for p in parts if p.partition == 0] == [(0, 10), (10, 20), (20, 30)]


def test_data_loss():
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        check_data_loss({("t", 0): 3}, {("t", 0): 10}, fail=True)
    assert check_data_loss({("t", 0): 3}, {("t", 0): 10}, fail=False) == {("t", 0): 10}
