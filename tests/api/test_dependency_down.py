"""Redis down (the submit throttle's counters): the API answers 503 JSON with Retry-After, creates nothing, and
the pipeline's retry with the same Idempotency-Key succeeds once Redis is back (scheduling/unavailable.py).

A redis-server of this test's own is stopped and started again on the same port. PostgreSQL down is covered by
tests/faults/ (a private PostgreSQL stopped under gunicorn), since this process's test database cannot stop.
"""
import shutil
import socket
import subprocess
import time

import pytest
from django.core.cache import cache

from localcluster.processes import free_port
from scheduling.models import GangJob
from tests import builders

pytestmark = pytest.mark.django_db


class RedisServer:
    """redis-server on a fixed port of this test, without persistence; stop() and start() at will."""

    def __init__(self, workdir):
        self.port, self.workdir, self.proc = free_port(), workdir, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path, settings):
    """A private Redis as the default cache (where the submit throttle counts), with submit limits on."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; make test does it)")
    server = RedisServer(tmp_path)
    server.start()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url,
                                   "KEY_PREFIX": "gangweb-test"}}
    settings.GANGWEB_SUBMIT_RATE_PER_USER = "1000/minute"
    yield server
    if server.proc.poll() is None:
        server.stop()


def test_redis_down_answers_503_json_with_retry_after_and_the_same_key_succeeds_once_it_is_back(
        api, setup, redis_server):
    assert api.post("/api/v1/jobs/", builders.submit_body(*setup), format="json").status_code == 201
    redis_server.stop()
    body = builders.submit_body(*setup, name="pipeline-step")

    down = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="step-7")

    assert (down.status_code, down["Retry-After"], down["Content-Type"]) == (503, "5", "application/json")
    assert down.json()["dependency"] == "redis"
    assert down.json()["detail"].startswith("Redis (cache and rate limits) is unavailable; nothing was changed.")
    assert GangJob.objects.filter(name="pipeline-step").count() == 0

    redis_server.start()
    again = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="step-7")
    replay = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="step-7")

    assert (again.status_code, replay.status_code) == (201, 201)
    assert replay.json()["uid"] == again.json()["uid"]
    assert GangJob.objects.filter(name="pipeline-step").count() == 1
    cache.clear()
