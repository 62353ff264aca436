"""Login and Basic auth are throttled per username and IP address (django-axes; issue 15, L7).

Off under testing (settings.AXES_ENABLED); these tests turn it on. After AXES_FAILURE_LIMIT failed passwords
for one username from one address, that pair gets 429 (the form) or 429 with Retry-After (Basic auth), even with
the right password, until the cool-off ends; another username, or the same from another address, is unaffected.
A successful form login clears the pair's count (a Basic-auth request does not: its failures age out).
"""
import base64
from datetime import timedelta

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def throttle(settings):
    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    builders.make_user("alice")  # password "pw-alice"
    builders.make_user("bob")


def basic(user, password, ip="10.0.0.1"):
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return APIClient().get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Basic {token}", REMOTE_ADDR=ip)


def login(user, password, ip="10.0.0.1"):
    return Client().post("/accounts/login/", {"username": user, "password": password}, REMOTE_ADDR=ip)


def test_basic_auth_is_locked_out_per_username_and_ip_after_failed_passwords(throttle):
    # The failure that reaches the limit is already answered 429.
    assert [basic("alice", "wrong").status_code for _ in range(3)] == [401, 401, 429]
    r = basic("alice", "pw-alice")
    assert r.status_code == 429, r.data
    assert r["Retry-After"] == "900"
    assert basic("bob", "pw-bob").status_code == 200  # another username from the same address
    assert basic("alice", "pw-alice", ip="10.0.0.2").status_code == 200  # the same username from elsewhere


def test_the_login_form_is_locked_out_per_username_and_ip_after_failed_passwords(throttle):
    assert [login("alice", "wrong").status_code for _ in range(2)] == [200, 200]  # the form again, with an error
    assert login("alice", "wrong").status_code == 429
    assert login("alice", "pw-alice").status_code == 429
    assert login("bob", "pw-bob").status_code == 302
    assert login("alice", "pw-alice", ip="10.0.0.2").status_code == 302


def test_a_successful_form_login_clears_the_count(throttle):
    assert [basic("alice", "wrong").status_code for _ in range(2)] == [401, 401]
    assert login("alice", "pw-alice").status_code == 302
    assert [basic("alice", "wrong").status_code for _ in range(2)] == [401, 401]
    assert basic("alice", "pw-alice").status_code == 200
