"""Start, watch and stop the control-plane processes, by PID, without touching anything else.

Every component is started in its own session (``start_new_session=True``), so its PID is also its process-group
ID and stopping the group catches any child it might fork. A `ProcessRecord` keeps the PID together with the
process start time read from ``/proc/<pid>/stat``: before signalling, `is_running` checks that the PID still names
the same process, so a recycled PID of someone else's process is never killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1


@dataclass
class ProcessRecord:
    """One process we started: component name, PID, start time (clock ticks since boot), log file, command."""

    name: str
    pid: int
    start_time: int | None
    log: str
    argv: list[str]

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (for the state file)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ProcessRecord:
        """Inverse of `to_dict`."""
        return cls(**data)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces: split after the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """Return the start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    rest = _stat_fields(pid)
    return int(rest[19]) if rest else None


def is_running(record: ProcessRecord) -> bool:
    """True if the recorded process still exists, is not a zombie, and is the same process (same start time)."""
    rest = _stat_fields(record.pid)
    if rest is None or rest[0] in ("Z", "X"):
        return False
    return record.start_time is None or int(rest[19]) == record.start_time


def _die_with_parent_hook() -> Callable[[], None]:
    # Load libc in the parent: the hook runs in the child between fork and exec, where little is safe to do.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    return lambda: libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    name: str, argv: list[str], log_path: Path, *, die_with_parent: bool = False
) -> tuple[subprocess.Popen, ProcessRecord]:
    """Start ``argv`` in a new session with stdout and stderr appended to ``log_path``.

    With ``die_with_parent`` the kernel sends the process SIGTERM when the thread that started it dies
    (``PR_SET_PDEATHSIG``): the test fixture uses it so a killed pytest cannot leave a control plane behind. The CLI
    does not, because its ``up`` returns and exits while the cluster keeps running.
    Returns the `Popen` (to reap the child) and the `ProcessRecord` (to find it again from another process).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S%z')} starting: {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent_hook() if die_with_parent else None,
            close_fds=True,
        )
    return proc, ProcessRecord(name, proc.pid, process_start_time(proc.pid), str(log_path), list(argv))


def _signal_group(record: ProcessRecord, sig: int) -> None:
    try:
        os.killpg(record.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:  # not a group leader we own: fall back to the single PID
        try:
            os.kill(record.pid, sig)
        except ProcessLookupError:
            pass


def stop(record: ProcessRecord, popen: subprocess.Popen | None = None, grace: float = 10.0) -> bool:
    """Stop a recorded process: SIGTERM to its process group, then SIGKILL after ``grace`` seconds.

    Does nothing if the PID no longer names the recorded process. ``popen`` (when this process started it) is used
    to reap the child. Returns True if the process is gone afterwards.
    """
    if popen is not None:
        popen.poll()
    if not is_running(record):
        return True
    _signal_group(record, signal.SIGTERM)
    if _wait_gone(record, popen, grace):
        return True
    _signal_group(record, signal.SIGKILL)
    return _wait_gone(record, popen, 10.0)


def _wait_gone(record: ProcessRecord, popen: subprocess.Popen | None, seconds: float) -> bool:
    """Poll for up to ``seconds`` until the recorded process is gone (reaping ``popen``); True if it is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if popen is not None:
            popen.poll()
        if not is_running(record):
            return True
        time.sleep(0.1)
    return not is_running(record)


def http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    """True if a GET of ``url`` answers 200 (any connection or HTTP error is False)."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ssl.SSLError):
        return False


def insecure_context() -> ssl.SSLContext:
    """An SSL context that skips verification: for the self-signed health endpoints of scheduler and KCM."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class WaitTimeout(TimeoutError):
    """Raised by `wait_until` when the condition did not hold in time."""


def wait_until(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    *,
    interval: float = 0.25,
    check: Callable[[], None] | None = None,
) -> float:
    """Poll ``condition`` until it returns True; return the seconds it took.

    ``check`` runs before every poll and may raise to abort early (e.g. a component died). Raises `WaitTimeout`
    naming ``what`` after ``timeout`` seconds.
    """
    start = time.monotonic()
    while True:
        if check is not None:
            check()
        if condition():
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def tail(path: Path | str, lines: int = 40) -> str:
    """Return the last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def rss_bytes(pid: int) -> int:
    """Return the resident set size of ``pid`` in bytes (``VmRSS`` of ``/proc/<pid>/status``), 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0
