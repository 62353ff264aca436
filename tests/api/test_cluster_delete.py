"""Deleting a cluster that jobs still use is a clear 409 that changes nothing (not a 500, no audit entry)."""
from scheduling.models import AuditEvent, Cluster


def test_deleting_a_cluster_with_jobs_is_409_and_changes_nothing(teams):
    audits = AuditEvent.objects.count()
    r = teams.clients["admin"].delete("/api/v1/clusters/local/")
    assert r.status_code == 409, getattr(r, "data", r.content)
    assert "gang jobs" in r.data["detail"][0]
    assert Cluster.objects.filter(name="local").exists()
    assert AuditEvent.objects.count() == audits  # a delete that did not happen is not in the audit log


def test_deleting_an_unused_cluster_is_204(teams):
    assert teams.clients["admin"].delete("/api/v1/clusters/spare/").status_code == 204
    assert not Cluster.objects.filter(name="spare").exists()
