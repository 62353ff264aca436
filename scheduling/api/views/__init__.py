"""The API's viewsets, one module per resource, mounted at /api/v1/ by scheduling/api/urls.py; each write calls a
scheduling.services function.
"""
