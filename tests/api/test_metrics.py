"""/metrics exposes jobs by phase and queue from the database, the histograms, and honours its optional token."""
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from scheduling.choices import ReconcileOutcome
from scheduling.models import GangJob, ReconcileAttempt
from tests import builders

pytestmark = pytest.mark.django_db


def scrape(client=None, **headers) -> dict:
    r = (client or Client()).get("/metrics", **headers)
    assert r.status_code == 200, r.content
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.content.decode()) for s in family.samples}


def test_a_scrape_makes_one_query_whatever_the_number_of_jobs(api, setup, django_assert_num_queries):
    for name in ("q1", "q2", "q3"):
        api.post("/api/v1/jobs/", builders.submit_body(*setup, name=name), format="json")
    with django_assert_num_queries(1):
        assert Client().get("/metrics").status_code == 200


def test_jobs_are_counted_by_phase_and_queue(api, setup):
    for name in ("a", "b"):
        api.post("/api/v1/jobs/", builders.submit_body(*setup, name=name), format="json")
    GangJob.objects.filter(name="b").update(phase="Queued")
    samples = scrape()
    assert samples[("gangweb_jobs", (("phase", "Submitted"), ("queue", "team-a")))] == 1
    assert samples[("gangweb_jobs", (("phase", "Queued"), ("queue", "team-a")))] == 1


def test_a_reconcile_attempt_row_feeds_the_reconcile_histogram_and_error_counter(api, setup):
    job_id = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="r"), format="json").data["id"]
    GangJob.objects.filter(pk=job_id).update(backend_plugin="k8s-workload-v1alpha2")
    labels = (("backend", "k8s-workload-v1alpha2"), ("cluster", "local"))
    before = scrape().get(("gangweb_reconcile_duration_seconds_count", labels), 0)
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_JOB, job_id=job_id, cluster=setup[2], duration_ms=250,
                                    outcome=ReconcileOutcome.TRANSIENT_ERROR, reason="ClusterUnreachable")
    samples = scrape()
    assert samples[("gangweb_reconcile_duration_seconds_count", labels)] == before + 1
    assert samples[("gangweb_reconcile_errors_total", (*labels, ("reason", "ClusterUnreachable")))] >= 1


def test_a_configured_token_is_required(settings):
    settings.GANGWEB_METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert "gangweb_jobs" in Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").content.decode()


def test_events_of_a_job_whose_cluster_cannot_be_asked_are_a_502_naming_it(api, setup):
    job_id = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="ev"), format="json").data["id"]
    r = api.get(f"/api/v1/jobs/{job_id}/events/")
    assert r.status_code == 502
    assert r.data["cluster"] == "local" and r.data["events"] == [] and r.data["error"]


def test_without_a_token_metrics_are_closed_unless_the_install_opts_out(settings, api, setup):
    # Every tenant's queue names and job counts are in the series (issue 15, L6).
    api.post("/api/v1/jobs/", builders.submit_body(*setup, name="m"), format="json")
    settings.GANGWEB_METRICS_TOKEN = ""
    settings.GANGWEB_METRICS_PUBLIC = False
    r = Client().get("/metrics")
    assert r.status_code == 401
    assert r["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert "team-a" not in r.content.decode() and "GANGWEB_METRICS_PUBLIC" in r.content.decode()
    settings.GANGWEB_METRICS_PUBLIC = True
    assert ("gangweb_jobs", (("phase", "Submitted"), ("queue", "team-a"))) in scrape()
    # A token, once set, is required even on an install that opted out.
    settings.GANGWEB_METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 401


def test_metrics_are_closed_by_default_outside_tests_and_make_run_opts_out():
    import os
    import pathlib
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("GANGWEB_TESTING", "GANGWEB_METRICS_PUBLIC")}
    env.update(DEBUG="1")
    code = "from django.conf import settings; print(settings.GANGWEB_METRICS_PUBLIC)"
    out = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], env=dict(
        env, DJANGO_SETTINGS_MODULE="gangweb.settings"), capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    makefile = (pathlib.Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert "GANGWEB_METRICS_PUBLIC=$${GANGWEB_METRICS_PUBLIC:-1} $(PYTHON) manage.py runstack" in makefile
