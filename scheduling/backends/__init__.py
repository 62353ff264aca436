"""Scheduler backends: one plugin per scheduler and API version, chosen by API discovery."""
