"""Benchmark (issue 32 row 3): does one user holding every long-poll the rules allow slow anyone else down?

    python -m bench.wait_exhaustion [--samples 200] [--attackers 64] [--uncapped]

Standalone. A fresh SQLite database in a temporary folder (migrated), gunicorn as the chart runs it (gangweb.wsgi,
`--workers 2 --worker-class gthread --threads 16`, DEBUG off, GANGWEB_WAITS_PER_USER / GANGWEB_WAITS_PER_PROCESS as
the chart sets them: 4 and 8) on a free loopback port. Phases, one after the other:

- idle: a victim user (their own job list, 50 jobs) asks `GET /api/v1/jobs/?limit=50` and `GET /healthz`
  `--samples` times each, one request at a time;
- attack: the same, while the attacker (one user, GANGWEB_TOKENS_PER_USER tokens, one unfinished job) runs
  `--attackers` threads, each looping `GET /api/v1/jobs/wait/?ids=<job>&after=<cursor>&timeout=25` over its tokens
  in turn; a 429 is retried after 0.5 s (the attacker ignores Retry-After).

With `--uncapped` a third phase repeats the attack with both wait caps lifted (1000), which is what the per-token
cap of 4753bd4 amounted to for a user with 4 tokens. Prints JSON: p50/p99/max seconds per phase and endpoint, the
waits the attacker held (200 answers after a real wait) and refused (429), and the load average before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
from cryptography.fernet import Fernet

from localcluster.processes import free_port

from .common import bench_fixtures, percentile
from .stack import REPO, log, wait_for

CHART_WEB = ["--workers", "2", "--worker-class", "gthread", "--threads", "16"]  # charts/gangweb/values.yaml web.*
CHART_CAPS = {"GANGWEB_WAITS_PER_USER": "4", "GANGWEB_WAITS_PER_PROCESS": "8"}


def _timed(session: requests.Session, url: str, samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        started = time.monotonic()
        r = session.get(url, timeout=120)
        out.append(time.monotonic() - started)
        assert r.status_code == 200, (url, r.status_code, r.text[:200])
    return out


def _summary(values: list[float]) -> dict:
    return {"p50_s": round(percentile(values, 50), 4), "p99_s": round(percentile(values, 99), 4),
            "max_s": round(max(values), 4), "n": len(values)}


def _victim(base: str, token: str, samples: int) -> dict:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return {"job_list": _summary(_timed(session, f"{base}/api/v1/jobs/?limit=50", samples)),
            "healthz": _summary(_timed(requests.Session(), f"{base}/healthz", samples))}


def _phase(base: str, victim_token: str, samples: int, attack: dict | None, warmup: float = 5) -> dict:
    stop, held, refused, errors = threading.Event(), [0], [0], []

    def attacker(index: int) -> None:
        session = requests.Session()
        cursor = ""
        n = index
        while not stop.is_set():
            token = attack["tokens"][n % len(attack["tokens"])]
            n += 1
            try:
                r = session.get(f"{base}/api/v1/jobs/wait/", params={"ids": attack["job"], "after": cursor,
                                                                      "timeout": 25},
                                headers={"Authorization": f"Bearer {token}"}, timeout=60)
            except requests.RequestException as exc:
                errors.append(type(exc).__name__)
                continue
            if r.status_code == 429:
                refused[0] += 1
                stop.wait(0.5)
            elif r.status_code == 200:
                cursor = r.json()["cursor"]
                held[0] += bool(cursor) and r.json()["timed_out"]
            else:
                errors.append(str(r.status_code))

    threads = [threading.Thread(target=attacker, args=(i,), daemon=True) for i in range(attack["threads"])] \
        if attack else []
    for t in threads:
        t.start()
    if threads:
        time.sleep(warmup)  # every wait the rules allow is held before the victim starts
    load_before = os.getloadavg()
    result = _victim(base, victim_token, samples)
    result["load_average_1m"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    stop.set()
    if attack:
        result.update(attacker_waits_completed=held[0], attacker_refused_429=refused[0],
                      attacker_errors=sorted(set(errors))[:5])
    return result


def _serve(env: dict, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gunicorn", "gangweb.wsgi", "--bind", f"127.0.0.1:{port}",
                             *CHART_WEB, "--timeout", "60"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--attackers", type=int, default=64)
    parser.add_argument("--uncapped", action="store_true", help="also measure with the wait caps lifted")
    parser.add_argument("--warmup", type=float, default=5, help="seconds the attack runs before the victim asks")
    parser.add_argument("--uncapped-samples", type=int, default=10,
                        help="samples of the uncapped phase (each may wait for a long-poll to end: up to 25 s)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="gangweb-bench-wait-exhaustion-"))
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}", "GANGWEB_STATE_DIR": str(workdir),
           "DEBUG": "0", "GANGWEB_TESTING": "0", "SECRET_KEY": os.urandom(32).hex(),
           "GANGWEB_ENCRYPTION_KEYS": Fernet.generate_key().decode(), "GANGWEB_WAIT_POLL_SECONDS": "1",
           "GANGWEB_LOGIN_THROTTLE": "0", "DJANGO_SETTINGS_MODULE": "gangweb.settings"}
    env.pop("REDIS_URL", None)
    os.environ.update({k: v for k, v in env.items() if k != "GANGWEB_TESTING"})
    os.environ.pop("GANGWEB_TESTING", None)
    import django
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    from scheduling.services.access import tokens as token_service
    from scheduling.services.jobs import lifecycle as job_service

    owner, version, queue, cluster = bench_fixtures("-exhaust")
    jobs, _ = job_service.submit_bulk(owner, [{"name": f"v-{i}", "template": version.template.name,
                                               "queue": queue.name, "cluster": cluster.name} for i in range(50)])
    victim = owner  # the victim lists these 50 jobs with their own token
    owner.api_token = None
    _, victim_token = token_service.create(owner, {"name": "victim", "actions": ["read"]})
    attacker = get_user_model().objects.create_superuser("attacker", "a@example.com", os.urandom(8).hex())
    attacker.api_token = None
    [target], _ = job_service.submit_bulk(attacker, [{"name": "never-ends", "template": version.template.name,
                                                      "queue": queue.name, "cluster": cluster.name}])
    tokens = [token_service.create(attacker, {"name": f"t{i}", "actions": ["read"]})[1]
              for i in range(token_service.tokens_per_user())]
    attack = {"job": target.pk, "tokens": tokens, "threads": args.attackers}
    log(f"wait exhaustion: victim {victim.username}, attacker with {len(tokens)} tokens, {args.attackers} threads")

    results = {"gunicorn": CHART_WEB, "caps": CHART_CAPS, "samples": args.samples, "phases": {}}
    runs = [("idle", CHART_CAPS, None, args.samples), ("attack", CHART_CAPS, attack, args.samples)]
    if args.uncapped:
        runs.append(("attack_uncapped", {"GANGWEB_WAITS_PER_USER": "1000", "GANGWEB_WAITS_PER_PROCESS": "1000"},
                     attack, args.uncapped_samples))
    try:
        for name, caps, attacking, samples in runs:
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            web = _serve({**env, **caps}, port)
            try:
                wait_for(lambda b=base: requests.get(f"{b}/healthz", timeout=2).status_code == 200, 60, "gunicorn")
                log(f"wait exhaustion: phase {name}")
                results["phases"][name] = _phase(base, victim_token, samples, attacking, args.warmup)
                log(f"wait exhaustion: {name}: {json.dumps(results['phases'][name])}")
            finally:
                web.terminate()
                web.wait(timeout=60)
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
