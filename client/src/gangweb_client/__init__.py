"""gangweb client: the `gangweb` command and a Python SDK for the gangweb control plane's API.

    from gangweb_client import Client
    client = Client("https://gangweb.example.com", token="gw_...")
    [job] = client.submit({"name": "train", "template": "llm", "queue": "team-a", "cluster": "prod"})
    result = client.wait([job.id], timeout=3600)   # WaitResult; result.exit_code 0/1/2/3
"""
from .client import Client
from .errors import ApiError, GangwebError, InputError, NotFound, TransportError, Unauthorized
from .models import Job, TimelineEntry, WaitResult
from .version import __version__

__all__ = ["ApiError", "Client", "GangwebError", "InputError", "Job", "NotFound", "TimelineEntry", "TransportError",
           "Unauthorized", "WaitResult", "__version__"]
