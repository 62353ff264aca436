"""Fixtures of the dashboard tests: a logged-in browser-less client and jobs in chosen phases."""
import pytest


@pytest.fixture
def ui(client, admin_user, enqueued, queue_syncs):
    """A Django test client logged in as the platform admin (reconcile tasks recorded, not sent)."""
    client.force_login(admin_user)
    return client
