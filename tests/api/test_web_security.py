"""Web security: headers and Content-Security-Policy, session login with CSRF, production cookie settings,
submit throttling per token and per user, and the dashboard showing only what the user may see."""
import os
import subprocess
import sys

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests import builders

pytestmark = pytest.mark.django_db


def test_pages_and_api_carry_security_headers_and_a_strict_csp(teams, client):
    for response in (client.get("/accounts/login/"), teams.clients["a_sub"].get("/api/v1/jobs/")):
        csp = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
        assert csp["script-src"] == "'self'"
        assert csp["default-src"] == "'self'"
        assert csp["frame-ancestors"] == "'none'"
        assert csp["object-src"] == "'none'"
        assert "unsafe-inline" not in response["Content-Security-Policy"]
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_session_login_works_and_a_post_without_csrf_token_is_refused(teams):
    browser = APIClient(enforce_csrf_checks=True)
    login = browser.get("/accounts/login/")
    assert "csrfmiddlewaretoken" in login.content.decode()
    csrf = login.cookies["csrftoken"].value
    r = browser.post("/accounts/login/", {"username": "a_sub", "password": "pw-a_sub", "csrfmiddlewaretoken": csrf})
    assert r.status_code == 302
    assert browser.get("/api/v1/jobs/").status_code == 200
    body = {"name": "x", "namespace": "team-a", "template": "llm", "queue": "a-train", "cluster": "local"}
    no_token = browser.post("/api/v1/jobs/", body, format="json")
    assert no_token.status_code == 403
    assert "CSRF" in str(no_token.data)
    with_token = browser.post("/api/v1/jobs/", body, format="json", HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value)
    assert with_token.status_code == 201, with_token.data


def test_the_dashboard_needs_a_login_and_counts_only_visible_jobs(teams, client):
    assert client.get("/").status_code == 302
    client.force_login(teams.b_sub)
    phases = {p["phase"]: p["n"] for p in client.get("/").context["phases"]}
    assert phases["Submitted"] == 1  # b-job only; a-job is team-a's


def test_production_settings_mark_cookies_secure_and_send_hsts():
    env = {**os.environ, "SECURE_COOKIES": "1", "SECRET_KEY": "x" * 50, "GANGWEB_TESTING": "0", "DEBUG": "0",
           "GANGWEB_ENCRYPTION_KEYS": "k", "DJANGO_SETTINGS_MODULE": "gangweb.settings"}
    code = ("from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_HTTPONLY, s.GANGWEB_SUBMIT_RATE_PER_USER)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "31536000", "True", "300/minute"]


def test_production_refuses_to_start_without_encryption_keys():
    env = {k: v for k, v in os.environ.items() if k != "GANGWEB_ENCRYPTION_KEYS"}
    env.update({"SECRET_KEY": "x" * 50, "GANGWEB_TESTING": "0", "DEBUG": "0"})
    out = subprocess.run([sys.executable, "-c", "import gangweb.settings"], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "GANGWEB_ENCRYPTION_KEYS" in out.stderr


@pytest.fixture
def throttled(settings):
    settings.GANGWEB_SUBMIT_RATE_PER_TOKEN = "3/minute"
    settings.GANGWEB_SUBMIT_RATE_PER_USER = "6/minute"
    cache.clear()
    yield
    cache.clear()


def submit(client, name):
    body = {"name": name, "namespace": "team-a", "template": "llm", "queue": "a-train", "cluster": "local"}
    return client.post("/api/v1/jobs/", body, format="json").status_code


def test_submits_are_throttled_per_token_then_per_user(teams, throttled):
    token_1 = APIClient(HTTP_AUTHORIZATION=f"Bearer {teams.tokens['t_sub']}")
    token_2 = APIClient(HTTP_AUTHORIZATION=f"Bearer {builders.make_token(teams.a_sub, ['submit'])}")
    assert [submit(token_1, f"t1-{i}") for i in range(4)] == [201, 201, 201, 429]
    # Another token of the same user has its own budget, until the user's 6 per minute are spent (a request
    # refused by the token's limit still counts against the user's: 4 so far).
    assert [submit(token_2, f"t2-{i}") for i in range(3)] == [201, 201, 429]
    assert submit(teams.clients["a_sub"], "session") == 429
    assert submit(teams.clients["a_admin"], "other-user") == 201
    assert teams.clients["a_sub"].get("/api/v1/jobs/").status_code == 200  # reads are not throttled


@pytest.mark.parametrize("value,status", [
    ("3751-07-18T12:51:09-17:07", 200),  # an offset PostgreSQL refuses as is
    ("9999-12-31T23:59:59-17:00", 400),  # past year 9999 once in UTC
])
def test_date_filters_accept_any_iso_offset_without_a_5xx(teams, value, status):
    from urllib.parse import quote

    for url in (f"/api/v1/jobs/?created_after={quote(value)}", f"/api/v1/audit/?before={quote(value)}"):
        assert teams.clients["admin"].get(url).status_code == status


@pytest.mark.parametrize("url", ["/api/v1/queues/a%00b/", "/api/v1/templates/%00/", "/api/v1/clusters/x%00/",
                                 "/api/v1/jobs/?q=%00", "/api/v1/jobs/99999999999999999999999/"])
def test_nul_and_out_of_range_values_in_urls_are_4xx(teams, url):
    assert 400 <= teams.clients["admin"].get(url).status_code < 500


@pytest.mark.parametrize("query", ["limit=1163262391444292012867584", "offset=99999999999999999999999999"])
def test_huge_pagination_is_not_a_5xx(teams, query):
    for path in ("/api/v1/jobs/", "/api/v1/tokens/", "/api/v1/queues/", "/api/v1/audit/"):
        assert teams.clients["admin"].get(f"{path}?{query}").status_code == 200  # capped (api/pagination.py)


def test_negative_pagination_is_a_400_naming_both(teams):
    """Was silently the default page (a new user's pass): a 400 naming `limit` and `offset`."""
    for path in ("/api/v1/jobs/", "/api/v1/tokens/", "/api/v1/queues/", "/api/v1/audit/"):
        response = teams.clients["admin"].get(f"{path}?limit=-5&offset=-7")
        assert (response.status_code, sorted(response.data)) == (400, ["limit", "offset"]), path
