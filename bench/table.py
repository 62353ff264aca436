"""The Performance table of docs/performance.md, rendered from a results document (bench/results/latest.json).

``python -m bench.table`` prints it, ``python -m bench.table --write`` rewrites it from ``results/latest.json``;
``run_all`` rewrites it after a full run, between the ``bench:table`` markers of each page of ``TABLE_PAGES``
(docs/performance.md and bench/README.md).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .common import RESULTS_DIR

START, END = "<!-- bench:table:start -->", "<!-- bench:table:end -->"
TABLE_PAGES = ("docs/performance.md", "bench/README.md")  # relative to the repository


def _ok(flag) -> str:
    return "yes" if flag else "**no**"


def ratio_of(value: float, base: float) -> float:
    """value / base to 1 decimal (0.0 when base is 0)."""
    return round(value / base, 1) if base else 0.0


def rows(results: dict) -> list[tuple[str, str, str, str, str]]:
    """(benchmark, figure, baseline, ratio, goal met) per line of the table."""
    out = []
    s = results.get("submit") or {}
    if "users" in s:
        out += _submit_user_rows(s)
    elif "single" in s:
        q = s["queries"]
        out.append(("Submit, single (8 clients)",
                    f"{s['single']['jobs_per_s']} jobs/s, p50 {s['single']['p50_ms']} ms, p99 {s['single']['p99_ms']} "
                    f"ms, {q['single']} queries",
                    f"{s['baseline_single']['jobs_per_s']} rows/s, p50 {s['baseline_single']['p50_ms']} ms "
                    "(DRF, 1 INSERT)", f"{s['single_ratio']}x (goal >= 0.5x)", _ok(s["single_ok"])))
        out.append((f"Submit, bulk ({s['bulk_threads']} clients x {s['bulk_batch']})",
                    f"{s['bulk']['jobs_per_s']} jobs/s, p50 {s['bulk']['p50_ms']} ms/request, {q['bulk']} queries",
                    f"{s['baseline_bulk']['jobs_per_s']} rows/s (DRF, bulk INSERT)",
                    f"{s['bulk_ratio']}x (goal >= 2,000 jobs/s)", _ok(s["bulk_ok"])))
    w = results.get("running") or {}
    if "submit_to_running" in w:
        run, bind, cl = w["submit_to_running"], w["scheduler_gang_bind_watch"], w["scheduler_gang_bind"]
        out.append((f"Submit to Running, {w['jobs']} jobs x {w['pods_per_job']} pods at {w['rate_per_s']:g}/s",
                    f"POST to Running recorded: p50 {run['p50_ms']} ms, p99 {run['p99_ms']} ms "
                    f"({w['running']}/{w['jobs']} Running)",
                    f"kube-scheduler gang bind p50 {bind['p50_ms']} ms, p99 {bind['p99_ms']} ms (watch; cluster "
                    f"timestamps p50 {cl['p50_ms']} ms, p99 {cl['p99_ms']} ms)",
                    f"{ratio_of(run['p50_ms'], bind['p50_ms'])}x at p50 (no goal)", "-"))
    r = results.get("reconcile") or {}
    if "saturated" in r:
        sat, serial, g = r["saturated"], r.get("serial") or {}, r["gangweb"]
        out.append((f"Reconcile, {r['jobs']} jobs x {r['pods_per_job']} pods",
                    f"{g['jobs_per_s']} jobs/s, submit-to-dispatched p50 {g['submit_to_dispatched_p50_ms']} ms, "
                    f"p99 {g['submit_to_dispatched_p99_ms']} ms",
                    f"{sat['jobs_per_s']} jobs/s ({sat['clients']} concurrent raw clients, saturated); serial loop "
                    f"{serial.get('jobs_per_s', '-')} jobs/s; "
                    + _load([(r.get("load_average") or {}).get(k) for k in ("before", "after")]),
                    f"{r['ratio']}x (rounds {r.get('ratio_min')}-{r.get('ratio_max')}; goal >= 0.8x)", _ok(r["ok"])))
    elif "gangweb" in r:  # a results document from before the saturated baseline
        out.append((f"Reconcile, {r['jobs']} jobs x {r['pods_per_job']} pods",
                    f"{r['gangweb']['jobs_per_s']} jobs/s, submit-to-dispatched p50 "
                    f"{r['gangweb']['submit_to_dispatched_p50_ms']} ms",
                    f"{r['baseline']['jobs_per_s']} jobs/s (create loop)", f"{r['ratio']}x (goal >= 0.8x)",
                    _ok(r["ok"])))
    z = results.get("resync") or {}
    if "measured" in z:
        m, b = z["measured"], z["baseline"]
        alloc = (f"; peak alloc {m['peak_alloc_mib']} MiB ({z['alloc_kib_per_job']} KiB/job)"
                 if "peak_alloc_mib" in m else "")
        took = f", {m['seconds']} s" if "seconds" in m else ""
        out.append(("Resync, nothing changed", f"{m['requests']} requests at {m['jobs']:,} jobs "
                    f"(max {m['max_per_kind']}/kind{took}){alloc}", f"{b['requests']} requests at {b['jobs']:,} jobs",
                    f"{z['ratio']}x (goal: <= {z.get('goal_max_per_kind', 2)}/kind, a page of 500 each)",
                    _ok(z["ok"])))
    rs = results.get("resync_scale") or {}
    for size, entry in sorted((rs.get("sizes") or {}).items(), key=lambda kv: int(kv[0])):
        n = entry.get("new") or {}
        if "peak_rss_mib" in n:
            out.append((f"Resync by size, {int(size):,} in-sync jobs",
                        f"{n['seconds']['median']} s, {n['ms_per_job']['median']} ms/job, peak RSS "
                        f"{n['peak_rss_mib']['median']} MiB, {n['requests']['median']} requests",
                        "", "", ""))
    if rs.get("goals"):
        g = rs["goals"]
        out.append(("Resync by size, largest against smallest", f"peak RSS x{g['rss_ratio']}, ms/job "
                    f"x{g['ms_per_job_ratio']}", "", "goal <= 1.2x RSS, <= 1.5x ms/job",
                    _ok(g["rss_ok"] and g["ms_per_job_ok"])))
    p = results.get("pages") or {}
    if "seed_s" in p and "active" in p:
        out.append((f"Seed {p['jobs']:,} jobs ({p['active']:,} active), {p['queues']:,} queues", f"{p['seed_s']} s",
                    "", "", ""))
    for label, f in (p.get("pages") or {}).items():
        p99 = f", p99 {f['p99_ms']} ms" if "p99_ms" in f else ""
        goal = "goal p50 <= 100 ms, p99 <= 300 ms, same queries" if "goal_p99_ms" in p else \
            "goal p50 <= 100 ms, same queries"
        out.append((f"Page, superuser: {label}", f"p50 {f['p50_ms']} ms{p99}, {f['queries']} queries",
                    f"p50 {f['baseline_p50_ms']} ms, {f['baseline_queries']} queries at {p['baseline_jobs']:,} jobs",
                    f"{f['ratio']}x ({'not a goal: what keyset pages avoid' if f.get('informational') else goal})",
                    "n/a" if f.get("informational") else _ok(f["ok"])))
    out += _page_user_rows(p)
    r = p.get("retention")
    if r:
        out.append(("Retention: delete finished jobs older than N days",
                    f"{r['jobs']:,} jobs in {r['seconds']} s ({r['jobs_per_s']:,}/s), longest batch "
                    f"{r['longest_batch_ms']} ms", "", "", ""))
    m = results.get("memory") or {}
    if "loaded" in m:
        for kind in ("web", "worker"):
            a, b = m["loaded"][kind], m["empty"][kind]
            out.append((f"Memory: {kind} RSS, {m['jobs']:,} active jobs",
                        f"{a['total_mib']} MiB in {a['processes']} processes (largest {a['largest_child_mib']} MiB)",
                        f"{b['total_mib']} MiB with no jobs", f"{m[kind + '_ratio']}x", "-"))
    w = results.get("watch_churn") or {}
    if "lag" in w:
        lag, proc = w["lag"], w["watcher"]
        out.append((f"Watch under churn, {w['jobs']} running gangs x {w['pods'] // max(1, w['jobs'])} pods",
                    f"change to API p50 {lag['p50_s']} s, p99 {lag['p99_s']} s at {w['updates_per_s']} pod updates/s; "
                    f"watcher {proc['cpu_pct']} % CPU, RSS {proc['rss_start_mib']} -> {proc['rss_end_mib']} MiB in "
                    f"{w['window_s']} s; {w['per_update']['job_row_writes']} job-row writes per update",
                    f"goal rate {w['goal_rate']} updates/s", f"p99 {lag['p99_s']} s (goal <= {w['goal_p99_s']} s)",
                    _ok(w["ok"])))
    rp = results.get("repair") or {}
    if "p99_s" in rp:
        out.append((f"Repair after a hand edit, {rp['edits']} edits (minCount, minResources, KAI subGroup, deletion)",
                    f"{rp['repaired']}/{rp['edits']} repaired, p50 {rp['p50_s']} s, p99 {rp['p99_s']} s",
                    f"no resync (the watch alone); {_load([rp.get('load_average')])}",
                    f"p99 {rp['p99_s']} s (goal <= {rp['goal_p99_s']} s)", _ok(rp["ok"])))
    out += _issue36_rows(results)
    return out


def _submit_user_rows(s: dict) -> list[tuple[str, str, str, str, str]]:
    """Submit rows per user (bench/submit.py's ``users``): the goals judged on ``goal_user`` (the team submitter),
    the others reported; each with its rounds' spread and the run's load average."""
    out = []
    load = _load([s.get("load_average_before"), s.get("load_average_after")])
    goal_user = s.get("goal_user", "team submitter")
    for user, u in sorted(s["users"].items(), key=lambda kv: kv[0] != goal_user):
        judged = user == goal_user
        one, bulk, sp = u["single"], u["bulk"], u["single"].get("spread_ratio") or {}
        out.append((f"Submit, single ({s['threads']} clients x {s['single_rounds']} rounds), {user}",
                    f"{one['jobs_per_s']} jobs/s, p50 {one['p50_ms']} ms, p99 {one['p99_ms']} ms, "
                    f"{u['queries']['single']} queries",
                    f"{s['baseline_single']['jobs_per_s']} rows/s, p50 {s['baseline_single']['p50_ms']} ms (DRF, 1 "
                    f"INSERT); {load}",
                    f"{u['single_ratio']}x (rounds {sp.get('min')}-{sp.get('max')}; goal >= 0.5x"
                    + (")" if judged else ", reported)"), _ok(s["single_ok"]) if judged else "-"))
        spb = bulk.get("spread_jobs_per_s") or {}
        out.append((f"Submit, bulk ({s['bulk_threads']} clients x {s['bulk_batch']}, {s['bulk_rounds']} rounds), "
                    f"{user}", f"{bulk['jobs_per_s']} jobs/s (rounds {spb.get('min')}-{spb.get('max')}), p50 "
                    f"{bulk['p50_ms']} ms/request, {u['queries']['bulk']} queries",
                    f"{s['baseline_bulk']['jobs_per_s']} rows/s (DRF, bulk INSERT); {load}",
                    f"{u['bulk_ratio']}x (goal >= 2,000 jobs/s" + (")" if judged else ", reported)"),
                    _ok(s["bulk_ok"]) if judged else "-"))
    return out


def _page_user_rows(p: dict) -> list[tuple[str, str, str, str, str]]:
    """In-process page rows per user (bench/pages.py's ``users``): the team viewer judged on the page goal, the
    superuser reported; each with its rounds' spread of p50s and the load average around the rounds."""
    u = p.get("users") or {}
    load = _load([u.get("load_average_before"), u.get("load_average_after")])
    out = []
    for label, by_user in (u.get("pages") or {}).items():
        for user, f in sorted(by_user.items(), key=lambda kv: kv[0] == "superuser"):
            team = user != "superuser"
            sp = f.get("spread_round_p50_ms") or {}
            out.append((f"Page, per user ({p['jobs']:,} jobs): {label}, {user}",
                        f"p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms (n={f['samples']}, round p50s "
                        f"{sp.get('min')}-{sp.get('max')}), {f['queries']} queries", load,
                        "goal p50 <= 100 ms, p99 <= 300 ms" + ("" if team else " (reported)"),
                        _ok(f["ok"]) if team else "-"))
    return out


def _load(values: list) -> str:
    """"load a-b" of 1-minute load averages (lists as `os.getloadavg()` gives them)."""
    ones = [v[0] for v in values if v]
    return f"load {min(ones)}-{max(ones)}" if ones else "load ?"


def _issue36_rows(results: dict) -> list[tuple[str, str, str, str, str]]:
    """Rows of issue 36's benchmarks: pages over HTTP per seed, user and page kind (goals judged on the team users),
    submit to Running against a raw client, the watch replay; each figure with the load it was measured at."""
    out = []
    h = results.get("http_pages") or {}
    for state, seed in (h.get("seeds") or {}).items():
        rounds = seed["rounds"]
        load = _load([r["load_average_before"] for r in rounds] + [r["load_average_after"] for r in rounds])
        busy = f"busy {min(r['machine_busy_pct'] for r in rounds)}-{max(r['machine_busy_pct'] for r in rounds)} %"
        for user, kinds in seed["users"].items():
            for kind, f in kinds.items():
                if "warm" not in f:
                    continue
                w, c, sp = f["warm"], f["cold"], f["spread_round_p50_ms"]
                team = user != "superuser"
                out.append((f"HTTP page ({state} table, {h['jobs']:,} jobs): {kind}, {user}",
                            f"warm p50 {w['p50_ms']} ms, p99 {w['p99_ms']} ms (n={w['n']}, round p50s "
                            f"{sp['min']}-{sp['max']}); cold p50 {c['p50_ms']} ms, max {c['max_ms']} ms (n={c['n']})",
                            f"{load}, {busy}", "goal p50 <= 100 ms, p99 <= 300 ms" + ("" if team else " (reported)"),
                            _ok(f["ok"]) if team else "-"))
    r = results.get("running_raw") or {}
    if "sides" in r:
        g, raw, sp = r["sides"]["gangweb"], r["sides"]["raw client"], r["ratio_spread"]
        loads = [x[side]["load_average_before"] for x in r["rounds"] for side in ("gangweb", "raw client")]
        out.append((f"Submit to Running against a raw client, {len(r['rounds'])} rounds x {r['jobs_per_round']} jobs "
                    f"x {r['pods_per_job']} pods at {r['rate_per_s']:g}/s",
                    f"POST to Running recorded: p50 {g['p50_ms']} ms, p99 {g['p99_ms']} ms",
                    f"raw client, create to last pod Running: p50 {raw['p50_ms']} ms, p99 {raw['p99_ms']} ms; "
                    f"{_load(loads)}", f"{r['ratio_p50']}x (rounds {sp['min']}-{sp['max']}; goal <= "
                    f"{r['goal_ratio']}x on an idle machine)", _ok(r["ok"])))
    v = results.get("watch_replay") or {}
    for x in v.get("replays") or []:
        lag = x["lag"]
        out.append((f"Watch replay, {v['jobs']} gangs x 8 pods, asked {x['rate_asked']} updates/s",
                    f"event to recorded state p50 {lag['p50_s']} s, p99 {lag['p99_s']} s at {x['rate_reached']} "
                    f"updates/s; {x['lost']} lost, {x['rows_not_matching_cache']} rows wrong",
                    f"{_load([x['load_average_before'], x['load_average_after']])}, busy {x['machine_busy_pct']} %",
                    f"p99 {lag['p99_s']} s (goal <= {v['goal_p99_s']} s at >= {v['goal_rate']}/s)", _ok(x["ok"])))
    return out


def render(document: dict) -> str:
    """Markdown table plus a line saying when and where it was measured."""
    lines = ["| Benchmark | gangweb | Baseline (same run) | Ratio (goal) | Goal met |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows(document["results"])]
    machine = document.get("machine", {})
    lines.append("")
    lines.append(f"Measured {document.get('generated_at', '?')} on {machine.get('cpus', '?')} shared cores "
                 f"(Python {machine.get('python', '?')}); the whole run took {document.get('total_seconds', 0):.0f} s. "
                 "Failed or skipped benchmarks: "
                 + (", ".join(k for k, v in document["results"].items() if "error" in v) or "none") + ".")
    return "\n".join(lines)


def update_readme(readme: Path, document: dict) -> bool:
    """Replace the text between the markers in `readme`; False when the markers are missing."""
    text = readme.read_text()
    if START not in text or END not in text:
        return False
    new = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: f"{START}\n{render(document)}\n{END}", text,
                 flags=re.S)
    readme.write_text(new)
    return True


if __name__ == "__main__":
    _document = json.loads((RESULTS_DIR / "latest.json").read_text())
    if "--write" in sys.argv[1:]:
        _repo = RESULTS_DIR.parent.parent
        for _page in TABLE_PAGES:
            print(f"{_page}: {'rewritten' if update_readme(_repo / _page, _document) else 'no markers, left alone'}")
    else:
        print(render(_document))
    sys.exit(0)
