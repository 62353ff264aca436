"""Where a job runs when its submit names no cluster (or several), and when a waiting job moves (issue 38).

`rule` is the pure decision over per-cluster numbers; `numbers` gathers those numbers from what gangweb recorded
(capacity, health, backends, its jobs' requests), never from the cluster. docs/queues.md, "Where a job runs".
"""
