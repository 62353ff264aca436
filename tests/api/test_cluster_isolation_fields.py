"""A cluster's shard queue and client rate limit (`work_shard`, `api_qps`, `api_burst`, issue 18): shown and changed
through the API by platform admins only (they decide which worker pool's slots a cluster's tasks hold), validated
with a 400 naming the field and nothing saved."""
import pytest

from scheduling.models import Cluster
from tests import builders

pytestmark = pytest.mark.django_db


def test_a_platform_admin_pins_a_cluster_to_a_shard_and_limits_its_requests(api):
    builders.make_cluster("east")
    changed = api.patch("/api/v1/clusters/east/", {"work_shard": 3, "api_qps": 12.5, "api_burst": 25}, format="json")
    assert changed.status_code == 200, changed.data
    assert (changed.data["work_shard"], changed.data["api_qps"], changed.data["api_burst"]) == (3, 12.5, 25)
    back = api.patch("/api/v1/clusters/east/", {"work_shard": None, "api_qps": None}, format="json")
    assert (back.data["work_shard"], back.data["api_qps"], back.data["api_burst"]) == (None, None, 25)


@pytest.mark.parametrize("body, field, words", [
    ({"work_shard": 8}, "work_shard", "must be between 0 and 7 (GANGWEB_RECONCILE_SHARDS is 8), or null"),
    ({"work_shard": -1}, "work_shard", "greater than or equal to 0"),
    ({"api_qps": 0}, "api_qps", "greater than or equal to 0.1"),
    ({"api_qps": "fast"}, "api_qps", "valid number"),
    ({"api_burst": 0}, "api_burst", "greater than or equal to 1"),
])
def test_a_bad_value_is_a_400_naming_the_field_and_nothing_is_saved(api, body, field, words):
    builders.make_cluster("east", work_shard=2)
    refused = api.patch("/api/v1/clusters/east/", body, format="json")
    assert refused.status_code == 400 and words in str(refused.data[field]), refused.data
    cluster = Cluster.objects.get(name="east")
    assert (cluster.work_shard, cluster.api_qps, cluster.api_burst) == (2, None, None)


@pytest.mark.parametrize("field, value", [("work_shard", 1), ("api_qps", 1000.0), ("api_burst", 5)])
def test_a_cluster_admin_may_not_move_or_throttle_a_cluster(api, field, value):
    cluster = builders.make_cluster("east")
    admin = builders.make_user("ops")
    builders.grant(cluster, "admin", user=admin)
    api.force_authenticate(admin)
    refused = api.patch("/api/v1/clusters/east/", {field: value}, format="json")
    assert refused.status_code == 403 and "only platform admins" in str(refused.data), refused.data
    assert getattr(Cluster.objects.get(name="east"), field) is None
    kept = api.patch("/api/v1/clusters/east/", {"description": "gpu"}, format="json")  # other fields still
    assert kept.status_code == 200


def test_only_platform_admins_see_a_clusters_shard_and_rate_limit(api):
    builders.make_cluster("east", work_shard=2, api_qps=5.0, api_burst=10)
    assert {k: api.get("/api/v1/clusters/east/").data[k] for k in ("work_shard", "api_qps", "api_burst")} == {
        "work_shard": 2, "api_qps": 5.0, "api_burst": 10}
    cluster = Cluster.objects.get(name="east")
    ops, viewer = builders.make_user("ops"), builders.make_user("vera")
    builders.grant(cluster, "admin", user=ops)
    builders.grant(cluster, "viewer", user=viewer)
    for reader in (ops, viewer):
        api.force_authenticate(reader)
        one = api.get("/api/v1/clusters/east/")
        listed = api.get("/api/v1/clusters/").data
        rows = listed["results"] if isinstance(listed, dict) else listed
        assert one.status_code == 200 and one.data["name"] == "east"
        for shown in (one.data, rows[0]):
            assert not {"work_shard", "api_qps", "api_burst"} & set(shown), (reader, shown)
        kept = api.patch("/api/v1/clusters/east/", {"description": "gpu"}, format="json")  # an admin's change
        assert reader is viewer or (kept.status_code == 200 and "work_shard" not in kept.data)
