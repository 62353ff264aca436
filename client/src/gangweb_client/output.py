"""-o json|yaml|table. JSON and YAML print the API's own representation; tables are drawn by rich."""
from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timezone

import yaml
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

UTC = timezone.utc  # noqa: UP017 - the client supports Python 3.10 (pyproject.toml), which has no datetime.UTC
FORMATS = ("table", "json", "yaml")
# Off a terminal (a CI log, a pipe) rich would lay everything out in 80 columns and cut the reasons people read
# there; no width limit then, so each line is whole.
UNLIMITED_WIDTH = 100_000


def console(stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr): the terminal's width on a terminal, whole lines otherwise."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, soft_wrap=True, width=None if stream.isatty() else UNLIMITED_WIDTH)


stdout = console()


def emit(data, fmt: str, table=None) -> None:
    """Print `data` (JSON-safe) as JSON or YAML, or call `table(data)` for a rich renderable."""
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    elif fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    elif table is not None:
        stdout.print(table(data))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


def submit_warnings(jobs: list[dict]) -> None:
    """Print each submitted job's `warnings` (the API's sentences, e.g. a queue limit it must wait for: "... says
    4 of 8 GPUs allocated ...") on stderr, one line each, so stdout keeps only the jobs table."""
    err = console(stderr=True)
    for job in jobs:
        for warning in job.get("warnings") or []:
            if isinstance(warning, dict) and warning.get("message"):
                err.print(f"[yellow]warning[/] {escape(str(job.get('name', '')))}: {escape(str(warning['message']))}")


def capacity_tables(data: dict):
    """A cluster's capacity (`GET clusters/<name>/capacity/`): totals per resource, GPUs by type, nodes; amounts as
    the API writes them, in its units (GPUs, CPU cores, GiB)."""
    if not data.get("known"):
        return Text(str(data.get("message") or "unknown"))
    units = data.get("units") or {}
    totals = data.get("totals") or {}
    upper = "≤ " if data.get("free_is_upper_bound") else ""
    table = Table(title=f"{data.get('cluster')}: {data.get('nodes')} schedulable nodes", box=None,
                  header_style="bold")
    for header in ("RESOURCE", "ALLOCATABLE", "IN USE BY GANGWEB", "IN USE BY OTHERS", "FREE"):
        table.add_column(header, justify="left" if header == "RESOURCE" else "right")
    for res in ("gpu", "cpu", "memory"):
        def cell(key, res=res):
            value = (totals.get(key) or {}).get(res) if totals.get(key) is not None else None
            return "unknown" if value is None else f"{value:,.6g} {units.get(res, '')}"
        table.add_row(res, cell("allocatable"), cell("in_use_gangweb"), cell("in_use_others"), upper + cell("free"))
    parts = [table]
    if data.get("gpu_types"):
        kinds = Table(title="GPUs by type", box=None, header_style="bold")
        for header in ("GPU TYPE", "NODES", "ALLOCATABLE", "IN USE BY GANGWEB", "IN USE BY OTHERS", "FREE"):
            kinds.add_column(header, justify="left" if header == "GPU TYPE" else "right")
        for t in data["gpu_types"]:
            kinds.add_row(escape(t.get("product") or "(not labelled)"), str(t.get("nodes")),
                          *("unknown" if t.get(k) is None else f"{t[k]:,.6g}" for k in (
                              "allocatable", "in_use_gangweb", "in_use_others")), upper + f"{t.get('free'):,.6g}")
        parts.append(kinds)
    if not (data.get("others") or {}).get("known", True):
        parts.append(Text(str(data["others"].get("message") or "")))
    return Group(*parts)


def jobs_table(rows: list[dict]) -> Table:
    """Jobs: id, name, queue, cluster, phase, reason, since."""
    table = Table(box=None, header_style="bold")
    for column in ("ID", "NAME", "QUEUE", "CLUSTER", "PHASE", "REASON", "SINCE"):
        table.add_column(column, no_wrap=column != "REASON")
    now = datetime.now(UTC)
    for job in rows:
        table.add_row(str(job["id"]), job.get("name", ""), job.get("queue", ""), job.get("cluster", ""),
                      phase_text(job.get("phase", "")), job.get("phase_reason", "") or "",
                      ago(job.get("phase_changed_at"), now))
    return table


