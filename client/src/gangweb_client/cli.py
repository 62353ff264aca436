"""The `gangweb` command (click). Every command takes `-o table|json|yaml`; exit codes are in `exitcodes`."""
from __future__ import annotations

import getpass
import json
import os
import socket
import sys
from datetime import datetime

import click
import yaml
from rich.live import Live
from rich.table import Table

from . import config, exitcodes, output
from .client import Client
from .errors import ApiError, GangwebError, InputError
from .models import Job, TimelineEntry
from .version import __version__

err = output.console(stderr=True)

output_option = click.option("-o", "--output", "fmt", type=click.Choice(output.FORMATS), default="table",
                             show_default=True, help="table for people; json/yaml print the API's representation")
timeout_option = click.option("--timeout", type=click.FloatRange(min=0), default=None,
                              help="seconds to wait at most (exit 3 when they pass); default: no limit")


class State:
    """What the group's options resolved to; the Client is made on first use (login needs none)."""

    def __init__(self, url, token, profile, retries, request_timeout):
        self.url, self.token, self.profile = url, token, profile
        self.retries, self.request_timeout = retries, request_timeout
        self._client = None

    @property
    def client(self) -> Client:
        if self._client is None:
            settings = config.resolve(self.url, self.token, self.profile)
            if not settings.token:
                raise InputError("no API token: pass --token, set GANGWEB_TOKEN or run 'gangweb login'")
            self._client = Client(settings.url, settings.token, retries=self.retries, timeout=self.request_timeout)
        return self._client


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--url", envvar=config.URL_ENV, help=f"server URL (env {config.URL_ENV}; else the profile's)")
@click.option("--token", envvar=config.TOKEN_ENV, help=f"API token (env {config.TOKEN_ENV}; else the profile's)")
@click.option("--profile", envvar=config.PROFILE_ENV, help="profile in the config file (default: its current one)")
@click.option("--retries", type=click.IntRange(0, 20), default=5, show_default=True, envvar="GANGWEB_RETRIES",
              help="retries of a failed request (backoff 0.5 s doubling, with jitter) before exit 5")
@click.option("--request-timeout", type=click.FloatRange(min=1), default=30, show_default=True,
              help="seconds to connect and to wait for each answer")
@click.version_option(__version__, prog_name="gangweb")
@click.pass_context
def cli(ctx, url, token, profile, retries, request_timeout):
    """gangweb: submit gang jobs, wait for their result, see why they wait.

    \b
    Exit codes: 0 all Succeeded (or done), 1 any Failed, 2 any Cancelled, 3 timeout,
                4 usage or input error (the server's 4xx names the field), 5 server or network error.
    """
    ctx.obj = State(url, token, profile, retries, request_timeout)


# --- login -------------------------------------------------------------------------------------------------------

@cli.command()
@click.option("--url", "login_url", help="server URL (default: --url / GANGWEB_URL / the profile's)")
@click.option("--username", "-u", help="your gangweb user name (prompted when missing)")
@click.option("--password", envvar="GANGWEB_PASSWORD", help="your password (env GANGWEB_PASSWORD; else prompted)")
@click.option("--name", "token_name", default=None, help="the token's name (default gangweb-cli@<host>)")
@click.option("--action", "actions", multiple=True, type=click.Choice(["read", "submit", "cancel"]),
              help="what the token may do (repeat; default read, submit, cancel)")
@click.option("--queue", "queues", multiple=True, help="limit the token to these queues (repeat; default: all yours)")
@click.option("--expires-at", help="ISO 8601; default: the server's (GANGWEB_TOKEN_DEFAULT_DAYS)")
@click.option("--save-as", "save_as", default=None, help="profile to store it in (default: --profile or 'default')")
@output_option
@click.pass_obj
def login(state, login_url, username, password, token_name, actions, queues, expires_at, save_as, fmt):
    """Create an API token with your password and store it in the config file (0600)."""
    url = login_url or state.url or config.resolve(profile=state.profile).url
    if not url:
        raise InputError("no server URL: pass --url or set GANGWEB_URL")
    username = username or click.prompt("username")
    password = password or getpass.getpass("password: ")
    client = Client(url, None, basic=(username, password), retries=state.retries, timeout=state.request_timeout)
    created = client.create_token(token_name or f"gangweb-cli@{socket.gethostname()}"[:100],
                                  list(actions) or ["read", "submit", "cancel"], list(queues), expires_at)
    profile = save_as or state.profile or config.DEFAULT_PROFILE
    path = config.save_profile(profile, url, created["token"])
    shown = {**created, "token": f"(stored in {path}, profile {profile})"}  # never print the secret
    output.emit(shown, fmt, lambda d: f"token {d['display']} ({', '.join(d['actions'])}) expires {d['expires_at']};"
                                      f" stored in {path} as profile '{profile}'")


# --- submit ------------------------------------------------------------------------------------------------------

def _load_jobs(path: str) -> list[dict]:
    """Jobs from a YAML or JSON file ('-' = stdin): one job, a list, or {"jobs": [...]}."""
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
        data = yaml.safe_load(text)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML or JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("jobs"), list) and set(data) == {"jobs"}:
        data = data["jobs"]
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{path}: job {i} is a {type(item).__name__}, not a mapping of submit fields")
    return items


