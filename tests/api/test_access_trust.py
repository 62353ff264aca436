"""Issue 32, the access rows: lockout keyed by account and the real client address behind trusted proxies, with
recovery (row 6), and token actions gating the cluster list (row 9)."""
import base64
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests import builders

pytestmark = pytest.mark.django_db

INGRESS = "10.42.0.7"  # the ingress controller's pod: every request reaches gangweb from it


@pytest.fixture
def throttle(settings):
    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    settings.GANGWEB_TRUSTED_PROXIES = "10.42.0.0/16"
    builders.make_user("alice")  # password "pw-alice"


def basic(user, password, client_ip=None, remote=INGRESS, forwarded=None):
    """Basic auth as it arrives through the ingress: REMOTE_ADDR the ingress, X-Forwarded-For the client."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    meta = {"HTTP_AUTHORIZATION": f"Basic {token}", "REMOTE_ADDR": remote}
    if forwarded or client_ip:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded or client_ip
    return APIClient().get("/api/v1/jobs/", **meta)


def login(user, password, client_ip):
    return Client().post("/accounts/login/", {"username": user, "password": password}, REMOTE_ADDR=INGRESS,
                         HTTP_X_FORWARDED_FOR=client_ip)


def test_row6_lockout_is_by_account_and_real_client_address_behind_a_trusted_proxy(throttle):
    """Before: behind an ingress every client was the ingress's address, so an attacker's 5 wrong passwords locked
    the account for everyone. Now the lockout is the attacker's (account, address) pair only."""
    assert [basic("alice", "wrong", "203.0.113.9").status_code for _ in range(3)] == [401, 401, 429]
    assert basic("alice", "pw-alice", "203.0.113.9").status_code == 429  # the attacker's address is locked out
    assert basic("alice", "pw-alice", "198.51.100.4").status_code == 200  # alice, from her own address, is not
    assert login("alice", "pw-alice", "198.51.100.4").status_code == 302
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.9"}


def test_row6_x_forwarded_for_is_never_believed_from_an_untrusted_peer(throttle, settings):
    # A client that talks to gangweb directly cannot pick the address it is locked out as.
    for spoofed in ("1.1.1.1", "2.2.2.2", "3.3.3.3"):
        basic("alice", "wrong", remote="192.0.2.50", forwarded=spoofed)
    assert basic("alice", "pw-alice", remote="192.0.2.50", forwarded="4.4.4.4").status_code == 429
    # Through the ingress, what the client itself prepended to X-Forwarded-For is skipped: the ingress appended
    # the address it saw, and that is the nearest untrusted hop.
    for _ in range(3):
        basic("alice", "wrong", forwarded="5.5.5.5, 203.0.113.10")
    assert basic("alice", "pw-alice", forwarded="6.6.6.6, 203.0.113.10").status_code == 429
    # With no trusted proxies (the default), X-Forwarded-For is ignored altogether.
    settings.GANGWEB_TRUSTED_PROXIES = ""
    assert basic("alice", "pw-alice", remote="192.0.2.51", forwarded="192.0.2.50").status_code == 200
    assert basic("alice", "pw-alice", remote="192.0.2.50", forwarded="192.0.2.51").status_code == 429


def test_row6_a_locked_out_user_recovers_after_the_cool_off_or_an_admin_reset(throttle):
    for _ in range(3):
        basic("alice", "wrong", "203.0.113.9")
    assert basic("alice", "pw-alice", "203.0.113.9").status_code == 429
    call_command("axes_reset_username", "alice")  # the platform admin's reset (or /admin/ → Access attempts)
    assert basic("alice", "pw-alice", "203.0.113.9").status_code == 200
    for _ in range(3):
        basic("alice", "wrong", "203.0.113.9")
    assert basic("alice", "pw-alice", "203.0.113.9").status_code == 429
    # The cool-off: the failures are older than AXES_COOLOFF_TIME (moved back in time rather than waited for).
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert basic("alice", "pw-alice", "203.0.113.9").status_code == 200


# --- row 9 ---------------------------------------------------------------------------------------------------------

def test_row9_a_submit_only_token_lists_no_clusters_yet_still_submits(teams):
    plaintext = builders.make_token(teams.a_sub, ["submit"], [teams.a_train])
    submit_only = APIClient(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    listed = submit_only.get("/api/v1/clusters/")
    assert listed.status_code == 200 and listed.json()["results"] == [], listed.content
    assert submit_only.get("/api/v1/clusters/local/").status_code == 404
    for field in ("health", "server_version", "served_apis"):
        assert field not in listed.content.decode()
    # The same token still submits to the cluster its queue targets (naming a cluster needs no `read`).
    body = builders.submit_body(teams.llm, teams.a_train, teams.local, name="by-submit-token", namespace="team-a")
    submitted = submit_only.post("/api/v1/jobs/", body, format="json")
    assert submitted.status_code == 201, submitted.content
    # A token with `read` still lists the clusters of its queues.
    assert [c["name"] for c in teams.clients["t_sub"].get("/api/v1/clusters/").json()["results"]] == ["local"]
