"""Queue policies: create, update, delete, warnings, the tree and its payloads, limits and what a queue holds, fair
share, counts, a job's place in line, usage estimates.
"""