@cli.command()
@click.option("-f", "--file", "files", multiple=True, help="YAML or JSON: one job, a list, or {jobs: [...]}; - = stdin")
@click.option("--name", help="job name (DNS-1123 label)")
@click.option("--template", help="runtime template name")
@click.option("--template-version", type=int, help="template version (default latest)")
@click.option("--queue", help="queue name")
@click.option("--cluster", "clusters", multiple=True,
              help="cluster name; repeat it to let gangweb choose among several, leave it out to let gangweb choose "
                   "among every cluster of the queue (`gangweb get` says where and why)")
@click.option("--namespace", help="namespace (default: the server's, 'default')")
@click.option("--priority-class", "priority_class_name", help="priority class name")
@click.option("--overrides", help='JSON object of overrides the template allows, e.g. \'{"podSets": {...}}\'')
@click.option("--idempotency-key", help="reuse a key to make a re-run of this command submit nothing new "
                                        "(default: a new UUID per invocation, reused by its own retries)")
@click.option("--wait", "do_wait", is_flag=True, help="wait until every job is terminal; exit with its result")
@timeout_option
@output_option
@click.pass_obj
def submit(state, files, name, template, template_version, queue, clusters, namespace, priority_class_name,
           overrides, idempotency_key, do_wait, timeout, fmt):
    """Submit jobs from flags or files (several: one bulk request, all or none), optionally --wait. Without
    --cluster (or with several) the server places each job and records why."""
    cluster = None if not clusters else clusters[0] if len(clusters) == 1 else list(clusters)
    flags = {"name": name, "template": template, "template_version": template_version, "queue": queue,
             "cluster": cluster, "namespace": namespace, "priority_class_name": priority_class_name}
    if overrides:
        try:
            flags["overrides"] = json.loads(overrides)
        except ValueError as exc:
            raise InputError(f"--overrides: not JSON: {exc}") from exc
    flags = {k: v for k, v in flags.items() if v is not None}
    jobs = [item for path in files for item in _load_jobs(path)] or [{}]
    if name and len(jobs) > 1:
        raise InputError("--name: names one job, but the files hold several")
    jobs = [{**job, **flags} for job in jobs]  # flags override what the files say, for every job
    created = state.client.submit(jobs, idempotency_key)
    if fmt == "table":  # JSON and YAML carry them in `warnings`, as the API wrote them
        output.submit_warnings([j.raw for j in created])
    if not do_wait:
        output.emit(created[0].raw if len(created) == 1 else [j.raw for j in created], fmt,
                    lambda d: output.jobs_table(d if isinstance(d, list) else [d]))
        return
    _wait_and_exit(state.client, [j.id for j in created], timeout, fmt)


# --- wait --------------------------------------------------------------------------------------------------------

