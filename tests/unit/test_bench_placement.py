"""bench/placement.py on one seeded run: gangweb's rule over two unequal clusters ends the jobs no later than
the best split by hand plus 10 %, spreads them by size, and every job ends."""
from bench import placement


def test_a_small_run_is_within_the_goal_of_the_best_fixed_split():
    result = placement.main(["--seeds", "2"])  # the size: 500 jobs over 48 and 16 GPUs
    run = result["runs"][0]
    assert run["ratio"] <= 1.1, run
    spread = run["gangweb"]["spread"]
    assert spread["big"]["jobs"] + spread["small"]["jobs"] == 500
    assert spread["big"]["gpus"] > spread["small"]["gpus"]  # the big cluster takes the larger part
    assert run["best_fixed_split"]["makespan"] >= 600  # at least one job's duration
