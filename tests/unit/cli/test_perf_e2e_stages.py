"""perf e2e's split of each acknowledged record's latency into stages, from the timestamps
the sending process sees (cli/perf_e2e.py `_stages`)."""

from types import SimpleNamespace

from cli.perf_common import DeliveryLog
from cli.perf_e2e import _stages

MS = 1_000_000  # ns


class AnsweredFuture:
    def __init__(self, sent_ns: int, answered_ns: int, broker_ns: int = 0) -> None:
        self.times = (sent_ns, answered_ns)
        self.broker_ns = broker_ns

    def request_times_ns(self) -> tuple[int, int]:
        return self.times

    def broker_time_ns(self) -> int:
        return self.broker_ns


def test_each_stage_is_the_time_between_two_timestamps():
    acks = DeliveryLog()
    acks.acked_seqs.extend([0, 1])
    acks.acked_at_s.extend([(10 + 7) * MS / 1e9, (20 + 9) * MS / 1e9])  # ack callbacks ran at 17 ms and 29 ms
    acks.latencies_ms.extend([7.0, 9.0])
    sends = [(10 * MS, AnsweredFuture(11 * MS, 16 * MS, 3 * MS)), (20 * MS, AnsweredFuture(24 * MS, 28 * MS, 1 * MS))]
    receipts = SimpleNamespace(seen=[1, 0], latencies_ms=[8.5, 0.0])  # record 1 never reached the consumer
    stages = _stages(sends, acks, receipts)
    assert stages["producer_wait"] == [1.0, 4.0]
    assert stages["request"] == [5.0, 4.0]
    assert stages["broker"] == [3.0, 1.0] and stages["network_and_grpc"] == [2.0, 3.0]  # the request, split by the broker's word
    assert [round(v, 6) for v in stages["callback"]] == [1.0, 1.0]
    assert stages["consumer_after_ack"] == [1.5]


def test_records_without_an_answer_are_left_out():
    """acks=0: a request has no answer to time."""
    acks = DeliveryLog()
    acks.acked_seqs.append(0)
    acks.acked_at_s.append(0.001)
    acks.latencies_ms.append(1.0)
    stages = _stages([(0, AnsweredFuture(0, 0))], acks, SimpleNamespace(seen=[1], latencies_ms=[1.0]))
    assert all(samples == [] for samples in stages.values())