def parse_time(text: str | None) -> datetime | None:
    """An API time (RFC 3339, "2026-12-02T14:47:18.237041Z") as an aware datetime; None when absent or unreadable.
    A time without a zone is read as UTC, as the API writes every time in UTC."""
    if not text:
        return None
    text = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
    for candidate in (text, re.sub(r"\.\d+", "", text)):  # Python 3.10 reads only 3 or 6 fraction digits
        try:
            parsed = datetime.fromisoformat(candidate)
        except ValueError:
            continue
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def humanize_seconds(seconds: float) -> str:
    """A short duration in the dashboard's words: "0.4s", "12s", "3m 05s", "2h 07m", "3d 4h" (the same function
    as scheduling.views.display.humanize_seconds, which this package cannot import: tests/cli checks they agree)."""
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"


def ago(text: str | None, now: datetime | None = None) -> str:
    """How long ago an API time was, as the dashboard's jobs page writes time in a phase: "3m 05s ago"; "" when
    there is none. Relative, so it reads the same in every time zone (the API's times are UTC)."""
    at = parse_time(text)
    if at is None:
        return ""
    return f"{humanize_seconds(((now or datetime.now(UTC)) - at).total_seconds())} ago"


PHASE_STYLE = {"Succeeded": "green", "Failed": "red", "Cancelled": "yellow", "Running": "cyan", "Queued": "magenta"}


def phase_text(phase: str) -> str:
    """The phase with rich markup (colour on a terminal, plain text otherwise)."""
    style = PHASE_STYLE.get(phase)
    return f"[{style}]{phase}[/]" if style else phase


def clock_time(text: str | None) -> str:
    """An API time in one format with its zone, to the millisecond: "2026-12-06 05:32:34.226 UTC" (an entry
    written to the second reads "05:32:35.000", never "05:32:35Z" beside "05:32:34.226"); "" when absent, the text
    as given when unreadable."""
    at = parse_time(text)
    if at is None:
        return text or ""
    at = at.astimezone(UTC)
    return f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond // 1000:03d} UTC"


def timeline_table(entries: list[dict]) -> Table:
    """Timeline: phase, attempt, at (`clock_time`: one format, UTC), duration, reason, source."""
    table = Table(box=None, header_style="bold")
    for column in ("PHASE", "ATTEMPT", "AT", "DURATION", "REASON", "SOURCE"):
        table.add_column(column)
    for e in entries:
        duration = e.get("duration_s")
        table.add_row(phase_text(e["phase"]), str(e.get("attempt", 0)), clock_time(e.get("at")),
                      "" if duration is None else f"{duration:.1f}s" + (" …" if e.get("ongoing") else ""),
                      e.get("reason", ""), e.get("source", ""))
    return table


def failure_lines(job: dict) -> list[str]:
    """The job's first failure (the API's `failure` object), as lines: the summary, then the facts a user checks
    (pod set, index, container, exit code, reason), then its termination message; [] when nothing failed."""
    f = job.get("failure")
    if not isinstance(f, dict):
        return []
    lines = [f"failure: {f.get('summary') or f.get('reason')}"]
    facts = [("pod set", f.get("pod_set")), ("index", f.get("index")), ("pod", f.get("pod")),
             ("container", f.get("container")), ("exit code", f.get("exit_code")), ("signal", f.get("signal")),
             ("reason", f.get("reason")), ("job", f.get("job_reason"))]
    # index and exit code 0 are values; an empty name or no signal are not
    lines.append("  " + ", ".join(f"{k} {v}" for k, v in facts if v is not None and v != "" and (v != 0 or k in (
        "index", "exit code"))))
    message = (f.get("message") or "").strip()
    if message:
        lines += [f"  message: {line}" for line in message.splitlines()[-5:]]
    return lines


def job_detail(data):
    """Jobs in their detail form: the jobs table, then each failed job's failure lines."""
    rows = data if isinstance(data, list) else [data]
    extra = []
    for job in rows:
        lines = placement_lines(job) + failure_lines(job)
        if lines:
            extra.append(Text(f"job {job.get('id')} {job.get('name', '')}: " + "\n".join(lines)))
    return Group(jobs_table(rows), *extra) if extra else jobs_table(rows)


def placement_lines(job: dict) -> list[str]:
    """Where the job runs and why, when gangweb chose (`placement`: its sentence, then each move's); a job whose
    submit named its cluster, or a server without placement, gives none."""
    placement = job.get("placement")
    if not isinstance(placement, dict):
        return []
    lines = [f"on {job.get('cluster', '?')}: {placement.get('text', '')}"]
    for move in placement.get("moves") or []:
        if isinstance(move, dict):
            lines.append(f"  {str(move.get('at', ''))[:19].replace('T', ' ')} {move.get('text', '')}")
    return lines


