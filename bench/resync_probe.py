"""One resync of one cluster in a process of its own, for `bench.resync_scale`: its figures as JSON on stdout.

    python bench/resync_probe.py --cluster rs-1000 [--code DIR]

Run by path (not `-m`), so `--code` may name another checkout of gangweb (e.g. an older commit, for a before/after
comparison): its `scheduling` and `gangweb` packages are imported instead of this tree's. The environment carries the
database and settings (`bench.run_all._configure`). The process imports Django and gangweb, reads its resident set
(VmRSS) as the baseline, runs `scheduling.reconcile.resync.resync_cluster` over every job of the cluster (no
`max_jobs` / time bound), and reports:
{"jobs", "acted", "failed", "seconds", "cpu_s", "requests", "by_request", "bytes_listed", "rss_before_mib",
"peak_rss_mib"}. `cpu_s` is the process's user + system CPU seconds during the resync (less sensitive to the
machine's load than the wall seconds).
`peak_rss_mib` is the process's VmHWM (peak resident set, /proc/self/status) at the end: the resync's peak, since
nothing before it allocates as much. `bytes_listed` counts the response bytes the Kubernetes client read (urllib3's
`HTTPResponse.read`, which every response body goes through, preloaded or streamed).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _proc_mib(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _count_bytes() -> list[int]:
    """Wrap urllib3's HTTPResponse.read so every body byte read is counted; returns the one-cell counter."""
    import urllib3.response

    counter = [0]
    original = urllib3.response.HTTPResponse.read

    def read(self, *args, **kwargs):
        data = original(self, *args, **kwargs)
        counter[0] += len(data or b"")
        return data

    urllib3.response.HTTPResponse.read = read
    return counter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cluster", required=True, help="the Cluster row's name")
    parser.add_argument("--code", default=str(Path(__file__).resolve().parent.parent),
                        help="the gangweb checkout whose resync runs (default: this one)")
    args = parser.parse_args()
    code = str(Path(args.code).resolve())
    sys.path.insert(0, code)
    os.chdir(code)
    import django

    django.setup()
    from django.core.cache import cache

    from scheduling.kube import limit_ranges, objects
    from scheduling.models import Cluster, GangJob
    from scheduling.reconcile import resync

    cluster = Cluster.objects.get(name=args.cluster)
    # Every round starts from the same cache: every namespace's LimitRanges unread (a pass reads each once).
    namespaces = set(GangJob.objects.filter(cluster=cluster).values_list("namespace", flat=True).distinct())
    cache.delete_many([limit_ranges.cache_key(cluster.pk, ns) for ns in namespaces])
    counter = _count_bytes()
    objects.requests.reset()
    rss_before = _proc_mib("VmRSS")
    t0, cpu0 = time.monotonic(), time.process_time()
    stats = resync.resync_cluster(cluster, max_jobs=10**9, budget_seconds=10**6)
    seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
    out = {"jobs": stats.get("jobs", 0), "acted": stats.get("acted", 0), "failed": stats.get("failed", 0),
           "seconds": round(seconds, 3), "cpu_s": round(cpu, 3), "requests": objects.requests.total(),
           "by_request": dict(sorted(objects.requests.counts.items())), "bytes_listed": counter[0],
           "rss_before_mib": rss_before, "peak_rss_mib": _proc_mib("VmHWM")}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
