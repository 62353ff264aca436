"""The submit benchmark's baseline: the least a DRF endpoint can do to store a job body (one INSERT)."""
