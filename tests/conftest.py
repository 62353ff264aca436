"""Shared fixtures: users, API clients, and a recorder in place of the Celery broker for non-cluster tests."""
import pytest
from rest_framework.test import APIClient


@pytest.fixture
def enqueued(monkeypatch):
    """Record reconcile tasks instead of sending them to a broker: a list of job-id lists."""
    from types import SimpleNamespace

    from scheduling import tasks
    from scheduling.services import dispatch

    calls = []
    # Test transactions never commit, so run on-commit hooks at once.
    monkeypatch.setattr(dispatch, "transaction", SimpleNamespace(on_commit=lambda fn, using=None: fn()))
    monkeypatch.setattr(tasks.reconcile_job, "delay", lambda job_id: calls.append([job_id]))
    monkeypatch.setattr(tasks.reconcile_jobs, "delay", lambda ids: calls.append(list(ids)))
    return calls


@pytest.fixture
def admin_user(db, django_user_model):
    """A platform admin (superuser)."""
    return django_user_model.objects.create_superuser("admin", "admin@example.com", "pw-admin-123")


@pytest.fixture
def api(admin_user, enqueued):
    """An API client logged in as the platform admin."""
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.fixture
def setup(db):
    """A template, a leaf queue and a cluster that a submit can name."""
    from tests import builders

    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("llm")
    return template, queue, cluster


@pytest.fixture
def queue_syncs(monkeypatch):
    """Record queue sync tasks instead of sending them: ("reconcile_queue", policy_id) / ("sync_queues", id)."""
    from types import SimpleNamespace

    from scheduling import tasks
    from scheduling.services import dispatch

    calls = []
    monkeypatch.setattr(dispatch, "transaction", SimpleNamespace(on_commit=lambda fn, using=None: fn()))
    monkeypatch.setattr(tasks.reconcile_queue, "delay", lambda pid, extra=None: calls.append(("reconcile_queue", pid)))
    monkeypatch.setattr(tasks.sync_queues, "delay", lambda cid=None: calls.append(("sync_queues", cid)))
    return calls
