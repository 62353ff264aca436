"""Jobs: submit, update, cancel, resubmit, bulk cancel, lists, logs, wait, events, the submit's lookups, the start
estimate.
"""