def _estimate_lines(job: dict) -> list[str]:
    """The place in line and the start-time estimate of a pending job (servers without them: none)."""
    lines = []
    position = job.get("position")
    if position and position.get("text"):
        lines.append(f"place in line: {position['text']}" + (
            f", {position['parent_text']}" if position.get("parent_text") else ""))
    estimate = job.get("estimated_start")
    if estimate and estimate.get("text"):
        lines.append(f"estimated start: {escape(estimate['text'])}")
        if estimate.get("evidence"):
            lines.append(f"  because: {escape(estimate['evidence'])}")
    return lines


def why_text(job: dict):
    """Why a job waits: the summary, then each blocking fact with its numbers, what the cluster keeps saying (each
    folded Event with how often and first/last seen), then its place in line and its estimated start."""
    why = job.get("why_pending")
    failed = failure_lines(job)
    if failed:
        head = f"job {job['id']} ({job['name']}) is {job['phase']}"
        tree = Tree(f"[bold]{escape(head)}[/]")
        for line in failed:
            tree.add(escape(line))
        return tree
    extra = _estimate_lines(job)
    if not why:
        text = f"job {job['id']} ({job['name']}) is {job['phase']}" + (
            f" ({job['phase_reason']})" if job.get("phase_reason") else "")
        if extra:  # pending, but the scheduler has said nothing yet
            tree = Tree(f"[bold]{escape(text)}[/]")
            for line in extra:
                tree.add(line)
            return tree
        return text + ": it is not waiting."
    tree = Tree(f"[bold]job {job['id']} ({job['name']}) {job['phase']}[/]: {why.get('summary') or why.get('message')}")
    if why.get("reason"):
        tree.add(f"reason: {why['reason']}" + (f" (from {why['source']})" if why.get("source") else ""))
    pods = why.get("pods")
    if pods:
        tree.add(f"pods: {pods.get('bound')} of {pods.get('required')} bound, {pods.get('created')} created")
    for fact in why.get("blocking") or []:
        numbers = ", ".join(f"{k}={v}" for k, v in fact.items() if k not in ("code", "message"))
        suffix = f" [dim]({numbers})[/]" if numbers else ""
        tree.add(f"[red]{fact.get('code')}[/]: {fact.get('message', '')}{suffix}")
    for event in why.get("said") or []:
        count = event.get("count") or 1
        tree.add(escape(f"{event.get('reason')} on {event.get('object')}: {count:,} time{'' if count == 1 else 's'}, "
                        f"first seen {clock_time(event.get('first_at'))}, last seen {clock_time(event.get('last_at'))}"
                        f": {event.get('message', '')}"))
    for line in extra:
        tree.add(line)
    return tree


def _amount(resource: dict, key: str) -> str:
    value = resource.get(key)
    if value is None:
        return "-"
    if value == -1:
        return "∞"
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def queue_tree(data: dict):
    """The queue tree with GPU quota / limit / allocated (estimated) and active jobs per queue."""
    root = Tree("[bold]queues[/] (GPU: quota / limit / in use)")

    def add(parent, node):
        gpu = (node.get("resources") or {}).get("gpu") or {}
        used = gpu.get("allocated") if gpu.get("allocated") is not None else gpu.get("estimated_allocated")
        label = (f"[bold]{node['name']}[/]  {_amount(gpu, 'quota')} / {_amount(gpu, 'limit')} / "
                 f"{'-' if used is None else f'{used:g}'}  jobs {node.get('subtree_jobs', node.get('jobs', 0))}")
        if node.get("warnings"):
            label += f"  [yellow]{len(node['warnings'])} warning(s)[/]"
        branch = parent.add(label)
        for child in node.get("children") or []:
            add(branch, child)

    for node in data.get("roots", []):
        add(root, node)
    return root


def simple_table(columns: list[tuple[str, str]]):
    """A function rows -> Table of the given (header, key) columns."""
    def draw(rows: list[dict]) -> Table:
        table = Table(box=None, header_style="bold")
        for header, _ in columns:
            table.add_column(header)
        for row in rows:
            table.add_row(*(_cell(row.get(key)) for _, key in columns))
        return table
    return draw


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}" for k in value)
    return str(value)
