"""Which clusters a user or an API token sees follows the clusters their queues take jobs on.

A leaf queue that names no clusters takes jobs on every cluster (`Lookups.takes`, the queue sync), so a role on it shows
every cluster: the cluster list, the cluster page, and a submit naming one all agree. Before this, a token whose
queue named no clusters saw no cluster at all and its submits were refused with "no cluster named 'local'".
"""
import pytest
from rest_framework.test import APIClient

from tests import builders

pytestmark = pytest.mark.django_db


def bearer(plaintext):
    return APIClient(HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def password(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def world(db, enqueued, queue_syncs):
    """Clusters local and spare; queue `anywhere` names none (every cluster), queue `pinned` names local only."""
    local, spare = builders.make_cluster("local"), builders.make_cluster("spare")
    anywhere = builders.make_queue("anywhere")
    pinned = builders.make_queue("pinned", clusters=[local])
    template = builders.make_template("llm")
    return {"local": local, "spare": spare, "anywhere": anywhere, "pinned": pinned, "template": template}


def listed(client):
    r = client.get("/api/v1/clusters/")
    assert r.status_code == 200, r.data
    return sorted(c["name"] for c in r.data["results"])


def principal(kind, user, queues=()):
    if kind == "token":
        return bearer(builders.make_token(user, ["read", "submit"], queues=queues))
    return password(user)


@pytest.mark.parametrize("kind", ["token", "password"])
def test_a_role_on_a_queue_that_names_no_clusters_shows_every_cluster_and_submits_to_one(world, kind):
    user = builders.make_user("sub")
    builders.grant(world["anywhere"], "submitter", user=user)
    client = principal(kind, user)
    assert listed(client) == ["local", "spare"]
    assert client.get("/api/v1/clusters/spare/").status_code == 200
    body = builders.submit_body(world["template"], world["anywhere"], world["local"], name="j1")
    r = client.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 201, r.data
    assert r.data["cluster"] == "local"


def test_a_token_scoped_to_a_queue_that_names_no_clusters_sees_every_cluster(world):
    user = builders.make_user("sub")
    builders.grant(world["anywhere"], "submitter", user=user)
    builders.grant(world["pinned"], "submitter", user=user)
    client = principal("token", user, queues=[world["anywhere"]])
    assert listed(client) == ["local", "spare"]
    r = client.post("/api/v1/jobs/", builders.submit_body(world["template"], world["anywhere"], world["spare"],
                                                          name="j2"), format="json")
    assert r.status_code == 201, r.data


@pytest.mark.parametrize("kind", ["token", "password"])
def test_a_role_only_on_a_queue_that_names_a_cluster_shows_only_that_cluster(world, kind):
    user = builders.make_user("pin")
    builders.grant(world["pinned"], "submitter", user=user)
    client = principal(kind, user)
    assert listed(client) == ["local"]
    assert client.get("/api/v1/clusters/spare/").status_code == 404
    r = client.post("/api/v1/jobs/", builders.submit_body(world["template"], world["pinned"], world["spare"],
                                                          name="j3"), format="json")
    assert r.status_code == 400 and r.data == {"cluster": ["no cluster named 'spare'"]}, r.data


def test_a_token_scoped_to_the_pinned_queue_does_not_see_what_its_owners_other_queue_shows(world):
    user = builders.make_user("both")
    builders.grant(world["anywhere"], "submitter", user=user)
    builders.grant(world["pinned"], "submitter", user=user)
    assert listed(principal("token", user, queues=[world["pinned"]])) == ["local"]


def test_a_platform_admins_token_submits_to_a_queue_that_names_no_clusters(world):
    admin = builders.make_user("root", is_superuser=True, is_staff=True)
    client = bearer(builders.make_token(admin, ["read", "submit"]))
    assert listed(client) == ["local", "spare"]
    r = client.post("/api/v1/jobs/", builders.submit_body(world["template"], world["anywhere"], world["spare"],
                                                          name="j4"), format="json")
    assert r.status_code == 201, r.data


def test_no_role_shows_no_cluster(world):
    client = principal("token", builders.make_user("nobody"))
    assert listed(client) == []


def test_a_parent_queue_that_names_no_clusters_shows_only_its_childrens_clusters(world):
    """A parent takes no jobs: naming no cluster does not make every cluster visible to its viewers."""
    team = builders.make_queue("team")
    builders.make_queue("team-leaf", parent=team, clusters=[world["local"]])
    user = builders.make_user("viewer")
    builders.grant(team, "viewer", user=user)
    for kind in ("token", "password"):
        assert listed(principal(kind, user)) == ["local"]
