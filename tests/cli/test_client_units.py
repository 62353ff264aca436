"""The client's pure parts: exit codes from a wait's result, the API's error shapes, config precedence and the
0600 file, job files. (Everything that talks to a server is in test_cli_server.py and tests/cluster.)"""
import os
import stat

import pytest
import yaml
from gangweb_client import config, exitcodes
from gangweb_client.cli import _load_jobs
from gangweb_client.errors import ApiError, InputError, NotFound, from_response
from gangweb_client.models import Job, WaitResult


def _job(phase):
    return Job(id=1, name="j", phase=phase)


@pytest.mark.parametrize(("phases", "timed_out", "code"), [
    (["Succeeded", "Succeeded"], False, exitcodes.OK),
    (["Succeeded", "Failed", "Cancelled"], False, exitcodes.FAILED),
    (["Succeeded", "Cancelled"], False, exitcodes.CANCELLED),
    (["Succeeded", "Running"], True, exitcodes.TIMEOUT),
    (["Failed", "Running"], True, exitcodes.FAILED),  # a failure already known outranks the timeout
    (["Running"], False, exitcodes.TIMEOUT),  # never 0 while a job is still active
])
def test_a_waits_exit_code_follows_the_jobs_phases(phases, timed_out, code):
    assert WaitResult(jobs=tuple(_job(p) for p in phases), timed_out=timed_out).exit_code == code


@pytest.mark.parametrize(("status", "body", "field", "message", "cls", "exit_code"), [
    (400, {"queue": ["no queue named 'x'"]}, "queue", "no queue named 'x'", ApiError, 4),
    (400, {"jobs[3].name": ["too long", "bad"]}, "jobs[3].name", "too long; bad", ApiError, 4),
    (404, {"detail": "Not found."}, "detail", "Not found.", NotFound, 4),
    (422, {"Idempotency-Key": ["reused with a different body"]}, "Idempotency-Key", "reused with a different body",
     ApiError, 4),
    (400, {"overrides": {"podSets": ["unknown pod set"]}}, "overrides.podSets", "unknown pod set", ApiError, 4),
    (500, ["boom"], "detail", "boom", ApiError, 5),
    (503, None, "detail", "HTTP 503", ApiError, 5),
])
def test_api_errors_carry_the_field_and_message_the_server_named(status, body, field, message, cls, exit_code):
    error = from_response(status, body, "POST", "jobs/")
    assert type(error) is cls
    assert (error.status, error.field, error.message, error.exit_code) == (status, field, message, exit_code)


