"""gangweb/broker.py: kombu's Redis transport publishing through one redis-py client per channel, against a real
redis-server; and the settings that select it for redis:// broker URLs only."""
import base64
import json
import os
import subprocess
import sys

import redis
from kombu import Connection, Exchange, Producer, Queue

from gangweb import broker


def test_messages_published_on_a_channel_share_one_client_and_all_arrive(redis_url, monkeypatch):
    built = []
    original = broker.Channel._create_client
    monkeypatch.setattr(broker.Channel, "_create_client",
                        lambda self, asynchronous=False: built.append(asynchronous) or original(self, asynchronous))
    queue = Queue("gangweb-test-broker", Exchange("gangweb-test-broker", type="direct"), "gangweb-test-broker")
    with Connection(redis_url, transport="gangweb.broker:Transport") as conn:
        channel = conn.default_channel
        assert isinstance(channel, broker.Channel)
        producer = Producer(channel)
        for i in range(5):
            producer.publish({"n": i}, exchange=queue.exchange, routing_key=queue.routing_key, declare=[queue],
                             serializer="json")
        # kombu's own Channel builds a synchronous client per message (5, plus one for the declare)
        assert built.count(False) == 1
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
        channel._disconnect_pools()  # what kombu does on close and on connection errors
        with channel.conn_or_acquire() as third:
            assert third is not first and third.connection_pool is channel.pool
    messages = redis.Redis.from_url(redis_url).lrange("gangweb-test-broker", 0, -1)
    bodies = [json.loads(base64.b64decode(json.loads(m)["body"])) for m in messages]  # kombu sends bodies base64
    assert sorted(bodies, key=lambda b: b["n"]) == [{"n": i} for i in range(5)]


def _broker_transport(redis_url_value: str) -> str:
    env = {**os.environ, "REDIS_URL": redis_url_value, "GANGWEB_TESTING": "1"}
    code = "import gangweb.settings as s; print(getattr(s, 'CELERY_BROKER_TRANSPORT', None))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_settings_select_the_shared_client_transport_for_redis_urls_only():
    assert _broker_transport("redis://127.0.0.1:6379/0") == "gangweb.broker:Transport"
    assert _broker_transport("rediss://127.0.0.1:6380/0") == "None"  # TLS and others: kombu's own transport
