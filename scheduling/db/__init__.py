"""Hand-written SQL and database reads shared by the web and the worker, below both: fixed-text statements, the
database's clock, broken-connection handling, COPY inserts, correlated subqueries, keyset pagination, what placed
jobs hold in a cluster.
"""
