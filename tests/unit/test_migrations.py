"""The committed migrations match the models, whatever the hash seed (no migration is missing or unstable)."""
import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    out = io.StringIO()
    call_command("makemigrations", "scheduling", "--check", "--dry-run", stdout=out)  # SystemExit(1) when not
    assert "No changes detected" in out.getvalue()
