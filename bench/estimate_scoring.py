"""The estimate benchmark's scoring: the fits-aware baseline, the spread over seeds, and the p90's calibration
(fit on some seeds, report on others). Used by bench/estimate.py; pure."""
from __future__ import annotations

import math
import statistics

from scheduling.queueing import estimate as model


def _ratio(num: float | None, den: float | None) -> float | None:
    return round(num / den, 3) if num is not None and den else None


def fits_aware_figures(asked, fits_baseline, fits, submitted, started) -> dict:
    """The estimate against the fits-aware baseline (module docstring), errors in minutes, shares in percent.

    `asked`: {job id: Estimate}; `fits_baseline`: {job id: predicted wait s or None}; `fits`: {job id: it fit at
    submit}; `submitted`, `started`: {job id: s}. Jobs without a p50, a baseline or a start are left out. `all`:
    every compared job; `waited`: those that did not fit at submit. `fits_check_disagrees`: jobs whose fit at
    submit (the bench's pass) and the estimator's "now" disagree (0 expected: the same pass on the same state)."""
    groups = {"all": {"est": [], "base": [], "in_p50": 0, "in_p90": 0, "waits": []},
              "waited": {"est": [], "base": [], "in_p50": 0, "in_p90": 0, "waits": []}}
    disagree, ranks, starts = 0, [], []
    for jid, est in asked.items():
        disagree += jid in fits and fits[jid] != (est.status == model.NOW)
        if est.p50 is None or fits_baseline.get(jid) is None or jid not in started:
            continue
        wait = started[jid] - submitted[jid]
        if not fits[jid] and est.starts:
            ranks.append([sum(1 for s in est.starts if s < wait - 1e-6), len(est.starts)])
            starts.append([round(wait, 1), [round(s, 1) for s in est.starts]])
        for name in ("all",) if fits[jid] else ("all", "waited"):
            g = groups[name]
            g["est"].append(abs(est.p50 - wait))
            g["base"].append(abs(fits_baseline[jid] - wait))
            g["in_p50"] += wait <= est.p50 + 1e-6
            g["in_p90"] += wait <= est.p90 + 1e-6
            g["waits"].append(wait)
    out: dict = {"fits_check_disagrees": disagree,
                 "goal": "on the jobs that waited: estimate error <= 0.5 x fits-aware baseline error, "
                         "p90 coverage 88-92 %"}
    for name, g in groups.items():
        n = len(g["est"])
        est_mae, base_mae = median_min(g["est"]), median_min(g["base"])
        out[name] = {"jobs": n, "median_wait_min": median_min(g["waits"]),
                     "estimate_p50_median_abs_error_min": est_mae, "baseline_median_abs_error_min": base_mae,
                     "error_ratio": _ratio(est_mae, base_mae),
                     "p50_coverage_pct": round(100 * g["in_p50"] / n, 1) if n else None,
                     "p90_coverage_pct": round(100 * g["in_p90"] / n, 1) if n else None}
    out["waited_ranks"] = ranks
    out["_waited_starts"] = starts  # [real wait, replays' starts], for --starts only (not in the figures)
    w = out["waited"]
    out["ratio_goal_met"] = bool(w["error_ratio"] is not None and w["error_ratio"] <= 0.5)
    out["p90_goal_met"] = bool(w["p90_coverage_pct"] is not None and 88 <= w["p90_coverage_pct"] <= 92)
    return out


SPREAD_FIGURES = {  # name in the summary: path in one seed's figures
    "naive_ratio_all": ("error_ratio",), "naive_ratio_waited": ("waiting_jobs", "error_ratio"),
    "fits_aware_ratio_all": ("fits_aware", "all", "error_ratio"),
    "fits_aware_ratio_waited": ("fits_aware", "waited", "error_ratio"),
    "p90_coverage_all_pct": ("fits_aware", "all", "p90_coverage_pct"),
    "p90_coverage_waited_pct": ("fits_aware", "waited", "p90_coverage_pct"),
    "p50_coverage_waited_pct": ("fits_aware", "waited", "p50_coverage_pct"),
    "estimate_error_waited_min": ("fits_aware", "waited", "estimate_p50_median_abs_error_min"),
    "fits_aware_baseline_error_waited_min": ("fits_aware", "waited", "baseline_median_abs_error_min"),
    "waited_jobs": ("fits_aware", "waited", "jobs"),
    "all_waits_variant_ratio_all": ("fits_aware_all_waits", "all", "error_ratio"),
    "all_waits_variant_ratio_waited": ("fits_aware_all_waits", "waited", "error_ratio"),
    "all_waits_variant_baseline_error_waited_min": ("fits_aware_all_waits", "waited",
                                                    "baseline_median_abs_error_min"),
}


def spread(results: list[dict]) -> dict:
    """{figure: {"min", "median", "max"}} over several seeds' figures (`SPREAD_FIGURES`), plus whether the
    issue 35 goals hold at every seed and at the median."""
    out: dict = {"seeds": [r.get("seed") for r in results]}
    for name, path in SPREAD_FIGURES.items():
        values = []
        for r in results:
            v = r
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            if v is not None:
                values.append(v)
        out[name] = ({"min": min(values), "median": round(statistics.median(values), 3), "max": max(values)}
                     if values else None)
    ratio, p90 = out["fits_aware_ratio_waited"], out["p90_coverage_waited_pct"]
    out["ratio_goal_met_at_median"] = bool(ratio and ratio["median"] <= 0.5)
    out["ratio_goal_met_every_seed"] = bool(ratio and ratio["max"] <= 0.5)
    out["p90_goal_met_at_median"] = bool(p90 and 88 <= p90["median"] <= 92)
    out["p90_goal_met_every_seed"] = bool(p90 and 88 <= p90["min"] and p90["max"] <= 92)
    return out


