"""Submit rate limits (scheduling/api/throttling.py): n submits per period per user or token, over a sliding
window, with the same answers whether the counters live in Redis (one Lua round trip) or in the local-memory cache
(DRF's own history list): the (n+1)-th submit inside the period is a 429 whose Retry-After counts the seconds
until the oldest counted submit leaves the window; refused submits are not counted."""
import pytest
import redis
from django.core.cache import cache
from rest_framework.test import APIClient

from scheduling.api.throttling import SlidingWindowThrottle
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["redis", "locmem"])
def counters(request, settings):
    """Where the throttle counts: "redis" (Django's Redis cache on a real redis-server) or "locmem"."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        redis.Redis.from_url(url).flushdb()
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                                       "KEY_PREFIX": "gangweb-test"}}
    cache.clear()
    yield request.param
    cache.clear()


@pytest.fixture
def clock(monkeypatch):
    """The throttles' clock (DRF's `timer`, Unix seconds), set by the test: clock.now = ..."""
    class Clock:
        now = 1_800_000_000.0

    fake = Clock()
    monkeypatch.setattr(SlidingWindowThrottle, "timer", lambda self: fake.now)
    return fake


def _submits(client, setup, clock, at: list[float]) -> list[str]:
    """Submit once at each offset (seconds) of `at`; "201", or "429 retry <Retry-After>" per submit."""
    start, answers = clock.now, []
    for offset in at:
        clock.now = start + offset
        response = client.post("/api/v1/jobs/", builders.submit_body(*setup), format="json")
        answers.append(str(response.status_code) if response.status_code != 429
                       else f"429 retry {response['Retry-After']}")
    return answers


def test_n_submits_per_period_per_user_over_a_sliding_window(api, setup, settings, counters, clock):
    settings.GANGWEB_SUBMIT_RATE_PER_USER = "3/minute"
    settings.GANGWEB_SUBMIT_RATE_PER_TOKEN = None
    answers = _submits(api, setup, clock, at=[0, 0, 30, 45, 60, 61, 61, 62, 90.5])
    assert answers == [
        "201", "201", "201",
        "429 retry 15",  # the 4th inside the minute; the first two leave the window at 60 s
        "201",  # 60 s after the first two: they no longer count (DRF drops times <= now - period)
        "201",
        "429 retry 29",  # counted: 30, 60, 61; the one at 30 leaves at 90 (the refused one at 45 never counted)
        "429 retry 28",
        "201",  # 30 has left
    ]
    if counters == "redis":  # one sorted set per user, holding the counted submits' times (60, 61, 90.5)
        keys = redis.Redis.from_url(settings.CACHES["default"]["LOCATION"]).keys("*submit-user*")
        assert len(keys) == 1
        assert redis.Redis.from_url(settings.CACHES["default"]["LOCATION"]).zcard(keys[0]) == 3


def test_a_token_has_its_own_limit_and_counts_against_its_users(teams, settings, counters, clock):
    settings.GANGWEB_SUBMIT_RATE_PER_TOKEN = "3/minute"
    settings.GANGWEB_SUBMIT_RATE_PER_USER = "6/minute"
    token_1 = APIClient(HTTP_AUTHORIZATION=f"Bearer {teams.tokens['t_sub']}")
    token_2 = APIClient(HTTP_AUTHORIZATION=f"Bearer {builders.make_token(teams.a_sub, ['submit'])}")
    body = {"namespace": "team-a", "template": "llm", "queue": "a-train", "cluster": "local"}

    def submit(client, name):
        return client.post("/api/v1/jobs/", {**body, "name": name}, format="json").status_code

    assert [submit(token_1, f"t1-{i}") for i in range(4)] == [201, 201, 201, 429]
    # The refused 4th still counted against the user (DRF asks every throttle): 4 of the user's 6 are spent.
    assert [submit(token_2, f"t2-{i}") for i in range(3)] == [201, 201, 429]
    assert submit(teams.clients["a_sub"], "session") == 429
    assert submit(teams.clients["a_admin"], "other-user") == 201
    clock.now += 60
    assert submit(token_1, "t1-next-minute") == 201
