"""Every queue warning, pinned word for word on a small tree with real numbers: the tree pages compute them once
per tree, the write path per queue, and both must say exactly this."""
import pytest

from scheduling.choices import QueueWarning
from scheduling.models import QueuePolicy
from scheduling.services.queues import payloads as queue_payloads
from scheduling.services.queues import policies as queue_service
from scheduling.services.queues import warnings as queue_warnings
from tests import builders

pytestmark = pytest.mark.django_db

# research: gpu quota 8 above its limit 6, cpu quota 4 cores under a limit of 8, memory limit 0
#   team-a: gpu quota 5, no surplus share, unlimited gpu limit; cpu quota 3 cores, limit 12 cores (above research's)
#     proj-x: gpu quota 2.5, limit 7 (above research's 6), memory quota 1500 MB (team-a guarantees 0 MB)
#     proj-y: gpu quota 2.5, cpu quota 3500m above its own limit 3000m (and the children's 3500m over team-a's 3000m)
#   team-b: gpu quota 4.5 (with team-a 9.5 > 8), cpu quota unlimited
# sandbox: the defaults, no warning
EXPECTED = {
    'research': [
        (QueueWarning.QUOTA_OVER_LIMIT, 'gpu_quota',
         'gpu_quota 8 GPUs is above gpu_limit 6 GPUs: the queue can never use its whole quota'),
        (QueueWarning.CHILDREN_OVER_PARENT, 'gpu_quota',
         "the gpu quotas of team-a, team-b (children of 'research') add up to 9.5 GPUs, more than the 8 GPUs "
         "quota of 'research'; their guarantees cannot all be met"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'cpu_quota',
         "the cpu quotas of team-a, team-b (children of 'research') add up to unlimited (team-b has quota -1), "
         "more than the 4000 millicores (4 cores) quota of 'research'; their guarantees cannot all be met"),
        (QueueWarning.ZERO_LIMIT, 'memory_limit',
         'memory_limit is 0: KAI allocates no memory at all in this queue or its children; send -1 for no limit'),
    ],
    'team-a': [
        (QueueWarning.NO_SURPLUS_SHARE, 'gpu_over_quota_weight',
         'gpu_over_quota_weight is 0: the queue gets no share of unused gpu beyond its quota'),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'gpu_limit',
         "gpu_limit is unlimited, but ancestor 'research' has gpu_limit 6 GPUs; KAI checks every ancestor's "
         'limit, so at most 6 GPUs can be allocated here'),
        (QueueWarning.CHILDREN_OVER_PARENT, 'gpu_quota',
         "the gpu quotas of team-a, team-b (children of 'research') add up to 9.5 GPUs, more than the 8 GPUs "
         "quota of 'research'; their guarantees cannot all be met"),
        (QueueWarning.LIMIT_OVER_ANCESTOR, 'cpu_limit',
         "cpu_limit 12000 millicores (12 cores) is above ancestor 'research's 8000 millicores (8 cores); at "
         'most 8000 millicores (8 cores) can be allocated here'),
        (QueueWarning.CHILDREN_OVER_PARENT, 'cpu_quota',
         "the cpu quotas of team-a, team-b (children of 'research') add up to unlimited (team-b has quota -1), "
         "more than the 4000 millicores (4 cores) quota of 'research'; their guarantees cannot all be met"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'cpu_quota',
         "the cpu quotas of proj-x, proj-y (children of 'team-a') add up to 3500 millicores, more than the "
         "3000 millicores (3 cores) quota of 'team-a'; their guarantees cannot all be met"),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'memory_limit',
         "memory_limit is unlimited, but ancestor 'research' has memory_limit 0 MB; KAI checks every "
         "ancestor's limit, so at most 0 MB can be allocated here"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'memory_quota',
         "the memory quotas of proj-x, proj-y (children of 'team-a') add up to 1500 MB, more than the 0 MB "
         "quota of 'team-a'; their guarantees cannot all be met"),
    ],
    'proj-x': [
        (QueueWarning.LIMIT_OVER_ANCESTOR, 'gpu_limit',
         "gpu_limit 7 GPUs is above ancestor 'research's 6 GPUs; at most 6 GPUs can be allocated here"),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'cpu_limit',
         "cpu_limit is unlimited, but ancestor 'research' has cpu_limit 8000 millicores (8 cores); KAI checks "
         "every ancestor's limit, so at most 8000 millicores (8 cores) can be allocated here"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'cpu_quota',
         "the cpu quotas of proj-x, proj-y (children of 'team-a') add up to 3500 millicores, more than the "
         "3000 millicores (3 cores) quota of 'team-a'; their guarantees cannot all be met"),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'memory_limit',
         "memory_limit is unlimited, but ancestor 'research' has memory_limit 0 MB; KAI checks every "
         "ancestor's limit, so at most 0 MB can be allocated here"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'memory_quota',
         "the memory quotas of proj-x, proj-y (children of 'team-a') add up to 1500 MB, more than the 0 MB "
         "quota of 'team-a'; their guarantees cannot all be met"),
    ],
    'proj-y': [
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'gpu_limit',
         "gpu_limit is unlimited, but ancestor 'research' has gpu_limit 6 GPUs; KAI checks every ancestor's "
         'limit, so at most 6 GPUs can be allocated here'),
        (QueueWarning.QUOTA_OVER_LIMIT, 'cpu_quota',
         'cpu_quota 3500 millicores is above cpu_limit 3000 millicores (3 cores): the queue can never use its '
         'whole quota'),
        (QueueWarning.CHILDREN_OVER_PARENT, 'cpu_quota',
         "the cpu quotas of proj-x, proj-y (children of 'team-a') add up to 3500 millicores, more than the "
         "3000 millicores (3 cores) quota of 'team-a'; their guarantees cannot all be met"),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'memory_limit',
         "memory_limit is unlimited, but ancestor 'research' has memory_limit 0 MB; KAI checks every "
         "ancestor's limit, so at most 0 MB can be allocated here"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'memory_quota',
         "the memory quotas of proj-x, proj-y (children of 'team-a') add up to 1500 MB, more than the 0 MB "
         "quota of 'team-a'; their guarantees cannot all be met"),
    ],
    'team-b': [
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'gpu_limit',
         "gpu_limit is unlimited, but ancestor 'research' has gpu_limit 6 GPUs; KAI checks every ancestor's "
         'limit, so at most 6 GPUs can be allocated here'),
        (QueueWarning.CHILDREN_OVER_PARENT, 'gpu_quota',
         "the gpu quotas of team-a, team-b (children of 'research') add up to 9.5 GPUs, more than the 8 GPUs "
         "quota of 'research'; their guarantees cannot all be met"),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'cpu_limit',
         "cpu_limit is unlimited, but ancestor 'research' has cpu_limit 8000 millicores (8 cores); KAI checks "
         "every ancestor's limit, so at most 8000 millicores (8 cores) can be allocated here"),
        (QueueWarning.CHILDREN_OVER_PARENT, 'cpu_quota',
         "the cpu quotas of team-a, team-b (children of 'research') add up to unlimited (team-b has quota -1), "
         "more than the 4000 millicores (4 cores) quota of 'research'; their guarantees cannot all be met"),
        (QueueWarning.UNLIMITED_UNDER_FINITE, 'memory_limit',
         "memory_limit is unlimited, but ancestor 'research' has memory_limit 0 MB; KAI checks every "
         "ancestor's limit, so at most 0 MB can be allocated here"),
    ],
    'sandbox': [
    ],
}


