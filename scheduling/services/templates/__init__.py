"""Runtime templates: validation, rendering, versions, the pod-security level and exceptions a template carries, spec
size limits.
"""
