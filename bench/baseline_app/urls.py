"""Baseline routes, mounted at /bench/baseline/ by bench.urls only."""
from django.urls import path

from . import views

urlpatterns = [
    path("rows/", views.BaselineCreate.as_view(), name="bench-baseline-rows"),
    path("rows/bulk/", views.BaselineBulkCreate.as_view(), name="bench-baseline-rows-bulk"),
]
