"""The audit log: every change through the services leaves one event naming who (and which token) did what."""
import pytest

from scheduling.models import AuditEvent
from tests import builders

pytestmark = pytest.mark.django_db


def actions():
    return [(e.actor_name, e.action, e.object_name) for e in AuditEvent.objects.order_by("id")]


def test_each_change_writes_one_event_with_actor_action_and_object(teams):
    AuditEvent.objects.all().delete()
    admin, a_admin, a_sub = teams.clients["admin"], teams.clients["a_admin"], teams.clients["a_sub"]
    steps = [
        (a_sub.post("/api/v1/jobs/", {"name": "j1", "namespace": "team-a", "template": "llm", "queue": "a-train",
                                      "cluster": "local"}, format="json"), 201),
        (a_sub.post("/api/v1/jobs/bulk/", {"jobs": [{"name": f"b{i}", "namespace": "team-a", "template": "llm",
                                                     "queue": "a-train", "cluster": "local"} for i in range(2)]},
                    format="json"), 201),
        (a_sub.patch(f"/api/v1/jobs/{teams.a_job.pk}/", {"priority_class_name": "high"}, format="json"), 200),
        (a_sub.post(f"/api/v1/jobs/{teams.a_job.pk}/cancel/"), 202),
        (a_admin.post("/api/v1/templates/", {"name": "t1", "queue": "team-a", "spec": builders.template_spec()},
                      format="json"), 201),
        (a_admin.put("/api/v1/templates/t1/", {"spec": builders.template_spec(overridable=[])}, format="json"), 200),
        (a_admin.put("/api/v1/templates/t1/", {"description": "tuned"}, format="json"), 200),
        (a_admin.post("/api/v1/queues/", {"name": "a-new", "parent": "team-a"}, format="json"), 201),
        (a_admin.patch("/api/v1/queues/a-new/", {"gpu_quota": 2}, format="json"), 200),
        (a_admin.delete("/api/v1/queues/a-new/"), 204),
        (admin.post("/api/v1/clusters/", {"name": "c2", "kubeconfig": builders.kubeconfig("sekrit")},
                    format="json"), 201),
        (admin.patch("/api/v1/clusters/c2/", {"kubeconfig": builders.kubeconfig("sekrit2")}, format="json"), 200),
        (admin.delete("/api/v1/clusters/c2/"), 204),
        (a_sub.post("/api/v1/tokens/", {"name": "ci"}, format="json"), 201),
    ]
    assert [r.status_code for r, _ in steps] == [code for _, code in steps]
    assert actions() == [
        ("a_sub", "job.submit", "team-a/j1"),
        ("a_sub", "job.submit", "team-a/b0"), ("a_sub", "job.submit", "team-a/b1"),
        ("a_sub", "job.update", "team-a/a-job"),
        ("a_sub", "job.cancel", "team-a/a-job"),
        ("a_admin", "template.create", "t1"),
        ("a_admin", "template.version", "t1"),
        ("a_admin", "template.update", "t1"),
        ("a_admin", "queue.create", "a-new"),
        ("a_admin", "queue.update", "a-new"),
        ("a_admin", "queue.delete", "a-new"),
        ("admin", "cluster.create", "c2"),
        ("admin", "cluster.update", "c2"),
        ("admin", "cluster.delete", "c2"),
        ("a_sub", "token.create", f"ci (gw_{steps[-1][0].data['display'][3:]})"),
    ]
    update = AuditEvent.objects.get(action="queue.update")
    assert update.details == {"gpu_quota": 2.0}
    assert AuditEvent.objects.get(action="cluster.update").details == {"kubeconfig": "(changed)"}
    log = admin.get("/api/v1/audit/?object_type=job&limit=100")
    assert log.status_code == 200
    assert [e["action"] for e in log.data["results"]] == ["job.cancel", "job.update"] + ["job.submit"] * 3
    assert "sekrit" not in admin.get("/api/v1/audit/?limit=100").content.decode()


def test_a_token_submission_records_the_token(teams):
    r = teams.clients["t_sub"].post("/api/v1/jobs/", {"name": "via-token", "namespace": "team-a", "template": "llm",
                                                      "queue": "a-train", "cluster": "local"}, format="json")
    assert r.status_code == 201
    event = teams.clients["admin"].get("/api/v1/audit/?action=job.submit&limit=1").data["results"][0]
    assert event["actor_name"] == "a_sub"
    assert event["token"] == "gw_" + teams.tokens["t_sub"].split("_")[1] + "_…"


def test_the_log_is_append_only(teams):
    with pytest.raises(TypeError):
        AuditEvent.objects.update(action="x")
    event = AuditEvent.objects.first()
    with pytest.raises(TypeError):
        event.save()