class Progress:
    """Shows each phase change as it happens: a live table on a terminal, one plain line each otherwise (stderr,
    so stdout keeps only the command's output)."""

    def __init__(self):
        self.live = Live(console=err, auto_refresh=False, transient=False) if err.is_terminal else None

    def change(self, job: Job, entry: TimelineEntry) -> None:
        if self.live is None:
            at = (entry.at or "")[11:19] or datetime.now().strftime("%H:%M:%S")
            extra = f" ({entry.reason})" if entry.reason else ""
            attempt = f" attempt {entry.attempt}" if entry.attempt else ""
            err.print(f"{at} job {job.id} {job.name}: {entry.phase}{attempt}{extra}", markup=False, highlight=False)

    def state(self, jobs: list[Job]) -> None:
        if self.live is None:
            return
        table = Table(box=None, header_style="bold")
        for column in ("ID", "NAME", "PHASE", "REASON / WHY PENDING"):
            table.add_column(column)
        counts: dict[str, int] = {}
        for job in jobs:
            counts[job.phase] = counts.get(job.phase, 0) + 1
        shown = max(5, err.size.height - 6)  # leave room for the header and the counts caption
        active_first = sorted(jobs, key=lambda job: job.terminal)  # the jobs still going are the interesting ones
        for job in active_first[:shown]:
            why = (job.why_pending or {}).get("summary") if not job.terminal else None
            table.add_row(str(job.id), job.name, output.phase_text(job.phase), why or job.phase_reason)
        table.caption = "  ".join(f"{phase}: {n}" for phase, n in sorted(counts.items())) + (
            f"  ({shown} of {len(jobs)} shown)" if len(jobs) > shown else "")
        self.live.update(table, refresh=True)

    def __enter__(self):
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.stop()


def _wait_and_exit(client: Client, ids: list[int], timeout: float | None, fmt: str) -> None:
    with Progress() as progress:
        result = client.wait(ids, timeout, on_change=progress.change, on_state=progress.state)
    output.emit([j.raw for j in result.jobs], fmt, output.jobs_table)
    code = result.exit_code
    if code == exitcodes.TIMEOUT:
        waiting = [j for j in result.jobs if not j.terminal]
        err.print(f"timeout: {len(waiting)} of {len(result.jobs)} jobs not finished after {timeout:g} s", markup=False)
    elif code != exitcodes.OK:
        bad = [f"{j.id} {j.name} {j.phase}" + (f" ({j.phase_reason})" if j.phase_reason else "")
               for j in result.jobs if j.phase in ("Failed", "Cancelled")]
        err.print(f"{exitcodes.NAMES[code]}: " + "; ".join(bad), markup=False)
        _print_failures(client, [j for j in result.jobs if j.phase == "Failed"])
    sys.exit(code)


FAILURES_SHOWN = 10  # a bulk wait with many failures names the first ones (one GET each)


def _print_failures(client: Client, failed: list[Job]) -> None:
    """Each failed job's first failure (the job detail's `failure`), on stderr: which pod set, index and container
    failed first and its exit code. A server without `failure` prints nothing more."""
    for job in failed[:FAILURES_SHOWN]:
        try:
            lines = output.failure_lines(client.get(job.id).raw)
        except GangwebError:
            continue  # the wait's own answer was already printed: a read failing now changes nothing
        for line in lines:
            err.print(f"job {job.id}: {line}",
                      markup=False, highlight=False)


@cli.command()
@click.argument("ids", nargs=-1, required=True, type=click.IntRange(min=1))
@timeout_option
@output_option
@click.pass_obj
def wait(state, ids, timeout, fmt):
    """Wait until every job is terminal now; exit 0 all Succeeded, 1 any Failed, 2 any Cancelled, 3 timeout."""
    _wait_and_exit(state.client, list(ids), timeout, fmt)


# --- reads -------------------------------------------------------------------------------------------------------

