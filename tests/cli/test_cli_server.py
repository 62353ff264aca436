"""The installed `gangweb` console script against a live gangweb server (gunicorn on the test database): login,
submit, input errors, timeouts, a server that dies mid-wait, a submit retried after a dropped connection, and waits
on jobs that already finished. The runs that need jobs to really run are in tests/cluster/test_cli_jobs.py."""
import json
import os
import stat
import time

import pytest
import yaml

from scheduling.choices import GangPhase
from scheduling.models import GangJob
from tests import builders
from tests.cli import support

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(server, cli_world, tmp_path):
    return support.cli_env(server.url, cli_world.token, tmp_path)


def _body(world, **extra):
    return {**builders.submit_body(*world.setup), **extra}


def test_login_creates_a_token_stored_readable_only_by_the_user_and_later_commands_use_it(server, cli_world,
                                                                                         tmp_path):
    env = support.cli_env(server.url, None, tmp_path, GANGWEB_PASSWORD="pw-ci-admin")
    r = support.run_cli(["login", "--username", "ci-admin", "--name", "ci", "--action", "read", "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["name"] == "ci" and shown["actions"] == ["read"] and "gw_" not in shown["token"]
    path = tmp_path / "config.yaml"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    stored = yaml.safe_load(path.read_text())
    assert stored["current"] == "default" and stored["profiles"]["default"]["url"] == server.url
    assert stored["profiles"]["default"]["token"].startswith("gw_")

    builders.make_job(*cli_world.setup, user=cli_world.admin, name="seen")
    env.pop("GANGWEB_URL")  # from the profile from now on
    r = support.run_cli(["ls", "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    assert [job["name"] for job in json.loads(r.stdout)] == ["seen"]
    r = support.run_cli(["submit", "--name", "x", "--template", "llm", "--queue", "team-a", "--cluster", "local"], env)
    assert r.returncode == 4  # a read-only token: the server's 403 names the field
    assert "queue: submitting to queue 'team-a' needs an API token with the 'submit' action" in r.stderr


def test_a_wrong_password_exits_4_with_the_servers_message(server, cli_world, tmp_path):
    env = support.cli_env(server.url, None, tmp_path, GANGWEB_PASSWORD="wrong")
    r = support.run_cli(["login", "--username", "ci-admin"], env)
    assert r.returncode == 4 and "401" in r.stderr
    assert not (tmp_path / "config.yaml").exists()


def test_a_submit_the_server_refuses_exits_4_and_prints_the_field(env, cli_world):
    r = support.run_cli(["submit", "--name", "bad", "--template", "llm", "--queue", "nope", "--cluster", "local"], env)
    assert r.returncode == 4
    assert "400" in r.stderr and "queue: no queue named 'nope'" in r.stderr
    assert not GangJob.objects.exists()


def test_a_bulk_file_with_one_bad_job_exits_4_naming_the_item_and_creates_nothing(env, cli_world, tmp_path):
    jobs = [_body(cli_world, name="ok-1"), _body(cli_world, name="Bad_Name")]
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(jobs))
    r = support.run_cli(["submit", "-f", str(tmp_path / "jobs.yaml")], env)
    assert r.returncode == 4
    assert "jobs[1].name" in r.stderr
    assert not GangJob.objects.exists()


def test_a_file_of_three_jobs_is_one_bulk_submit_and_prints_the_apis_jobs(env, cli_world, tmp_path):
    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": [_body(cli_world, name=f"b-{i}") for i in range(3)]}))
    r = support.run_cli(["submit", "-f", str(tmp_path / "jobs.json"), "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert [j["name"] for j in printed] == ["b-0", "b-1", "b-2"]
    assert GangJob.objects.count() == 3
    r = support.run_cli(["get", str(printed[0]["id"]), "-o", "yaml"], env)
    assert yaml.safe_load(r.stdout)["timeline"][0]["phase"] == "Submitted"


def test_bad_input_never_reaches_the_server_and_exits_4(env, tmp_path):
    (tmp_path / "broken.yaml").write_text("name: [unclosed")
    for args, words in [(["submit", "-f", str(tmp_path / "broken.yaml")], "not valid YAML or JSON"),
                        (["submit", "-f", str(tmp_path / "missing.yaml")], "No such file"),
                        (["submit", "--overrides", "{nope"], "--overrides: not JSON"),
                        (["wait"], "Missing argument"),
                        (["wait", "abc"], "is not a valid integer"),
                        (["ls", "-o", "xml"], "'xml' is not one of")]:
        r = support.run_cli(args, env)
        assert r.returncode == 4, (args, r.stdout, r.stderr)
        assert words in r.stderr, (args, r.stderr)
    r = support.run_cli(["ls"], {**env, "GANGWEB_TOKEN": ""})
    assert r.returncode == 4 and "no API token" in r.stderr


def test_wait_times_out_with_3_on_a_job_nothing_reconciles(env, cli_world):
    job = builders.make_job(*cli_world.setup, user=cli_world.admin, name="stuck")
    started = time.monotonic()
    r = support.run_cli(["wait", str(job.pk), "--timeout", "2", "-o", "json"], env)
    took = time.monotonic() - started
    assert r.returncode == 3, r.stderr
    assert 2 <= took < 15, took
    assert json.loads(r.stdout)[0]["phase"] == "Submitted"
    assert "timeout: 1 of 1 jobs not finished after 2 s" in r.stderr
    assert f"job {job.pk} stuck: Submitted" in r.stderr


@pytest.mark.parametrize(("phases", "code"), [
    (["Succeeded"], 0), (["Failed"], 1), (["Cancelled"], 2), (["Succeeded", "Failed", "Cancelled"], 1),
    (["Succeeded", "Cancelled"], 2)])
def test_a_wait_on_jobs_already_finished_exits_at_once_with_their_result(env, cli_world, phases, code):
    ids = [str(builders.make_job(*cli_world.setup, user=cli_world.admin, phase=p).pk) for p in phases]
    # With --timeout 20 a waiter that did not end on the first answer would long-poll until its timeout and exit
    # 3: the exit code proves it ended at once, without a wall-clock bound (it was < 10 s and failed under load).
    r = support.run_cli(["wait", *ids, "--timeout", "20"], env)
    assert r.returncode == code, r.stderr
    printed = support.phases_printed(r.stderr)
    assert printed[int(ids[0])] == ["Submitted", "Dispatched", "Queued", "Scheduled", "Running", phases[0]]
    assert len(printed) == len(ids)


def test_waiting_on_a_job_the_token_cannot_see_exits_4_as_not_found(env, cli_world, django_user_model):
    other = django_user_model.objects.create_user("other", password="x")
    hidden_queue = builders.make_queue("hidden", clusters=[cli_world.cluster])
    job = builders.make_job(cli_world.template, hidden_queue, cli_world.cluster, user=cli_world.admin)
    env["GANGWEB_TOKEN"] = builders.make_token(other, ["read"])
    r = support.run_cli(["wait", str(job.pk)], env)
    assert r.returncode == 4
    assert f"ids: no job {job.pk} that you can see" in r.stderr


def test_the_server_dying_mid_wait_exits_5_after_the_retries(env, own_server, cli_world):
    job = builders.make_job(*cli_world.setup, user=cli_world.admin, name="orphan")
    waiter = support.start_cli(["wait", str(job.pk)], {**env, "GANGWEB_URL": own_server.url, "GANGWEB_RETRIES": "2"})
    # The first answer printed the job's phase: the waiter is now in its next long-poll (the job cannot change).
    before = support.read_stderr_until(waiter, rf"job {job.pk} orphan: Submitted")
    assert waiter.poll() is None
    own_server.stop()
    stdout, stderr = waiter.communicate(timeout=60)
    assert waiter.returncode == 5, before + stderr
    assert "error:" in stderr and "127.0.0.1" in stderr and "gave up after retries" in stderr, stderr


def test_a_submit_retried_after_a_dropped_connection_creates_exactly_one_job(env, server, cli_world):
    proxy = support.DroppingProxy(server.url, "/api/v1/jobs/", drops=1)
    try:
        r = support.run_cli(["submit", "--name", "once", "--template", "llm", "--queue", "team-a", "--cluster",
                             "local", "-o", "json"], {**env, "GANGWEB_URL": proxy.url, "GANGWEB_RETRIES": "3"})
    finally:
        proxy.close()
    assert r.returncode == 0, r.stderr
    assert proxy.posts == 2  # the dropped one and its retry
    assert GangJob.objects.filter(name="once").count() == 1
    assert json.loads(r.stdout)["id"] == GangJob.objects.get(name="once").pk


def test_the_same_idempotency_key_on_a_second_run_submits_nothing_new(env, cli_world):
    args = ["submit", "--name", "keyed", "--template", "llm", "--queue", "team-a", "--cluster", "local",
            "--idempotency-key", "pipeline-run-42", "-o", "json"]
    first, second = support.run_cli(args, env), support.run_cli(args, env)
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert json.loads(first.stdout)["id"] == json.loads(second.stdout)["id"]
    assert GangJob.objects.filter(name="keyed").count() == 1


def test_reads_print_the_apis_json(env, cli_world):
    job = builders.make_job(*cli_world.setup, user=cli_world.admin, phase=GangPhase.QUEUED, name="q1")
    for args, check in [
        (["timeline", str(job.pk), "-o", "json"], lambda d: [e["phase"] for e in d][-1] == "Queued"),
        (["why", str(job.pk), "-o", "json"], lambda d: d["phase"] == "Queued"),
        (["queues", "-o", "json"], lambda d: [n["name"] for n in d["roots"]] == ["team-a"]),
        (["templates", "-o", "json"], lambda d: [t["name"] for t in d] == ["llm"]),
        (["clusters", "-o", "json"], lambda d: [c["name"] for c in d] == ["local"]),
        (["ls", "--phase", "Queued", "-o", "json"], lambda d: [j["id"] for j in d] == [job.pk]),
        (["ls", "--phase", "Running", "-o", "json"], lambda d: d == []),
    ]:
        r = support.run_cli(args, env)
        assert r.returncode == 0, (args, r.stderr)
        assert check(json.loads(r.stdout)), (args, r.stdout)
    for args in (["ls"], ["queues"], ["templates"], ["clusters"], ["timeline", str(job.pk)], ["why", str(job.pk)]):
        r = support.run_cli(args, env)
        assert r.returncode == 0 and r.stdout.strip(), (args, r.stderr)


def test_cancel_of_several_jobs_cancels_each(env, cli_world):
    ids = [builders.make_job(*cli_world.setup, user=cli_world.admin).pk for _ in range(2)]
    r = support.run_cli(["cancel", *map(str, ids), "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    assert [j["desired_state"] for j in json.loads(r.stdout)] == ["Cancel", "Cancel"]
    r = support.run_cli(["cancel", "999999"], env)
    assert r.returncode == 4 and "404" in r.stderr
