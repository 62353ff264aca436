"""A follow stream (services/jobs/logs.py `_stream`) ends at its time bound even when the container says nothing
more, and at its byte cap, each time with a last line saying why."""
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3

from scheduling.services.jobs import logs as job_logs


@pytest.fixture
def quiet_log():
    """A plain-HTTP server on 127.0.0.1 that answers a chunked log: `body` in one chunk, then nothing until the
    test ends (a container that stopped writing but still runs)."""
    release = threading.Event()
    state = {"body": b"line 1\n"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            body = state["body"]
            self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
            self.wfile.flush()
            release.wait(60)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    pool = urllib3.PoolManager()

    def open_log(body: bytes = b"line 1\n"):
        state["body"] = body
        return pool.request("GET", f"http://127.0.0.1:{server.server_address[1]}/log", preload_content=False,
                            timeout=urllib3.Timeout(connect=5, read=60))

    yield open_log
    release.set()
    server.shutdown()
    server.server_close()


def test_a_quiet_follow_stream_ends_at_its_time_bound_and_says_so(quiet_log):
    chunks = list(job_logs._stream(quiet_log(), cap=1 << 20, seconds=1))
    assert chunks[0] == b"line 1\n"
    assert chunks[-1] == b"\n[gangweb: stream ended after 1 s (GANGWEB_LOG_FOLLOW_SECONDS)]\n"


def test_a_follow_stream_ends_at_the_byte_cap_and_says_so(quiet_log):
    chunks = list(job_logs._stream(quiet_log(b"z" * 3000), cap=1024, seconds=30))
    assert b"".join(chunks[:-1]) == b"z" * 1024
    assert chunks[-1].startswith(b"\n[gangweb: log cut at 1024 bytes")
