"""Issue 18, part 2: singletons by election, with real processes. A second watcher and a second beat join the run's
stack (tests/faults/conftest.py): exactly one of each acts; the active watcher killed with SIGKILL is replaced
within the documented bound (lease 30 s + 5 s ticks, docs/architecture.md "Singletons"), and the phases the
cluster reached meanwhile arrive with the cluster's own timestamps."""
from __future__ import annotations

import re
import time
from datetime import datetime

import pytest
from kubernetes import client as k8s

from bench.stack import wait_for

pytestmark = [pytest.mark.faults]

TAKEOVER_BOUND = 30 + 5 + 5 + 10  # lease + the candidate's tick + the holder's last tick + starting the watch
SENT = re.compile(r"Sending due task")


def when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_two_watchers_and_two_beats_one_of_each_acts_and_the_standby_takes_over(stack, client, kube, namespace):
    stack.start_watch("watch2")
    stack.start_beat("beat2")
    time.sleep(20)  # four ticks of both standbys
    assert "watching cluster local" in stack.log_text("watch")
    assert "watching cluster local" not in stack.log_text("watch2")
    sent_before = len(SENT.findall(stack.log_text("beat")))
    time.sleep(12)
    assert len(SENT.findall(stack.log_text("beat"))) > sent_before  # the resync every 5 s, sent by "beat"
    assert SENT.findall(stack.log_text("beat2")) == []

    # Beat first: SIGKILL the sending beat; the standby sends within the bound.
    stack.kill("beat")
    t0 = time.monotonic()
    wait_for(lambda: SENT.search(stack.log_text("beat2")), TAKEOVER_BOUND, "beat2 sending after the holder died")
    beat_takeover = time.monotonic() - t0

    # Then the watcher, with no resync running (beat2 stopped: phases can come only from a watch).
    stack.stop("beat2")  # SIGTERM: releases the beat lease
    stack.kill("watch")
    killed = time.monotonic()
    job = client.submit("while-unwatched", namespace, "fault-long")
    core = k8s.CoreV1Api(kube)

    def running_pods():
        pods = core.list_namespaced_pod(namespace).items
        return pods if pods and all(p.status.phase == "Running" for p in pods) else None

    wait_for(running_pods, 60, "the job's pods Running in the cluster")
    if "watching cluster local" not in stack.log_text("watch2"):
        assert client.job(job["id"])["phase"] != "Running"  # nobody watches: the change is not recorded yet
    wait_for(lambda: "watching cluster local" in stack.log_text("watch2"), TAKEOVER_BOUND, "watch2 taking over")
    watch_takeover = time.monotonic() - killed
    wait_for(lambda: client.job(job["id"])["phase"] == "Running", 60, "Running through watch2")
    started = [when(c.state.running.started_at.isoformat()) for p in running_pods()
               for c in p.status.container_statuses or [] if c.state.running]
    at = {e["phase"]: when(e["at"]) for e in client.job(job["id"])["timeline"]}
    print(f"\n[faults] singletons: beat taken over in {beat_takeover:.0f} s, watcher in {watch_takeover:.0f} s")
    assert started and min(started).timestamp() - 1 <= at["Running"].timestamp() <= max(started).timestamp() + 1
    assert beat_takeover <= TAKEOVER_BOUND and watch_takeover <= TAKEOVER_BOUND

    # Leave the stack as the other fault runs know it: one "watch" and one "beat" (the standbys let go at once).
    watched, sent = stack.log_text("watch").count("watching cluster local"), len(SENT.findall(stack.log_text("beat")))
    stack.stop("watch2")
    stack.start_watch()
    stack.start_beat()
    wait_for(lambda: stack.log_text("watch").count("watching cluster local") > watched, 30, "the watch back")
    wait_for(lambda: len(SENT.findall(stack.log_text("beat"))) > sent, 30, "beat back")
