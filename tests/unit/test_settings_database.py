"""gangweb/settings.py, PostgreSQL: server-side binding with psycopg's prepared statements by default (Django alone
would prepare nothing), off with DATABASE_PREPARED_STATEMENTS=0 (PgBouncer in transaction mode); SQLite untouched."""
import json
import os
import subprocess
import sys

import pytest


def _database_options(**env) -> dict:
    code = "import json, gangweb.settings as s; print(json.dumps(s.DATABASES['default'].get('OPTIONS', {})))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "GANGWEB_TESTING": "1", **env},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("env,expected", [
    ({"DATABASE_URL": "postgres://u:p@db:5432/gangweb"}, {"server_side_binding": True, "prepare_threshold": 5}),
    ({"DATABASE_URL": "postgres://u:p@db:5432/gangweb", "DATABASE_PREPARED_STATEMENTS": "0"}, {}),
])
def test_postgresql_prepares_repeated_statements_unless_turned_off(env, expected):
    assert _database_options(**env) == expected


def test_sqlite_gets_no_postgresql_options():
    options = _database_options(DATABASE_URL="sqlite:////tmp/gangweb-settings-test.sqlite3")
    assert "server_side_binding" not in options and "prepare_threshold" not in options