@cli.command()
@click.argument("ids", nargs=-1, required=True, type=click.IntRange(min=1))
@output_option
@click.pass_obj
def get(state, ids, fmt):
    """Jobs by id, in their detail form (timeline, durations, why_pending, resolved spec)."""
    jobs = [state.client.get(i).raw for i in ids]
    output.emit(jobs[0] if len(jobs) == 1 else jobs, fmt, output.job_detail)


@cli.command(name="ls")
@click.option("--queue")
@click.option("--phase", "phases", multiple=True,
              help="repeat for several; 'pending' is Submitted, Dispatched and Queued together")
@click.option("--cluster")
@click.option("--submitter", help="user name")
@click.option("--namespace")
@click.option("--template")
@click.option("-q", "--name-contains", "q", help="name contains")
@click.option("--created-after", help="ISO 8601")
@click.option("--created-before", help="ISO 8601")
@click.option("--ordering", help="created_at, phase_changed_at, name or phase; '-' first for descending")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--all", "read_all", is_flag=True, help="every matching job (all pages)")
@output_option
@click.pass_obj
def ls(state, queue, phases, cluster, submitter, namespace, template, q, created_after, created_before, ordering,
       limit, read_all, fmt):
    """List jobs, newest first, with the API's filters. JSON/YAML: a list of jobs in the API's list form."""
    jobs = state.client.jobs(limit=None if read_all else limit, queue=queue, phase=list(phases), cluster=cluster,
                             submitter=submitter, namespace=namespace, template=template, q=q,
                             created_after=created_after, created_before=created_before, ordering=ordering)
    output.emit([j.raw for j in jobs], fmt, output.jobs_table)


@cli.command()
@click.argument("job_id", type=click.IntRange(min=1))
@output_option
@click.pass_obj
def timeline(state, job_id, fmt):
    """A job's phase history with durations."""
    rows = state.client.transport.request("GET", f"jobs/{job_id}/timeline/")
    output.emit(rows, fmt, output.timeline_table)


@cli.command()
@click.argument("job_id", type=click.IntRange(min=1))
@output_option
@click.pass_obj
def why(state, job_id, fmt):
    """Why a job waits: the why_pending summary and the blocking facts with their numbers, its place in line and
    when it is estimated to start (p50 and p90, with the evidence, or why that is unknown)."""
    job = state.client.get(job_id).raw
    data = {"id": job["id"], "name": job["name"], "phase": job["phase"], "phase_reason": job.get("phase_reason"),
            "why_pending": job.get("why_pending"), "position": job.get("position"),
            "estimated_start": job.get("estimated_start"), "failure": job.get("failure")}
    output.emit(data, fmt, output.why_text)


@cli.command()
@click.argument("job_id", type=click.IntRange(min=1))
@click.option("--pod-set", help="the pod set (default: the failed pod's, else the first)")
@click.option("--index", type=click.IntRange(min=0), help="the pod's index in its pod set")
@click.option("-c", "--container", help="default: the container that failed, else the pod's first")
@click.option("--tail", "tail", type=click.IntRange(min=1), help="the last N lines only")
@click.option("--since", "since", type=click.IntRange(min=1), help="lines of the last N seconds only")
@click.option("-p", "--previous", is_flag=True, help="the previous (restarted) container's log")
@click.option("-f", "--follow", is_flag=True, help="stream new lines until the server's time bound")
@click.pass_obj
def logs(state, job_id, pod_set, index, container, tail, since, previous, follow):
    """A container's log, read by the server from the job's cluster (no kubectl needed). Which pod and container
    were read, and a cut at the server's byte cap, are said on stderr."""
    response = state.client.logs(job_id, pod_set=pod_set, index=index, container=container, tail_lines=tail,
                                 since_seconds=since, previous=previous, follow=follow)
    h = response.headers
    index_text = f"[{h['X-Gangweb-Log-Index']}]" if h.get("X-Gangweb-Log-Index") else ""
    err.print(f"pod {h.get('X-Gangweb-Log-Pod', '?')} ({h.get('X-Gangweb-Log-Pod-Set', '')}{index_text}), "
              f"container {h.get('X-Gangweb-Log-Container', '?')}", markup=False, highlight=False)
    out = sys.stdout.buffer
    try:
        for chunk in response.iter_content(chunk_size=None):
            out.write(chunk)
            out.flush()
    finally:
        response.close()
    if h.get("X-Gangweb-Log-Truncated") == "true":
        err.print("the log was cut at the server's byte cap (GANGWEB_LOG_MAX_BYTES): use --tail or --since",
                  markup=False, highlight=False)


