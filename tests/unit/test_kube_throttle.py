"""The client-side rate limit of one cluster's API server (client-go's QPS/Burst as a token bucket): a burst is
served at once, the next request waits for a token, a request that cannot get one in time is a transient error
naming the cluster and its limits, and each cluster has its own bucket, following its own settings."""
import time
from types import SimpleNamespace

import pytest

from scheduling.kube import throttle
from scheduling.kube.errors import TransientKubeError


def cluster(pk=1, name="a", api_qps=None, api_burst=None):
    return SimpleNamespace(pk=pk, name=name, api_qps=api_qps, api_burst=api_burst)


@pytest.fixture(autouse=True)
def fresh_buckets():
    throttle.forget()
    yield
    throttle.forget()


@pytest.mark.parametrize("qps, burst, settings_qps, settings_burst, expected", [
    (None, None, 50.0, 100, throttle.Limits(50.0, 100)),  # the install's default
    (5.0, 10, 50.0, 100, throttle.Limits(5.0, 10)),  # client-go's defaults, set on the cluster
    (0.5, None, 50.0, 100, throttle.Limits(0.5, 100)),  # fractional QPS
    (None, None, -1.0, 0, throttle.Limits(0.1, 1)),  # bad settings: the slowest rate, one at a time
])
def test_a_cluster_uses_its_own_limits_else_the_installs(settings, qps, burst, settings_qps, settings_burst,
                                                         expected):
    settings.GANGWEB_CLUSTER_QPS, settings.GANGWEB_CLUSTER_BURST = settings_qps, settings_burst
    assert throttle.limits_for(cluster(api_qps=qps, api_burst=burst)) == expected


def test_a_burst_is_served_at_once_and_the_next_request_waits_for_a_token():
    bucket = throttle.Bucket(throttle.Limits(qps=1.0, burst=5))
    started = time.monotonic()
    for _ in range(5):
        bucket.take("a", max_wait=0)
    assert time.monotonic() - started < 0.5
    with pytest.raises(TransientKubeError) as refused:
        bucket.take("a", max_wait=0)
    assert refused.value.reason == "ClientThrottled"
    assert "cluster a: no request slot within 0 s (client limit 1 QPS, burst 5)" in str(refused.value)


def test_tokens_come_back_at_the_configured_rate():
    bucket = throttle.Bucket(throttle.Limits(qps=20.0, burst=1))
    bucket.take("a", max_wait=0)
    started = time.monotonic()
    for _ in range(4):
        bucket.take("a", max_wait=5)
    waited = time.monotonic() - started
    assert 0.15 <= waited < 2.0  # 4 tokens at 20/s: 0.2 s (a loaded machine only makes it longer)


def test_every_request_of_a_client_takes_a_token_of_its_clusters_bucket(settings, monkeypatch):
    sent = []
    api = SimpleNamespace(rest_client=SimpleNamespace(request=lambda method, url, **kw: sent.append(url) or "ok"))
    throttle.limit(api, cluster(api_qps=0.1, api_burst=2))
    monkeypatch.setattr(throttle, "MAX_WAIT", 0.0)
    assert api.rest_client.request("GET", "/api") == "ok"
    assert api.rest_client.request("GET", "/apis") == "ok"
    with pytest.raises(TransientKubeError, match="ClientThrottled|no request slot"):
        api.rest_client.request("GET", "/api/v1/pods")
    assert sent == ["/api", "/apis"]  # the refused request was never sent


def test_each_cluster_has_its_own_bucket_and_a_changed_limit_gets_a_fresh_one():
    a, b = cluster(1, "a", 1.0, 1), cluster(2, "b", 1.0, 1)
    throttle.bucket_for(a).take("a", max_wait=0)
    throttle.bucket_for(b).take("b", max_wait=0)  # a's empty bucket does not hold b back
    assert throttle.bucket_for(a) is throttle.bucket_for(a)
    a.api_burst = 3
    throttle.bucket_for(a).take("a", max_wait=0)  # rebuilt full with the new burst


def test_threads_sharing_a_bucket_all_get_their_tokens_within_the_wait():
    # 8 threads x 40 takes at 100 QPS (burst 20): ~3 s of tokens, each take allowed 20 s. pyrate-limiter's own
    # blocking wait gave up early under such contention (7 of 414 takes in one run); the polled wait never does.
    import threading

    bucket = throttle.Bucket(throttle.Limits(qps=100, burst=20))
    failures = []

    def worker():
        for _ in range(40):
            try:
                bucket.take("local", max_wait=20)
            except Exception as exc:  # noqa: BLE001 - counted, the assertion says which
                failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_the_process_counts_how_long_its_requests_waited_for_a_token():
    bucket = throttle.Bucket(throttle.Limits(qps=20.0, burst=2))
    seconds_before, takes_before = throttle.waited()
    bucket.take("a", max_wait=0)
    bucket.take("a", max_wait=0)  # the burst: no wait counted
    assert throttle.waited() == (seconds_before, takes_before)
    bucket.take("a", max_wait=5)  # the third waits ~50 ms for a token
    bucket.take("a", max_wait=5)
    seconds, takes = throttle.waited()
    assert takes - takes_before == 2
    assert 0.05 <= seconds - seconds_before < 2.0  # 2 tokens at 20/s: ~0.1 s (longer on a loaded machine)
