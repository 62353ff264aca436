"""Fixtures for the CLI tests: a live gangweb server (gunicorn on the committed test database) and a token."""
import sys
from pathlib import Path

import pytest

# This checkout's client package first, for the tests that import it (as support.cli_env does for the console
# script): an editable install in a shared venv may point at another checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "src"))

from tests import builders
from tests.cli import support


@pytest.fixture(scope="module")
def server(tmp_path_factory, django_db_setup, django_db_blocker):
    """A running gunicorn for the test module, on the test database (each test's rows are flushed after it)."""
    srv = support.Server(tmp_path_factory.mktemp("gunicorn"))
    yield srv
    srv.stop()


@pytest.fixture
def own_server(tmp_path, transactional_db):
    """A gunicorn of this test's own, for a test that kills it."""
    srv = support.Server(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture
def cli_world(transactional_db, django_user_model):
    """Admin `ci-admin` (password pw-ci-admin), cluster `local` (no credentials), queue team-a, template llm and
    an API token of the admin with read, submit and cancel."""
    admin = django_user_model.objects.create_superuser("ci-admin", "ci@example.com", "pw-ci-admin")
    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("llm")
    token = builders.make_token(admin, ["read", "submit", "cancel"])
    return type("CliWorld", (), {"admin": admin, "cluster": cluster, "queue": queue, "template": template,
                                 "token": token, "setup": (template, queue, cluster)})
