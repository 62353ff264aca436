"""`manage.py migrate` (what `make run` runs first) passes Django's system checks without a warning."""
import pytest
from django.core import checks


@pytest.mark.django_db
def test_the_system_checks_that_migrate_runs_warn_of_nothing():
    # What BaseCommand.check prints: every message of the checks run with the database, less the silenced ones.
    messages = [m for m in checks.run_checks(databases=["default"]) if not m.is_silenced()]
    assert [f"{m.id}: {m.obj}: {m.msg}" for m in messages] == []
