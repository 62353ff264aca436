"""A list's query parameters are checked, never silently ignored: `?limit=abc`, `?offset=-1`, a `cursor` no list
made, an unknown `?ordering=` field and `?phase=Bogus` are each a 400 naming the parameter and what is wrong (a
choice lists the valid values), and several bad ones are all named in one answer (api/filters.py,
api/pagination.py)."""
import pytest

from scheduling.choices import GangPhase

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url, param", [
    ("/api/v1/jobs/?limit=abc", "limit"), ("/api/v1/jobs/?limit=0", "limit"), ("/api/v1/jobs/?limit=-1", "limit"),
    ("/api/v1/jobs/?offset=x", "offset"), ("/api/v1/jobs/?offset=-5", "offset"),
    ("/api/v1/jobs/?cursor=nonsense!", "cursor"), ("/api/v1/queues/?limit=abc", "limit"),
    ("/api/v1/templates/?offset=abc", "offset"), ("/api/v1/audit/?limit=1.5", "limit"),
    ("/api/v1/jobs/?ordering=bogus", "ordering")])
def test_a_bad_page_parameter_is_a_400_naming_it(api, setup, url, param):
    response = api.get(url)
    assert response.status_code == 400, response.data
    assert list(response.data) == [param]


def test_the_messages_say_what_is_wrong(api, setup):
    data = api.get("/api/v1/jobs/?limit=abc&offset=-1&ordering=bogus,-name").data
    assert data["limit"] == ["A valid integer is required."]
    assert data["offset"] == ["Ensure this value is greater than or equal to 0."]
    assert data["ordering"] == ["unknown field 'bogus'; one of: created_at, phase_changed_at, name, phase "
                                "(a leading '-' sorts descending)"]


def test_a_bad_phase_lists_the_valid_ones(api, setup):
    response = api.get("/api/v1/jobs/?phase=Bogus")
    assert response.status_code == 400
    valid = ", ".join(["pending", *GangPhase.values])  # `pending`: Submitted, Dispatched and Queued together
    assert response.data == {"phase": [f"'Bogus' is not one of: {valid}"]}
    assert "Running" in valid and "Queued" in valid


def test_every_bad_parameter_is_named_in_one_answer(api, setup):
    response = api.get("/api/v1/jobs/?phase=Bogus&created_after=zz&limit=abc&cursor=zz&ordering=nope")
    assert response.status_code == 400
    assert sorted(response.data) == ["created_after", "cursor", "limit", "ordering", "phase"]


def test_good_and_empty_parameters_still_page(api, setup):
    assert api.get("/api/v1/jobs/?limit=&offset=").status_code == 200
    assert api.get("/api/v1/jobs/?limit=99999&phase=Running&ordering=-name").status_code == 200  # capped, as before
    assert api.get("/api/v1/queues/?limit=2&offset=0").data["results"] is not None
