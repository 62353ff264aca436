"""API tokens: shown once, stored as a hash, scoped, expiring, revocable, tracking their last use."""
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.models import ApiToken, AuditEvent
from tests import builders

pytestmark = pytest.mark.django_db


def bearer(plaintext):
    return APIClient(HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def test_created_token_is_shown_once_and_only_its_hash_is_stored(teams):
    r = teams.clients["a_sub"].post("/api/v1/tokens/", {"name": "ci", "actions": ["read", "submit"],
                                                         "queues": ["a-train"]}, format="json")
    assert r.status_code == 201, r.data
    plaintext = r.data["token"]
    assert plaintext.startswith("gw_") and len(plaintext) > 50
    assert r.data["queues"] == ["a-train"] and r.data["actions"] == ["read", "submit"]
    default_expiry = timezone.now() + timedelta(days=90)
    assert abs((ApiToken.objects.get(pk=r.data["id"]).expires_at - default_expiry).total_seconds()) < 60
    listed = teams.clients["a_sub"].get("/api/v1/tokens/").data["results"]
    assert all("token" not in t for t in listed)
    assert plaintext not in str(listed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM scheduling_apitoken")
        rows = cursor.fetchall()
    secret = plaintext.split("_", 2)[2]
    assert not any(secret in str(value) for row in rows for value in row)
    assert bearer(plaintext).get("/api/v1/jobs/").status_code == 200


def test_revoked_token_gets_401_at_once(teams):
    r = teams.clients["a_sub"].post("/api/v1/tokens/", {"name": "ci"}, format="json")
    client = bearer(r.data["token"])
    assert client.get("/api/v1/jobs/").status_code == 200
    assert teams.clients["a_sub"].post(f"/api/v1/tokens/{r.data['id']}/revoke/").status_code == 200
    after = client.get("/api/v1/jobs/")
    assert after.status_code == 401
    assert after["WWW-Authenticate"] == 'Bearer realm="api"'
    assert AuditEvent.objects.filter(action="token.revoke", object_id=str(r.data["id"])).count() == 1


@pytest.mark.parametrize("header", ["Bearer gw_nope_nope", "Bearer", "Bearer a b", "Bearer gw_",
                                    "Bearer \u00e9t\u00e9"])
def test_malformed_or_unknown_token_is_401(teams, header):
    assert APIClient(HTTP_AUTHORIZATION=header.encode("utf-8").decode("latin-1")).get(
        "/api/v1/jobs/").status_code == 401


def test_a_token_with_the_right_lookup_but_wrong_secret_is_401(teams):
    plaintext = teams.tokens["t_sub"]
    forged = plaintext[:-4] + ("AAAA" if not plaintext.endswith("AAAA") else "BBBB")
    assert bearer(forged).get("/api/v1/jobs/").status_code == 401


def test_a_deactivated_owner_makes_the_token_401(teams):
    teams.a_sub.is_active = False
    teams.a_sub.save()
    assert bearer(teams.tokens["t_sub"]).get("/api/v1/jobs/").status_code == 401


def test_last_used_is_recorded_at_most_once_a_minute(teams):
    token = ApiToken.objects.get(lookup=teams.tokens["t_read"].split("_")[1])
    assert token.last_used_at is None
    client = bearer(teams.tokens["t_read"])
    client.get("/api/v1/jobs/")
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    client.get("/api/v1/jobs/")
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(seconds=61))
    client.get("/api/v1/jobs/")
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


@pytest.mark.parametrize("body,field", [
    ({"name": "x", "actions": ["admin"]}, "actions[0]"),
    ({"name": "x", "actions": []}, "actions"),
    ({"name": "x", "queues": ["b-train"]}, "queues[0]"),
    ({"name": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ({"name": "x", "expires_at": "2999-01-01T00:00:00Z"}, "expires_at"),
    ({"name": "x", "expires_at": "tomorrow"}, "expires_at"),
    ({"name": "x", "expires_at": "2027-02-30T00:00:00Z"}, "expires_at"),  # no such day (was a 500)
    ({"name": "x", "expires_at": "2027-01-01T00:00:00+25:00"}, "expires_at"),  # no such offset (was a 500)
    ({"name": ""}, "name"),
    ({"name": "x", "owner": 1}, "owner"),
])
def test_bad_token_requests_are_400_naming_the_field(teams, body, field):
    before = ApiToken.objects.count()
    r = teams.clients["a_sub"].post("/api/v1/tokens/", body, format="json")
    assert r.status_code == 400
    assert field in r.data
    assert ApiToken.objects.count() == before


def test_users_see_and_revoke_only_their_own_tokens(teams):
    mine = teams.clients["b_sub"].post("/api/v1/tokens/", {"name": "b-ci"}, format="json").data
    assert [t["name"] for t in teams.clients["b_sub"].get("/api/v1/tokens/").data["results"]] == ["b-ci"]
    a_token = ApiToken.objects.filter(owner=teams.a_sub).first()
    assert teams.clients["b_sub"].post(f"/api/v1/tokens/{a_token.pk}/revoke/").status_code == 404
    assert teams.clients["admin"].post(f"/api/v1/tokens/{mine['id']}/revoke/").status_code == 200


def test_a_token_can_act_only_within_its_actions(teams):
    read_only = bearer(teams.tokens["t_read"])
    assert read_only.get(f"/api/v1/jobs/{teams.a_job.pk}/").status_code == 200
    assert read_only.post(f"/api/v1/jobs/{teams.a_job.pk}/cancel/").status_code == 403
    canceller = builders.make_token(teams.a_sub, ["cancel"])
    # cancel without read: the job cannot be looked up at all
    assert bearer(canceller).post(f"/api/v1/jobs/{teams.a_job.pk}/cancel/").status_code == 404
    both = builders.make_token(teams.a_sub, ["read", "cancel"])
    assert bearer(both).post(f"/api/v1/jobs/{teams.a_job.pk}/cancel/").status_code == 202
    assert AuditEvent.objects.get(action="job.cancel").token.lookup == both.split("_")[1]


def test_deleting_the_only_queue_of_a_tokens_scope_revokes_it_instead_of_widening_it(db, admin_user):
    """An empty scope means every queue of the owner: deleting a token's only queue must not turn a token of one CI
    queue into one for all of them (it then listed another team's jobs and submitted to them)."""
    other = builders.make_queue("team-a")
    ci = builders.make_queue("team-a-ci")
    kept = builders.make_queue("team-a-nightly")
    admin = APIClient()
    admin.force_authenticate(admin_user)
    only_ci = admin.post("/api/v1/tokens/", {"name": "ci", "actions": ["read", "submit"], "queues": ["team-a-ci"]},
                         format="json")
    both = admin.post("/api/v1/tokens/", {"name": "both", "actions": ["read"],
                                          "queues": ["team-a-ci", "team-a-nightly"]}, format="json")
    assert only_ci.status_code == both.status_code == 201
    assert admin.delete(f"/api/v1/queues/{ci.name}/").status_code == 204

    assert bearer(only_ci.data["token"]).get("/api/v1/queues/").status_code == 401
    assert ApiToken.objects.get(pk=only_ci.data["id"]).revoked_at is not None
    survivor = ApiToken.objects.get(pk=both.data["id"])
    assert survivor.revoked_at is None and list(survivor.queues.values_list("name", flat=True)) == [kept.name]
    names = [q["name"] for q in bearer(both.data["token"]).get("/api/v1/queues/").data["results"]]
    assert other.name not in names


def test_deleting_a_tokens_queues_together_revokes_it_and_keeps_one_with_a_queue_left(db, admin_user):
    """The rule for several queues at once (the Django admin's bulk delete): a token whose whole scope is among the
    deleted queues is revoked; one with a queue left keeps it; an unrelated token is untouched."""
    from scheduling.services.access.tokens import revoke_scoped_only_to

    a, b, c = (builders.make_queue(name) for name in ("q-a", "q-b", "q-c"))
    owner = admin_user
    both = ApiToken.objects.get(lookup=builders.make_token(owner, ["read"], queues=[a, b]).split("_")[1])
    wider = ApiToken.objects.get(lookup=builders.make_token(owner, ["read"], queues=[a, c]).split("_")[1])
    other = ApiToken.objects.get(lookup=builders.make_token(owner, ["read"], queues=[c]).split("_")[1])
    revoke_scoped_only_to(a, b)
    assert [t.revoked_at is not None for t in ApiToken.objects.filter(pk__in=[both.pk, wider.pk, other.pk])
            .order_by("pk")] == [True, False, False]


def test_deleting_a_tokens_only_queues_in_the_django_admin_revokes_it(db, admin_user, rf):
    """The Django admin's deletes (one queue, or a selection) revoke as the API's delete does: they bypassed it."""
    from django.contrib import admin as django_admin

    from scheduling.admin import QueuePolicyAdmin
    from scheduling.models import QueuePolicy

    a, b, c = (builders.make_queue(name) for name in ("q-a", "q-b", "q-c"))
    owner = admin_user
    pair = builders.make_token(owner, ["read", "submit"], queues=[a, b])
    single = builders.make_token(owner, ["read"], queues=[c])
    model_admin = QueuePolicyAdmin(QueuePolicy, django_admin.site)
    request = rf.post("/admin/")
    request.user = admin_user
    model_admin.delete_queryset(request, QueuePolicy.objects.filter(name__in=["q-a", "q-b"]))
    model_admin.delete_model(request, c)
    assert not QueuePolicy.objects.filter(name__in=["q-a", "q-b", "q-c"]).exists()
    for plaintext in (pair, single):
        assert ApiToken.objects.get(lookup=plaintext.split("_")[1]).revoked_at is not None
        assert bearer(plaintext).get("/api/v1/queues/").status_code == 401


def test_the_tokens_are_locked_before_their_scopes_are_read(db, admin_user):
    """The lock that keeps two deletes at once from both missing a token (PostgreSQL; SQLite has one writer at a
    time and no FOR UPDATE): the scope read comes after a SELECT ... FOR UPDATE of the candidate tokens."""
    from django.test.utils import CaptureQueriesContext

    from scheduling.services.access.tokens import revoke_scoped_only_to

    if connection.vendor != "postgresql":
        pytest.skip("SELECT ... FOR UPDATE is PostgreSQL's")
    a, b = builders.make_queue("q-a"), builders.make_queue("q-b")
    builders.make_token(admin_user, ["read"], queues=[a, b])
    with CaptureQueriesContext(connection) as ctx:
        revoke_scoped_only_to(a)
    sql = [q["sql"] for q in ctx.captured_queries]
    locked = [i for i, text in enumerate(sql) if "FOR UPDATE" in text]
    assert len(locked) == 1 and '"scheduling_apitoken"' in sql[locked[0]]
    assert any("scheduling_apitoken_queues" in text for text in sql[locked[0] + 1:])  # the scopes, read after it