def build():
    research = builders.make_queue("research", gpu_quota=8, gpu_limit=6, cpu_quota=4000, cpu_limit=8000,
                                   memory_quota=68720, memory_limit=0)
    team_a = builders.make_queue("team-a", parent=research, gpu_quota=5, gpu_over_quota_weight=0,
                                 cpu_quota=3000, cpu_limit=12000)
    builders.make_queue("team-b", parent=research, gpu_quota=4.5, cpu_quota=-1)
    builders.make_queue("proj-x", parent=team_a, gpu_quota=2.5, gpu_limit=7, memory_quota=1500)
    builders.make_queue("proj-y", parent=team_a, gpu_quota=2.5, cpu_quota=3500, cpu_limit=3000)
    builders.make_queue("sandbox")


def walk(nodes):
    for n in nodes:
        yield n["name"], [(w["code"], w["field"], w["message"]) for w in n["warnings"]]
        yield from walk(n["children"])


def test_the_tree_shows_every_warning_word_for_word():
    build()
    assert dict(walk(queue_payloads.queue_tree())) == EXPECTED


def test_one_queue_at_a_time_gets_the_same_warnings_as_the_tree():
    build()
    tree = queue_service.QueueTree.load()  # model instances, as create_queue / update_queue load it
    for policy in QueuePolicy.objects.order_by("name"):
        got = [(w["code"], w["field"], w["message"]) for w in queue_warnings.warnings_for(policy, tree)]
        assert got == EXPECTED[policy.name], policy.name


def test_the_api_tree_carries_the_same_warnings(api):
    build()
    r = api.get("/api/v1/queues/tree/")
    assert r.status_code == 200
    assert dict(walk(r.json()["roots"])) == EXPECTED


def test_a_wide_queue_names_five_children_and_counts_the_rest():
    """90 children over their parent's quota: each child's warning stays one line (5 names and a count), not 90
    names repeated 90 times; up to 6 children are all named."""
    wide = builders.make_queue("wide", gpu_quota=8)
    for i in range(90):
        builders.make_queue(f"t{i:02d}", parent=wide, gpu_quota=1)
    messages = {name: [w[2] for w in ws if w[0] == QueueWarning.CHILDREN_OVER_PARENT]
                for name, ws in walk(queue_payloads.queue_tree())}
    assert messages["t42"] == [
        "the gpu quotas of t00, t01, t02, t03, t04 and 85 more (children of 'wide') add up to 90 GPUs, more than "
        "the 8 GPUs quota of 'wide'; their guarantees cannot all be met",
    ]
    assert messages["wide"] == messages["t42"]


def test_unlimited_children_past_five_are_counted():
    parent = builders.make_queue("p", cpu_quota=4000)
    for i in range(8):
        builders.make_queue(f"c{i}", parent=parent, cpu_quota=-1 if i < 7 else 100)
    [message] = [w[2] for _, ws in walk(queue_payloads.queue_tree()) for w in ws
                 if w[0] == QueueWarning.CHILDREN_OVER_PARENT][:1]
    assert message.startswith("the cpu quotas of c0, c1, c2, c3, c4 and 3 more (children of 'p') add up to "
                              "unlimited (c0, c1, c2, c3, c4 and 2 more have quota -1), more than")
