"""How work is queued and who does it: Celery tasks queued by name (enqueue, after commit), routed to shard queues,
singletons under leases (election, the leased beat).
"""
