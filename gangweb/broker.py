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

Selected by ``CELERY_BROKER_TRANSPORT = "gangweb.broker:Transport"`` for ``redis://`` broker URLs
(gangweb/settings.py); kombu still parses the URL for host, port, database and password.
"""
from __future__ import annotations

from contextlib import contextmanager

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    """kombu's Redis channel whose ``conn_or_acquire()`` reuses one synchronous client (see the module docstring)."""

    _shared_client = None

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
