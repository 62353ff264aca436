"""Issue 33 item 6: "everything waiting" is one choice: `?phase=pending` is Submitted + Dispatched + Queued, in the
API (and so the CLI's `--phase pending`) and the jobs page, through the one FilterSet they share."""
import pytest

from scheduling.choices import GangPhase
from tests import builders

pytestmark = pytest.mark.django_db

PHASES = [GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED, GangPhase.RUNNING, GangPhase.SUCCEEDED]


@pytest.fixture
def one_of_each(setup, admin_user):
    template, queue, cluster = setup
    return {p: builders.make_job(template, queue, cluster, name=f"j-{p.lower()}", phase=p,
                                user=admin_user) for p in PHASES}


def names(data) -> set[str]:
    return {j["name"] for j in data["results"]}


def test_phase_pending_lists_the_three_waiting_phases(api, one_of_each):
    r = api.get("/api/v1/jobs/?phase=pending&queue=team-a")
    assert r.status_code == 200, r.data
    assert names(r.data) == {"j-submitted", "j-dispatched", "j-queued"}
    both = api.get("/api/v1/jobs/?phase=pending&phase=Running")
    assert names(both.data) == {"j-submitted", "j-dispatched", "j-queued", "j-running"}


def test_a_bad_phase_names_pending_among_the_valid_ones(api):
    r = api.get("/api/v1/jobs/?phase=waiting")
    assert r.status_code == 400
    assert str(r.data["phase"][0]).startswith("'waiting' is not one of: pending, Submitted, Dispatched, Queued")


def test_the_jobs_page_offers_and_applies_pending(client, admin_user, one_of_each):
    client.force_login(admin_user)
    html = client.get("/jobs/?phase=pending").content.decode()
    assert '<option value="pending" selected>pending (Submitted, Dispatched, Queued)</option>' in html
    assert "j-dispatched" in html and "j-running" not in html
