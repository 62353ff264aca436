"""Webhook notifications of job phase changes: the subscriptions, and the outbox scan and signed delivery the worker
runs.
"""