def covered(ranks: list[list[int]], level: float) -> float | None:
    """Percent of jobs whose real start is at or before the replays' nearest-rank quantile at `level`: from each
    job's [replays that started it strictly earlier than it really started, replays], the start is covered when
    fewer than ceil(level x replays) replays are earlier. None for no jobs."""
    if not ranks:
        return None
    return round(100 * sum(1 for below, n in ranks if below < max(1, math.ceil(level * n))) / len(ranks), 1)


def fit_level(ranks: list[list[int]], goal: float = 90.0) -> float:
    """The lowest quantile level (a multiple of 0.005 from 0.5 to 1) at which `covered` reaches `goal` percent
    over `ranks` (the fitting seeds' waited jobs); 1.0 when none below does."""
    for k in range(100, 201):
        level = k / 200
        got = covered(ranks, level)
        if got is not None and got >= goal:
            return level
    return 1.0


def calibrate(fit: list[dict], report: list[dict]) -> dict:
    """Fit the p90 level on the `fit` seeds' runs and report coverage at it on the `report` seeds' (each a run's
    figures with `fits_aware.waited_ranks`): {"level", "fit_seeds", "report_seeds", per-seed coverage at 0.9 and
    at the level, and on the report seeds min / median / max and whether 88-92 % holds at the median and every
    seed}."""
    ranks = [r for run in fit for r in run["fits_aware"]["waited_ranks"]]
    level = fit_level(ranks)

    def per_seed(runs):
        return [{"seed": run.get("seed"), "at_0.9": covered(run["fits_aware"]["waited_ranks"], 0.9),
                 "at_level": covered(run["fits_aware"]["waited_ranks"], level)} for run in runs]

    reported = per_seed(report)
    values = [r["at_level"] for r in reported if r["at_level"] is not None]
    out = {"level": level, "fit_seeds": per_seed(fit), "fit_pooled_at_level": covered(ranks, level),
           "report_seeds": reported,
           "report_p90_coverage_waited_pct": ({"min": min(values), "median": round(statistics.median(values), 1),
                                               "max": max(values)} if values else None)}
    spread_ = out["report_p90_coverage_waited_pct"]
    out["p90_goal_met_at_median"] = bool(spread_ and 88 <= spread_["median"] <= 92)
    out["p90_goal_met_every_seed"] = bool(spread_ and 88 <= spread_["min"] and spread_["max"] <= 92)
    return out


def z_needed(wait: float, starts: list[float], level: float = model.P90_LEVEL) -> float:
    """The smallest z at which `model.upper_bound(starts, level, z)` is at least `wait` (seconds): -inf when the
    replays' quantile at `level` already is, inf when it takes more than any z (the replays all agree)."""
    if wait <= model.quantile(starts, level) + 1e-6:
        return -math.inf
    logs = [math.log(max(s, model.LOG_FLOOR)) for s in starts]
    sd = statistics.pstdev(logs)
    if sd < 1e-9:  # as model.upper_bound: replays that agree are not widened
        return math.inf
    return (math.log(max(wait, model.LOG_FLOOR)) - statistics.fmean(logs)) / sd


def calibrate_z(fit: list[dict], report: list[dict], goal: float = 90.0) -> dict:
    """Fit `model.P90_Z` on the `fit` seeds' waited jobs and report the p90 coverage it gives on the `report`
    seeds'. Each item: a `--starts` file, {"seed", "waited": [[real wait s, [replay starts s]], ...]}. The z is
    the pooled fitting jobs' nearest-rank `goal` percentile of `z_needed`, rounded up to 0.01. Returns {"z",
    "fit_pooled_pct", "fit_seeds", "report_seeds": [{"seed", "jobs", "at_0.9", "at_z"}], "report_spread", goals}."""
    pooled = [z_needed(w, st) for run in fit for w, st in run["waited"]]
    q = model.quantile(pooled, goal / 100)  # -inf: the replays' own quantile already holds `goal`
    z = math.ceil(q * 100) / 100 if math.isfinite(q) else (-math.inf if q < 0 else math.inf)

    def per_seed(runs):
        out = []
        for run in runs:
            needed = [z_needed(w, st) for w, st in run["waited"]]
            n = len(needed)
            out.append({"seed": run["seed"], "jobs": n,
                        "at_0.9": round(100 * sum(1 for x in needed if x == -math.inf) / n, 1) if n else None,
                        "at_z": round(100 * sum(1 for x in needed if x <= z + 1e-9) / n, 1) if n else None})
        return out

    reported = per_seed(report)
    values = [r["at_z"] for r in reported if r["at_z"] is not None]
    spread_ = ({"min": min(values), "median": round(statistics.median(values), 1), "max": max(values)}
               if values else None)
    fit_pct = round(100 * sum(1 for x in pooled if x <= z + 1e-9) / len(pooled), 1)
    return {"z": z if math.isfinite(z) else None, "fit_pooled_pct": fit_pct,
            "fit_seeds": per_seed(fit), "report_seeds": reported, "report_p90_coverage_waited_pct": spread_,
            "p90_goal_met_at_median": bool(spread_ and 88 <= spread_["median"] <= 92),
            "p90_goal_met_every_seed": bool(spread_ and 88 <= spread_["min"] and spread_["max"] <= 92)}


def median_min(values: list[float]) -> float | None:
    """The median of `values` (seconds) in minutes, to two places; None for none."""
    return round(statistics.median(values) / 60.0, 2) if values else None