def test_flags_beat_the_environment_which_beats_the_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("GANGWEB_CONFIG", str(tmp_path / "gw" / "config.yaml"))
    for name in ("GANGWEB_URL", "GANGWEB_TOKEN", "GANGWEB_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    path = config.save_profile("default", "https://a.example", "gw_a")
    config.save_profile("staging", "https://s.example", "gw_s", make_current=False)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert yaml.safe_load(path.read_text())["current"] == "default"
    assert config.resolve() == config.Settings("https://a.example", "gw_a", "default")
    assert config.resolve(profile="staging").token == "gw_s"
    monkeypatch.setenv("GANGWEB_TOKEN", "gw_env")
    assert config.resolve().token == "gw_env"
    assert config.resolve(token="gw_flag").token == "gw_flag"
    with pytest.raises(InputError, match="no profile 'nope'.*default, staging"):
        config.resolve(profile="nope")


@pytest.mark.parametrize(("text", "names"), [
    ("name: one\ntemplate: t\n", ["one"]),
    ("- name: a\n- name: b\n", ["a", "b"]),
    ('{"jobs": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}', ["a", "b", "c"]),
])
def test_a_job_file_holds_one_job_a_list_or_a_bulk_body(tmp_path, text, names):
    (tmp_path / "f.yaml").write_text(text)
    assert [job["name"] for job in _load_jobs(str(tmp_path / "f.yaml"))] == names


def test_a_job_file_of_the_wrong_shape_is_refused_before_sending(tmp_path):
    (tmp_path / "f.yaml").write_text("- name: a\n- just a string\n")
    with pytest.raises(InputError, match="job 1 is a str, not a mapping"):
        _load_jobs(str(tmp_path / "f.yaml"))


def test_why_and_timeline_print_whole_lines_into_a_pipe(capsys):
    """Off a terminal (a CI log) rich used 80 columns and cut the why-pending summary mid-word."""
    from gangweb_client import output

    summary = ("This job needs 40 GPUs; the cluster has 32 allocatable in total (4 schedulable nodes). "
               "Not enough room for the whole gang.")
    job = {"id": 2, "name": "big", "phase": "Queued", "why_pending": {
        "summary": summary,
        "blocking": [{"code": "Capacity", "message": "40 GPUs needed, 32 allocatable", "need": 40}]}}
    pipe = output.console()  # capsys replaced stdout: not a terminal
    pipe.print(output.why_text(job))
    pipe.print(output.timeline_table([{"phase": "Queued", "attempt": 1, "at": "2026-12-02T01:50:37.649Z",
                                       "duration_s": 38.0, "reason": "PlacedWithoutWait",
                                       "source": "default/hello-world-a-rather-long-podgroup-name-0123456789"}]))
    printed = capsys.readouterr().out
    assert summary in printed
    assert "Capacity: 40 GPUs needed, 32 allocatable (need=40)" in printed
    assert "PlacedWithoutWait" in printed and "default/hello-world-a-rather-long-podgroup-name-0123456789" in printed


def test_why_prints_what_the_cluster_keeps_saying_with_how_often_and_since_when(capsys):
    from gangweb_client import output

    job = {"id": 3, "name": "loop", "phase": "Queued", "why_pending": {"summary": "Not enough room.", "said": [
        {"reason": "FailedScheduling", "object": "Pod default/loop-worker-0", "count": 5000,
         "first_at": "2026-12-06T08:00:00+00:00", "last_at": "2026-12-06T09:23:19+00:00",
         "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}}
    output.console().print(output.why_text(job))
    assert ("FailedScheduling on Pod default/loop-worker-0: 5,000 times, first seen 2026-12-06 08:00:00.000 UTC, "
            "last seen 2026-12-06 09:23:19.000 UTC: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
            ) in " ".join(capsys.readouterr().out.split())


def test_why_prints_the_place_in_line_and_the_estimated_start(capsys):
    from gangweb_client import output

    job = {"id": 3, "name": "wide", "phase": "Queued", "why_pending": {"summary": "Waiting for 8 GPUs."},
           "position": {"text": "2 of 3 in team-a", "parent_text": None},
           "estimated_start": {"status": "estimated", "text": "p50 in 40 min (07:40 UTC); p90 in 55 min (07:55 UTC)",
                               "evidence": "jobs like big [same template] ran 60 min (p50) over 5 runs; 1 job ahead "
                                           "in team-a; needs 8 GPUs, 4 free now, 8 once big ends"}}
    output.console().print(output.why_text(job))
    printed = capsys.readouterr().out
    assert "place in line: 2 of 3 in team-a" in printed
    assert "estimated start: p50 in 40 min (07:40 UTC); p90 in 55 min (07:55 UTC)" in printed
    assert "because: jobs like big [same template] ran 60 min" in printed  # markup-like text printed as is
    output.console().print(output.why_text({**job, "why_pending": None}))
    assert "estimated start: p50 in 40 min" in capsys.readouterr().out


def test_item9_why_prints_an_unknown_estimate_and_place_in_line_with_their_reasons(capsys):
    """What the server answers when it cannot compute them (issue 30 item 9): `gangweb why` shows the reasons."""
    from gangweb_client import output

    reason = "the estimate could not be computed (IndexError in gangweb; the error is logged)"
    job = {"id": 4, "name": "job-b", "phase": "Queued", "why_pending": {"summary": "Waiting for 4 GPUs."},
           "position": {"status": "unknown", "text": "unknown: the place in line could not be computed", "queue": None,
                        "parent_text": None},
           "estimated_start": {"status": "unknown", "text": f"unknown: {reason}", "evidence": "", "reason": reason,
                               "needs": None, "freed_by": None}}
    output.console().print(output.why_text(job))
    printed = capsys.readouterr().out
    assert "place in line: unknown: the place in line could not be computed" in printed
    assert f"estimated start: unknown: {reason}" in printed and "Waiting for 4 GPUs." in printed


NOW = "2026-12-02T15:00:00Z"


@pytest.mark.parametrize(("changed_at", "shown"), [
    ("2026-12-02T14:56:55.123456Z", "3m 04s ago"),
    ("2026-12-02T15:56:55+01:00", "3m 05s ago"),  # another zone, the same moment: the same words
    ("2026-12-02T14:59:58.5Z", "1.5s ago"),
    ("2026-11-30T12:00:00Z", "2d 3h ago"),
    (None, ""),
    ("not a time", ""),
])
def test_the_since_column_says_how_long_ago_whatever_the_time_zone(changed_at, shown):
    """Was "2026-12-02 14:56:55" with no zone, read as local time by a user east of UTC (a new user's pass)."""
    from gangweb_client import output

    assert output.ago(changed_at, output.parse_time(NOW)) == shown


def test_the_jobs_table_shows_since_as_the_dashboard_does(capsys):
    from datetime import UTC, datetime, timedelta

    from gangweb_client import output

    from scheduling.views.display import humanize_seconds

    for seconds in (0.4, 12, 185, 7620, 273600):
        assert output.humanize_seconds(seconds) == humanize_seconds(seconds)
    at = (datetime.now(UTC) - timedelta(minutes=3, seconds=30)).isoformat().replace("+00:00", "Z")
    output.console().print(output.jobs_table([{"id": 7, "name": "j", "phase": "Running", "phase_changed_at": at}]))
    line = capsys.readouterr().out.splitlines()[1]
    assert line.rstrip().endswith(("3m 30s ago", "3m 31s ago", "3m 32s ago")), line


def test_the_timeline_writes_every_time_in_one_format_with_its_zone(capsys):
    """Issue 33 item 4: "05:32:34.226" and "05:32:35Z" never share the column."""
    from gangweb_client import output

    pipe = output.console()
    pipe.print(output.timeline_table([
        {"phase": "Submitted", "attempt": 0, "at": "2026-12-06T05:32:34.226517Z", "duration_s": 0.8},
        {"phase": "Dispatched", "attempt": 0, "at": "2026-12-06T05:32:35Z", "duration_s": 1.0},
        {"phase": "Queued", "attempt": 0, "at": "2026-12-06T06:32:36.5+01:00", "duration_s": None}]))
    printed = capsys.readouterr().out
    assert "2026-12-06 05:32:34.226 UTC" in printed
    assert "2026-12-06 05:32:35.000 UTC" in printed
    assert "2026-12-06 05:32:36.500 UTC" in printed
    assert "Z" not in printed.replace("UTC", "")


def test_a_jobs_failure_prints_as_a_summary_its_facts_and_its_message():
    from gangweb_client import output

    job = Job.from_api({"id": 7, "name": "t", "phase": "Failed", "failure": {
        "summary": "worker[0] container trainer exited with code 3 (Error)", "pod_set": "worker", "index": 0,
        "pod": "t-worker-0-x", "container": "trainer", "exit_code": 3, "signal": None, "reason": "Error",
        "job_reason": "BackoffLimitExceeded", "message": "a\nb\nloss is NaN\n"}})
    assert job.failure["exit_code"] == 3
    assert output.failure_lines(job.raw) == [
        "failure: worker[0] container trainer exited with code 3 (Error)",
        "  pod set worker, index 0, pod t-worker-0-x, container trainer, exit code 3, reason Error, "
        "job BackoffLimitExceeded",
        "  message: a", "  message: b", "  message: loss is NaN"]
    assert Job.from_api({"id": 8, "name": "u", "phase": "Running"}).failure is None
