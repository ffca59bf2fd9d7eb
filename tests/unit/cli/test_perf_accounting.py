"""perf consume counts exactly --num-records (a poll may return more); perf's percentiles
weigh each batch by its records."""

from types import SimpleNamespace

from cli.perf_cmd import ConsumeTally
from cli.perf_common import percentiles


def batch(records: int, length: int):
    return SimpleNamespace(header=SimpleNamespace(record_count=records, batch_length=length))


def test_a_poll_larger_than_the_target_counts_only_the_records_needed():
    tally = ConsumeTally(10_000)
    assert tally.add([batch(8_000, 800_000)]) == 8_000 and not tally.done
    assert tally.add([batch(8_000, 800_000), batch(8_000, 800_000)]) == 2_000
    assert tally.done and tally.records == 10_000 and tally.bytes == 1_000_000
    assert tally.add([batch(5, 500)]) == 0 and tally.records == 10_000


def test_percentiles_weigh_samples_by_records():
    # 98 fast batches of 10 records and 2 slow ones: p50 and p99 are fast, the tail is not
    samples = [1.0] * 98 + [50.0, 100.0]
    figures = percentiles(samples, [10] * 100)
    assert figures == {"p50": 1.0, "p99": 50.0, "p999": 100.0, "max": 100.0}
    assert percentiles([5.0, 1.0], [1, 1000])["p99"] == 1.0  # the big batch carries the records


def run_perf(capsys, command, broker, **options) -> dict:
    import argparse
    import json

    args = argparse.Namespace(bootstrap=broker.address, data_dir=None, json=True, topic="t", **options)
    assert command(args) == 0
    return json.loads(capsys.readouterr().out)


def test_perf_produce_then_consume_report_exactly_what_was_asked(capsys):
    from cli import perf_cmd
    from tests.unit.client.fake_broker import FakeBroker

    with FakeBroker({"t": 3}) as broker:
        produced = run_perf(capsys, perf_cmd.produce, broker, num_records=1_000, record_size=10, acks="1",
                            batch_records=10, compression="none", transaction_records=0)
        assert produced["records"] == 1_000 and produced["latency_samples"] == 100
        latency = produced["latency_ms"]
        assert 0 < latency["p50"] <= latency["p99"] <= latency["p999"] <= latency["max"]
        assert sum(broker.end_offsets.values()) == 1_000
        consumed = run_perf(capsys, perf_cmd.consume, broker, num_records=250, timeout_ms=10_000, isolation_level="read_uncommitted")
    assert consumed["records"] == 250  # not the 1,000 the first poll may bring


def test_a_transactional_run_reports_each_transaction_from_begin_to_answered_commit(capsys):
    import argparse
    import json

    from cli.perf_cmd import _report

    _report(argparse.Namespace(json=True), 300, 30_000, 1.0, percentiles([1.0]), 3, transactions_ms=[4.0, 5.0, 90.0])
    document = json.loads(capsys.readouterr().out)
    assert document["transactions"] == 3 and document["transaction_ms"] == {"p50": 5.0, "p99": 90.0, "p999": 90.0, "max": 90.0}
    _report(argparse.Namespace(json=False), 300, 30_000, 1.0, percentiles([1.0]), 3, transactions_ms=[4.0])
    assert "1 transactions, begin to answered commit: p50 4.0 ms" in capsys.readouterr().out
    _report(argparse.Namespace(json=True), 300, 30_000, 1.0, percentiles([1.0]), 3)
    assert "transactions" not in json.loads(capsys.readouterr().out)
