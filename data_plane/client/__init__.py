"""kraftlog's Python client: Producer, Consumer and Admin over the brokers' gRPC service.

    from data_plane.client import Producer, Consumer, Admin

See producer.py, consumer.py and admin.py for what each does and why.
"""

from data_plane.client.admin import Admin
from data_plane.client.consumer import Consumer
from data_plane.client.errors import KraftlogError
from data_plane.client.producer import Producer
from data_plane.client.records import ConsumerRecord, RecordMetadata
from data_plane.client.transactions import ProducerFencedError
from server_common.client_security import ClientSecurity

__all__ = ["Admin", "ClientSecurity", "Consumer", "ConsumerRecord", "KraftlogError", "Producer", "ProducerFencedError", "RecordMetadata"]
