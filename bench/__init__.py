"""Benchmarks of gangweb, each measured side by side with its baseline in the same run (`make bench`).

Run with ``python -m bench.run_all``; results go to ``bench/results/latest.json`` and the table of
``docs/performance.md``. See ``bench/README.md`` for what each benchmark measures and its goal.
"""
