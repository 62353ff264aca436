"""Which errors mean "a dependency is down" (scheduling/unavailable.py): those answer 503, everything else not."""
import pytest
import redis.exceptions
from django.db import DataError, IntegrityError, InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerOperationalError

from scheduling.unavailable import dependency_of


def wrapped(outer: Exception, cause: Exception) -> Exception:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize("exc,dependency", [
    (OperationalError("connection refused"), "database"),
    (InterfaceError("connection already closed"), "database"),
    (redis.exceptions.ConnectionError("Error 111"), "redis"),
    (redis.exceptions.TimeoutError("timed out"), "redis"),
    (redis.exceptions.BusyLoadingError("loading"), "redis"),  # a restarted Redis loading its data
    (BrokerOperationalError("Error 111 connecting"), "broker"),
    (wrapped(RuntimeError("publishing failed"), redis.exceptions.ConnectionError("x")), "redis"),
    (IntegrityError("duplicate key"), None),  # the request's own fault, not an outage
    (DataError("out of range"), None),
    (redis.exceptions.ResponseError("WRONGTYPE"), None),
    (ValueError("bug"), None),
    (None, None),
])
def test_a_dependency_is_down_only_for_connection_errors(exc, dependency):
    assert dependency_of(exc) == dependency
