"""Idempotency-Key on single and bulk submit: a retried request returns what the first one created, with the same
status code, and creates nothing; the same key with another body is a 422 naming the header; keys are per user.

Semantics: draft-ietf-httpapi-idempotency-key-header (422 for a key reused with another payload) and Stripe
(replays answer with the first request's status code and say so in `Idempotent-Replayed: true`).
"""
import pytest

from scheduling.models import AuditEvent, GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db


def bulk_body(setup, *names):
    return {"jobs": [builders.submit_body(*setup, name=n) for n in names]}


def counts():
    """(jobs, Submitted transitions, audit rows): what a replay must not add to."""
    return GangJob.objects.count(), PhaseTransition.objects.count(), AuditEvent.objects.count()


def test_a_retried_bulk_with_the_same_key_returns_the_same_jobs_with_201_and_creates_nothing(api, setup, enqueued):
    body = bulk_body(setup, "a", "b", "c")
    first = api.post("/api/v1/jobs/bulk/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert first.status_code == 201, first.data
    before = counts()
    assert before[0] == 3
    again = api.post("/api/v1/jobs/bulk/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert again.status_code == 201, again.data
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert [j["id"] for j in again.data["jobs"]] == [j["id"] for j in first.data["jobs"]]
    assert [j["name"] for j in again.data["jobs"]] == ["a", "b", "c"]
    assert again.data["count"] == 3
    assert counts() == before
    assert len(enqueued) == 1  # the replay dispatches nothing


def test_a_replayed_bulk_honours_prefer_minimal_of_the_retry(api, setup):
    body = bulk_body(setup, "m1", "m2")
    first = api.post("/api/v1/jobs/bulk/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-m")
    again = api.post("/api/v1/jobs/bulk/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-m",
                     HTTP_PREFER="return=minimal")
    assert again.status_code == 201
    assert again.data["jobs"] == [{"id": j["id"], "uid": j["uid"], "name": j["name"]} for j in first.data["jobs"]]
    assert GangJob.objects.count() == 2


def test_the_same_bulk_key_with_another_body_is_422_naming_the_header_and_creates_nothing(api, setup):
    assert api.post("/api/v1/jobs/bulk/", bulk_body(setup, "x1"), format="json",
                    HTTP_IDEMPOTENCY_KEY="batch-2").status_code == 201
    before = counts()
    r = api.post("/api/v1/jobs/bulk/", bulk_body(setup, "x1", "x2"), format="json", HTTP_IDEMPOTENCY_KEY="batch-2")
    assert r.status_code == 422
    assert list(r.data) == ["Idempotency-Key"]
    assert counts() == before


def test_a_bulk_without_a_key_is_not_deduplicated(api, setup):
    assert api.post("/api/v1/jobs/bulk/", bulk_body(setup, "n1"), format="json").status_code == 201
    GangJob.objects.update(phase="Succeeded")  # frees the name
    again = api.post("/api/v1/jobs/bulk/", bulk_body(setup, "n1"), format="json")
    assert again.status_code == 201
    assert GangJob.objects.count() == 2


def test_a_failed_bulk_stores_no_key_so_a_corrected_retry_is_created(api, setup):
    bad = bulk_body(setup, "ok", "Bad_Name")
    assert api.post("/api/v1/jobs/bulk/", bad, format="json", HTTP_IDEMPOTENCY_KEY="batch-3").status_code == 400
    good = bulk_body(setup, "ok", "fine")
    r = api.post("/api/v1/jobs/bulk/", good, format="json", HTTP_IDEMPOTENCY_KEY="batch-3")
    assert r.status_code == 201
    assert GangJob.objects.count() == 2


def test_a_key_is_one_request_whichever_endpoint_used_it_first(api, setup):
    single = builders.submit_body(*setup, name="s1")
    assert api.post("/api/v1/jobs/", single, format="json", HTTP_IDEMPOTENCY_KEY="k-shared").status_code == 201
    r = api.post("/api/v1/jobs/bulk/", {"jobs": [single]}, format="json", HTTP_IDEMPOTENCY_KEY="k-shared")
    assert (r.status_code, list(r.data)) == (422, ["Idempotency-Key"])
    assert api.post("/api/v1/jobs/bulk/", bulk_body(setup, "b1"), format="json",
                    HTTP_IDEMPOTENCY_KEY="k-bulk").status_code == 201
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="b1"), format="json", HTTP_IDEMPOTENCY_KEY="k-bulk")
    assert (r.status_code, list(r.data)) == (422, ["Idempotency-Key"])
    assert r.data["Idempotency-Key"] == ["was already used for a request to the other submit endpoint (single and "
                                         "bulk share keys)"]
    assert GangJob.objects.count() == 2


