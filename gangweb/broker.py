"""kombu's Redis transport, publishing through one redis-py client per channel instead of one per message.

Why: kombu 5.7.0 (the newest release, pinned through ``celery[redis]``) publishes every message with
``Channel._put`` -> ``with self.conn_or_acquire() as client: client.lpush(...)``, and ``conn_or_acquire()`` without a
client argument returns ``self._create_client()``: a new ``redis.Redis(connection_pool=self.pool)`` each time. The
connection is pooled, but the client object is not, and redis-py 8's ``Redis.__init__`` copies its ~170 response
callbacks into a fresh case-insensitive dict: ~0.2 ms of CPU per message, a sixth of what enqueueing a job's
reconcile costs the web process (bench/README.md, "Single submit"). No kombu or Celery setting changes this path.

Here ``conn_or_acquire()`` hands out one client per channel, built the same way (``_create_client()``: the
channel's pool and credential provider) and rebuilt whenever the channel's pool changes (kombu drops the pool on
close and on connection errors, ``Channel._disconnect_pools``). A redis-py client over a connection pool is safe to
share between threads: each command borrows a connection from the pool and returns it. Everything else is kombu's
own transport, unchanged.

It also makes a channel whose connection is gone fail with a connection error instead of an AttributeError, the
cause of a worker that stopped consuming for good after a Redis kill -9 (issue 16). On a connection loss Celery 5.7
(``Consumer.on_connection_error_after_connected``) calls ``Connection.collect()`` and then ``Connection.close()``.
``collect()`` closes the channels through ``Transport.close_connection``, which stops at the first channel whose
``close()`` raises (the pidbox channel deleting its fanout queue on a dead Redis raises ``ConnectionError``; the
task channel's own close raises too while a BRPOP is in flight, before it marks itself closed), so the task
channel is left open; then it detaches the transport (``transport.client = None``). ``close()`` then closes the
task channel again: it restores its unacknowledged messages through a new pool, ``Channel._connparams`` reads
``self.connection.client.hostname`` and raises ``AttributeError``, which is not among the transport's connection
errors, so it escapes ``ignore_errors``, the worker logs "Unrecoverable error" and stops; acks of tasks that finish
afterwards raise the same from the hub. kombu's own transport does the same (``conn_or_acquire`` ->
``_create_client`` -> ``pool`` -> ``_connparams``; reproduced by tests/faults/test_broker_recovery.py with both).
Here ``_connparams`` raises ``redis.exceptions.ConnectionError`` instead: the close and the acks fail as connection
errors, which Celery logs and recovers from (it reconnects on a new connection; a message left unacknowledged in
Redis comes back after the visibility timeout, and the resync takes over its work sooner).

Selected by ``CELERY_BROKER_TRANSPORT = "gangweb.broker:Transport"`` for ``redis://`` broker URLs
(gangweb/settings.py); kombu still parses the URL for host, port, database and password.
"""
from __future__ import annotations

from contextlib import contextmanager

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    """kombu's Redis channel whose ``conn_or_acquire()`` reuses one synchronous client, and which fails with a
    connection error once its connection was closed (see the module docstring)."""

    _shared_client = None

    def _connparams(self, asynchronous=False):
        """kombu's connection parameters of a new pool (a dict for ``redis.ConnectionPool``).

        Raises ``redis.exceptions.ConnectionError`` when the channel's transport was detached from its
        ``kombu.Connection`` (``Connection.collect()``/``close()`` set ``transport.client`` to None): there is no
        broker address left to connect to, and a connection error is what every caller recovers from."""
        transport = self.connection
        if transport is None or transport.client is None:
            raise RedisConnectionError("the broker connection of this channel was closed")
        return super()._connparams(asynchronous=asynchronous)

    @contextmanager
    def conn_or_acquire(self, client=None):
        """Yield `client` if given, else this channel's shared synchronous redis-py client (built on first use,
        and again after kombu replaced the channel's connection pool)."""
        if client:
            yield client
            return
        shared = self._shared_client
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._shared_client = self._create_client()
        yield shared


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel` (one publishing client per channel)."""

    Channel = Channel
