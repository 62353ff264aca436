"""`make run` ends its start-up with the URL and the login (runstack.banner), and Celery's INFO start-up lines no
longer bury them: workers and beat run `--quiet` at WARNING (LOG_LEVEL overrides), as does the cluster watcher
(a new user's pass)."""
import pytest

from scheduling.management.commands import runstack


@pytest.fixture
def state_dir(settings, tmp_path):
    settings.STATE_DIR = tmp_path
    return tmp_path


def test_celery_runs_quiet_at_warning_unless_log_level_says_otherwise(monkeypatch):
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    argvs = runstack.process_argvs(8000)
    for name in ("worker", "webhooks", "beat"):
        assert "--quiet" in argvs[name] and "--loglevel=WARNING" in argvs[name], argvs[name]
        assert not any(a == "--loglevel=INFO" for a in argvs[name])
    assert runstack.quiet_env()["LOG_LEVEL"] == "WARNING"  # the cluster watcher's Django logging too
    monkeypatch.setenv("LOG_LEVEL", "INFO")
    assert "--loglevel=INFO" in runstack.process_argvs(8000)["worker"]
    assert runstack.quiet_env()["LOG_LEVEL"] == "INFO"


def test_the_banner_names_the_url_the_user_and_the_password(state_dir, monkeypatch):
    monkeypatch.delenv("GANGWEB_ADMIN_USER", raising=False)
    (state_dir / "admin-password").write_text("s3cret-pw\n")
    text = runstack.banner(8001)
    assert "http://127.0.0.1:8001/" in text
    assert f"Log in as user 'admin', password 's3cret-pw' (kept in {state_dir / 'admin-password'})." in text


def test_without_a_password_file_the_banner_says_where_the_password_came_from(state_dir, monkeypatch):
    monkeypatch.setenv("GANGWEB_ADMIN_USER", "root")
    assert "Log in as user 'root' with the password you set (GANGWEB_ADMIN_PASSWORD)." in runstack.banner(8000)


def test_the_processes_output_goes_to_the_run_log_so_the_banner_stays_last(state_dir):
    """Each process writes into <state dir>/run.log (stdout and stderr); the banner says where."""
    import sys

    with open(runstack.run_log_path(), "ab", buffering=0) as log:
        proc = runstack._start("web", [sys.executable, "-c", "import sys; print('GET / 200'); "
                                                              "sys.stderr.write('a library warning\\n')"], {}, log)
        proc.wait(timeout=60)
    assert runstack.run_log_path() == state_dir / "run.log"
    assert (state_dir / "run.log").read_text().splitlines() == ["GET / 200", "a library warning"]
    text = runstack.banner(8000, runstack.run_log_path())
    assert f"all output (the access log included) goes to {state_dir / 'run.log'} (tail -f it)." in text
    assert text.rstrip().endswith("=" * 72)


def test_under_debug_loopback_webhooks_are_allowed_like_cluster_addresses():
    """settings.py under DEBUG=1 (what `make run` sets) outside tests: loopback receivers are allowed by default."""
    import os
    import subprocess
    import sys

    dropped = ("GANGWEB_TESTING", "GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES", "GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(DEBUG="1", DJANGO_SETTINGS_MODULE="gangweb.settings")
    code = ("from django.conf import settings; print(settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES, '|', "
            "settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "127.0.0.0/8,::1/128 | 127.0.0.0/8,::1/128", out.stderr[-2000:]