def test_bulk_keys_are_scoped_per_user(api, setup):
    template, queue, cluster = setup
    other = builders.make_user("other")
    builders.grant(queue, "submitter", user=other)
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(other)
    mine = api.post("/api/v1/jobs/bulk/", bulk_body(setup, "u1"), format="json", HTTP_IDEMPOTENCY_KEY="same")
    theirs = client.post("/api/v1/jobs/bulk/", bulk_body(setup, "u2"), format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.data["jobs"][0]["id"] != theirs.data["jobs"][0]["id"]
    assert GangJob.objects.count() == 2


def test_a_retried_single_submit_answers_with_the_first_status_code(api, setup):
    body = builders.submit_body(*setup, name="one")
    first = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-one")
    again = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-one")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true"
    assert again.data["id"] == first.data["id"]
    assert GangJob.objects.count() == 1


def test_a_bulk_key_longer_than_255_characters_is_400_naming_the_header(api, setup):
    r = api.post("/api/v1/jobs/bulk/", bulk_body(setup, "long"), format="json", HTTP_IDEMPOTENCY_KEY="k" * 256)
    assert r.status_code == 400
    assert "Idempotency-Key" in r.data
    assert GangJob.objects.count() == 0


def test_the_schema_documents_the_header_on_both_submit_endpoints(api):
    schema = api.get("/api/schema/?format=json").json()
    for path in ("/api/v1/jobs/", "/api/v1/jobs/bulk/"):
        params = {p["name"]: p for p in schema["paths"][path]["post"].get("parameters", [])}
        assert params["Idempotency-Key"]["in"] == "header", path
        assert "422" in params["Idempotency-Key"]["description"], path


@pytest.mark.parametrize("same_body", [True, False], ids=["same body", "other body"])
def test_a_key_taken_by_a_concurrent_single_submit_replays_or_is_422_never_a_name_conflict(api, setup, monkeypatch,
                                                                                           same_body):
    """Two submits with one key race: both find the key free, the other commits first. The loser's insert hits the
    key's unique constraint: it answers as a retry would (the winner's job, or 422 for another body), not with a
    409 about a name nobody uses."""
    from scheduling.services.jobs import lifecycle as job_service

    mine = builders.submit_body(*setup, name="mine")
    theirs = mine if same_body else builders.submit_body(*setup, name="theirs")
    real_load, raced = job_service.Lookups.load, []

    def load_after_the_other_commits(items):
        if not raced:
            raced.append(True)
            assert api.post("/api/v1/jobs/", theirs, format="json", HTTP_IDEMPOTENCY_KEY="race").status_code == 201
        return real_load(items)

    monkeypatch.setattr(job_service.Lookups, "load", load_after_the_other_commits)
    r = api.post("/api/v1/jobs/", mine, format="json", HTTP_IDEMPOTENCY_KEY="race")
    winner = GangJob.objects.get(idempotency_key="race")
    if same_body:
        assert (r.status_code, r["Idempotent-Replayed"], r.data["id"]) == (201, "true", winner.pk)
    else:
        assert r.status_code == 422 and list(r.data) == ["Idempotency-Key"]
    assert GangJob.objects.count() == 1


@pytest.mark.parametrize("endpoint", ["/api/v1/jobs/", "/api/v1/jobs/bulk/"])
def test_a_token_that_may_not_submit_gets_403_not_a_replay_of_its_owners_submit(setup, endpoint):
    """A replay answers 201 as a submit: only a principal who may submit gets it (a read-only token of the same
    owner gets the 403 a submit would)."""
    from rest_framework.test import APIClient

    owner = builders.make_user("owner")
    builders.grant(setup[1], "submitter", user=owner)
    body = builders.submit_body(*setup, name="r1")
    body = {"jobs": [body]} if endpoint.endswith("bulk/") else body
    password = APIClient()
    password.force_authenticate(owner)
    assert password.post(endpoint, body, format="json", HTTP_IDEMPOTENCY_KEY="k").status_code == 201
    read_only = APIClient(HTTP_AUTHORIZATION=f"Bearer {builders.make_token(owner, ['read'])}")
    r = read_only.post(endpoint, body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert r.status_code == 403
    assert "Idempotent-Replayed" not in r
    assert GangJob.objects.count() == 1


@pytest.mark.parametrize("first, second", [("/api/v1/jobs/bulk/", "/api/v1/jobs/"),
                                           ("/api/v1/jobs/", "/api/v1/jobs/bulk/")], ids=["bulk wins", "single wins"])
def test_one_key_racing_on_both_endpoints_creates_one_request_only(api, setup, monkeypatch, first, second):
    """A single and a bulk submit with one key race: both find it free, `first` commits before `second` inserts.
    One key is one request, so `second` is 422 (the key was used for another request) and creates nothing."""
    from scheduling.services.jobs import lifecycle as job_service

    def body_for(endpoint, name):
        job = builders.submit_body(*setup, name=name)
        return {"jobs": [job]} if endpoint.endswith("bulk/") else job

    real_load, raced = job_service.Lookups.load, []

    def load_after_the_other_commits(items):
        if not raced:
            raced.append(True)
            r = api.post(first, body_for(first, "winner"), format="json", HTTP_IDEMPOTENCY_KEY="both")
            assert r.status_code == 201
        return real_load(items)

    monkeypatch.setattr(job_service.Lookups, "load", load_after_the_other_commits)
    r = api.post(second, body_for(second, "loser"), format="json", HTTP_IDEMPOTENCY_KEY="both")
    assert r.status_code == 422 and list(r.data) == ["Idempotency-Key"]
    assert list(GangJob.objects.values_list("name", flat=True)) == ["winner"]


@pytest.mark.parametrize("endpoint", ["/api/v1/jobs/", "/api/v1/jobs/bulk/"])
@pytest.mark.parametrize("key, words", [("", "must not be empty"), ("   ", "must not be empty"),
                                        ("k\u00e9y", "must be printable ASCII"), ("k\tey", "must be printable ASCII")],
                         ids=["empty", "blank", "non-ASCII", "tab"])
def test_an_empty_or_unprintable_key_is_400_naming_the_header_and_creates_nothing(api, setup, endpoint, key, words):
    """A sent but empty key (e.g. `$(uuidgen)` where uuidgen is missing) would silently turn the protection off."""
    body = (bulk_body(setup, "e1") if endpoint.endswith("bulk/") else builders.submit_body(*setup, name="e1"))
    r = api.post(endpoint, body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert r.status_code == 400, r.data
    assert list(r.data) == ["Idempotency-Key"] and words in str(r.data["Idempotency-Key"][0])
    assert GangJob.objects.count() == 0


def test_a_submit_without_the_header_is_not_deduplicated(api, setup):
    body = builders.submit_body(*setup, name="nokey")
    assert api.post("/api/v1/jobs/", body, format="json").status_code == 201
    assert GangJob.objects.get(name="nokey").idempotency_key == ""
