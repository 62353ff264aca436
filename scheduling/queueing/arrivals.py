"""Jobs submitted after the question: the arrival model of the start estimate's replay (queueing/estimate.py).

A job that waits is overtaken by jobs submitted while it waits: a job of higher priority in its own queue (KAI's
line order: priority, then time queued), a job of a queue further below its fair share (KAI serves queues lowest
allocated / fair share first), and any smaller job that fits room freed before the waiting gang's whole room is
free (KAI keeps no reservation for a large gang). The replay cannot know these jobs, but it can expect them at the
rate they came lately, in the mix they came in.

**The model** (pure: plain data in, plain data out), from gangweb's own job rows of the last `window` seconds
(their queue, priority, requests, template and submit time):

- per queue, arrivals form a Poisson process of unknown rate; having seen `n` arrivals in `window` seconds, the
  rate is drawn, once per replay, from its posterior under Jeffreys' prior, Gamma(shape n + 1/2, rate `window`)
  (mean (n + 1/2) / window: a queue that submitted 6 jobs in the last hour submits 6.5 an hour on average in a
  replay, and fewer or more in others, so the p90 holds the uncertainty of the rate itself, not only the Poisson
  scatter around it);
- each arrival is a copy of one of the queue's recent arrivals drawn uniformly (its priority, requests, template
  and line together: the priority and size mix as it came), queued at its arrival time;
- arrivals stop at `horizon` seconds from now: a rate seen over the last `window` says little about the far
  future (a busy afternoon is followed by a quiet night), and a replay at a rate above the cluster's capacity would
  never end.

`expected_work` and `ArrivalModel.expected_ahead` give the closed form of what arrivals add ahead of a job (the
words of the estimate): rate x wait x asks x mean run time, summed over the recent arrivals that would go first.

Units: times in seconds (relative to the moment of asking, 0 = now; rows say how long ago each job came), amounts
whatever the caller uses per resource (gangweb: KAI units).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .allocation import Job

WINDOW = 3600.0  # seconds of recent submissions the rates are read from ("at the last hour's rate")
HORIZON = 3600.0  # seconds from now after which a replay draws no more arrivals
PRIOR_SHAPE = 0.5  # Jeffreys' prior of a Poisson rate: posterior Gamma(n + 1/2, window)
ARRIVAL_ID_BASE = -1  # replayed arrivals get ids -1, -2, ... (never a real job's id)
ARRIVAL_NAME = "a job submitted meanwhile"  # how the evidence names a replayed arrival (never a real job's name)


@dataclass(frozen=True)
class Arrival:
    """One recent submission: `ago` seconds before the question, into `queue`, at `priority`, asking `asks`
    ({resource: amount}), of `template` (its history key), in scheduler `line` (backend family)."""

    ago: float
    queue: str
    priority: int
    asks: Mapping[str, float]
    template: object = None
    line: str = ""


def expected_work(rate_per_s: float, wait_s: float, amount: float, mean_run_s: float) -> float:
    """Work (amount x seconds, e.g. GPU-seconds) that jobs arriving at `rate_per_s`, each asking `amount` and
    running `mean_run_s` on average, bring during `wait_s`: rate x wait x amount x run (the mean of a compound
    Poisson sum). 6 arrivals/h of 2-GPU jobs of 1 h over a 1-h wait: 12 GPU-hours."""
    return max(rate_per_s, 0.0) * max(wait_s, 0.0) * max(amount, 0.0) * max(mean_run_s, 0.0)


class ArrivalModel:
    """The recent arrivals per queue, and the draws of a replay (module docstring).

    `arrivals`: the submissions of the last `window` seconds (older ones, and those with `ago` < 0, are ignored);
    `horizon`: seconds from now after which no arrival is drawn. Raises ValueError when `window` <= 0."""

    def __init__(self, arrivals: Iterable[Arrival], window: float = WINDOW, horizon: float = HORIZON):
        if window <= 0:
            raise ValueError("the arrival window must be positive")
        self.window, self.horizon = float(window), float(horizon)
        self.by_queue: dict[str, list[Arrival]] = {}
        for a in arrivals:
            if 0 <= a.ago <= self.window:
                self.by_queue.setdefault(a.queue, []).append(a)

    def keep(self, usable: Callable[[Arrival], bool]) -> ArrivalModel:
        """A model of the arrivals for which `usable` holds (e.g. those whose run times are known: a drawn
        arrival must end in the replay); a queue's rate counts only those."""
        out = ArrivalModel((), self.window, self.horizon)
        for q, got in self.by_queue.items():
            kept = [a for a in got if usable(a)]
            if kept:
                out.by_queue[q] = kept
        return out

    def __bool__(self) -> bool:
        return bool(self.by_queue)

    def rate(self, queue: str) -> float:
        """The posterior mean arrival rate of `queue`, jobs per second ((n + 1/2) / window; 0 when it submitted
        nothing in the window: it has no mix to draw from)."""
        n = len(self.by_queue.get(queue, ()))
        return (n + PRIOR_SHAPE) / self.window if n else 0.0

    def draw(self, rng: random.Random, *, origin: float = 0.0,
             first_id: int = ARRIVAL_ID_BASE) -> list[tuple[float, Job]]:
        """One replay's arrivals: [(seconds from now, Job)] in time order, up to `horizon`. Per queue one rate
        from its Gamma posterior, then exponential gaps at that rate, each arrival a copy of a recent one drawn
        uniformly; ids count down from `first_id`. A job arriving t seconds from now is queued at `origin` + t
        (`origin`: a time, on the caller's clock of `Job.queued_at`, after every job already pending, so that
        arrivals of equal priority line up behind them)."""
        out: list[tuple[float, Arrival]] = []
        for queue in sorted(self.by_queue):
            seen = self.by_queue[queue]
            rate = rng.gammavariate(len(seen) + PRIOR_SHAPE, 1.0 / self.window)
            if rate <= 0:
                continue
            t = rng.expovariate(rate)
            while t <= self.horizon:
                out.append((t, seen[rng.randrange(len(seen))]))
                t += rng.expovariate(rate)
        out.sort(key=lambda x: x[0])
        jobs = []
        for k, (t, a) in enumerate(out):
            jid = first_id - k
            jobs.append((t, Job(id=jid, queue=a.queue, asks=a.asks, template=a.template, name=ARRIVAL_NAME,
                                priority=a.priority, queued_at=origin + t, line=a.line)))
        return jobs

    def expected_ahead(self, wait_s: float, resource: str, goes_first: Callable[[Arrival], bool],
                       mean_run_s: Callable[[Arrival], float | None]) -> float:
        """The work (amount of `resource` x seconds) expected to arrive during `wait_s` seconds and go ahead:
        each recent arrival for which `goes_first` holds stands for a rate of 1 / window of jobs like it
        (`expected_work`), run for `mean_run_s` of it (None: left out, its run time is not known)."""
        total = 0.0
        for got in self.by_queue.values():
            for a in got:
                run = mean_run_s(a)
                if run is not None and goes_first(a):
                    total += expected_work(1.0 / self.window, wait_s, float(a.asks.get(resource) or 0), run)
        return total


def window_words(window: float) -> str:
    """The window as the estimate's words say it: 3600 -> "the last hour's", 7200 -> "the last 2 hours'",
    1800 -> "the last 30 minutes'"."""
    if window % 3600 == 0:
        h = int(window // 3600)
        return "the last hour's" if h == 1 else f"the last {h} hours'"
    return f"the last {int(math.ceil(window / 60))} minutes'"