@cli.command()
@click.argument("ids", nargs=-1, required=True, type=click.IntRange(min=1))
@output_option
@click.pass_obj
def cancel(state, ids, fmt):
    """Cancel jobs (their cluster objects are deleted; each ends Cancelled)."""
    jobs = [j.raw for j in state.client.cancel(ids)]
    output.emit(jobs[0] if len(jobs) == 1 else jobs, fmt,
                lambda d: output.jobs_table(d if isinstance(d, list) else [d]))


@cli.command()
@click.argument("job_id", type=click.IntRange(min=1))
@click.option("--wait", "do_wait", is_flag=True, help="wait for the new job's result")
@timeout_option
@output_option
@click.pass_obj
def resubmit(state, job_id, do_wait, timeout, fmt):
    """Submit a finished job again as a new job with the same inputs."""
    job = state.client.resubmit(job_id)
    if do_wait:
        _wait_and_exit(state.client, [job.id], timeout, fmt)
    output.emit(job.raw, fmt, lambda d: output.jobs_table([d]))


@cli.command()
@click.option("--cluster", help="usage in this cluster only")
@output_option
@click.pass_obj
def queues(state, cluster, fmt):
    """The queue tree with GPU quota, limit and use per queue."""
    output.emit(state.client.queues(cluster), fmt, output.queue_tree)


@cli.command()
@click.argument("name", required=False)
@output_option
@click.pass_obj
def templates(state, name, fmt):
    """Runtime templates (or one, with its latest spec)."""
    if name:
        output.emit(state.client.template(name), fmt, lambda d: yaml.safe_dump(d, sort_keys=False))
        return
    output.emit(state.client.templates(), fmt, output.simple_table(
        [("NAME", "name"), ("VERSION", "latest_version"), ("QUEUE", "queue"), ("DESCRIPTION", "description")]))


@cli.command()
@click.argument("cluster")
@click.option("--offset", type=int, default=0, show_default=True, help="first node row")
@click.option("--limit", type=int, default=50, show_default=True, help="node rows (at most 200)")
@output_option
@click.pass_obj
def capacity(state, cluster, offset, limit, fmt):
    """A cluster's capacity: allocatable, in use by gangweb and by other pods, and free (GPUs, CPU cores, GiB)."""
    output.emit(state.client.capacity(cluster, offset, limit), fmt, output.capacity_tables)


@cli.command()
@output_option
@click.pass_obj
def clusters(state, fmt):
    """Clusters with health, version and the scheduler backends each serves."""
    output.emit(state.client.clusters(), fmt, output.simple_table(
        [("NAME", "name"), ("HEALTH", "health"), ("VERSION", "server_version"), ("BACKENDS", "available_backends"),
         ("MESSAGE", "health_message")]))


# --- entry point -------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    """Run the command; map every error to its exit code (click's own usage errors too: 4, not click's 2, which
    means Cancelled here)."""
    try:
        cli.main(args=argv, prog_name="gangweb", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        exc.show()
        sys.exit(exitcodes.USAGE)
    except click.Abort:
        err.print("aborted", markup=False)
        sys.exit(exitcodes.USAGE)
    except ApiError as exc:
        err.print(f"error: the server answered {exc.status} to {exc.method} /api/v1/{exc.path.lstrip('/')}",
                  markup=False)
        for line in exc.lines():
            err.print(f"  {line}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except GangwebError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(exitcodes.OK)


if __name__ == "__main__":  # python -m gangweb_client.cli
    main(os.sys.argv[1:])
