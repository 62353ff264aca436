"""A parent queue's line spans queues (and clusters) a reader may have no role on: it shows their jobs' places but
never their names, queues or clusters, and a `?cluster=` the reader cannot see reads as missing."""
import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def vera(admin_user, enqueued, queue_syncs):
    shared = builders.make_cluster("shared")
    secret = builders.make_cluster("secret-gpu-farm")
    research = builders.make_queue("research", clusters=[shared, secret])
    mine = builders.make_queue("mine", parent=research, clusters=[shared])
    hush = builders.make_queue("project-hush", parent=research, clusters=[secret])
    template = builders.make_template("base", backend="kai")
    builders.make_job(template, mine, shared, name="my-job", user=admin_user)
    builders.make_job(template, hush, secret, name="hush-job", user=admin_user)
    user = builders.make_user("vera")
    builders.grant(mine, "submitter", user=user)
    api = APIClient()
    api.force_authenticate(user)
    assert api.get("/api/v1/queues/project-hush/").status_code == 404
    assert api.get("/api/v1/clusters/secret-gpu-farm/").status_code == 404
    return api


def test_the_parent_line_names_neither_the_queue_nor_the_cluster_of_a_hidden_job(vera):
    rows = vera.get("/api/v1/queues/research/line/").data["jobs"]
    assert [(r["name"], r["queue_name"], r["cluster"]) for r in rows] == [
        ("my-job", "mine", "shared"), ("(hidden)", "(hidden)", "(hidden)")]
    assert rows[1]["queue_id"] is None and rows[1]["cluster_id"] is None and rows[1]["id"] is None


def test_the_parent_queue_page_names_neither(vera):
    page = Client()
    assert page.login(username="vera", password="pw-vera")
    body = page.get("/queues/research/").content.decode()
    assert "my-job" in body
    assert "project-hush" not in body and "secret-gpu-farm" not in body and "hush-job" not in body


@pytest.mark.parametrize("path", ["/api/v1/queues/mine/line/", "/api/v1/queues/mine/fair-share/",
                                  "/api/v1/queues/tree/"])
def test_a_hidden_cluster_reads_as_missing(vera, path):
    hidden = vera.get(f"{path}?cluster=secret-gpu-farm")
    missing = vera.get(f"{path}?cluster=no-such-cluster")
    assert (hidden.status_code, missing.status_code) == (400, 400)
    assert hidden.data["cluster"] == ["no cluster named 'secret-gpu-farm'"]
    assert vera.get(f"{path}?cluster=shared").status_code == 200
