"""The client's IP address of a request, through the proxies the install trusts (and no others).

Behind an ingress every request arrives from the ingress's address (`REMOTE_ADDR`), so anything keyed by the
client address (the login lockout of django-axes, `AXES_CLIENT_IP_CALLABLE`) would put every client in one bucket:
5 wrong passwords from anyone would lock the account for everyone (issue 32 row 6). `X-Forwarded-For` says who the
client was, but any client can send one, so it is believed only as far as the install's own proxies vouch for it:

- `settings.GANGWEB_TRUSTED_PROXIES`: the networks (CIDR, comma-separated) the install's proxies connect from, e.g.
  the ingress controller's pod network `10.42.0.0/16`. Empty (the default): `X-Forwarded-For` is never read and
  the client is `REMOTE_ADDR`.
- When `REMOTE_ADDR` is a trusted proxy, the `X-Forwarded-For` list is read from the right (the hop nearest to us)
  and each trusted proxy in it skipped; the first address that is not a trusted proxy is the client. Anything a
  client put further left is never reached. An entry that is not an IP address stops the walk at the last hop we
  trust (the spoofer's junk is not believed). This is the rule of nginx's `real_ip_recursive on` and of
  Rails' `ActionDispatch::RemoteIp`.
"""
from __future__ import annotations

import functools
import ipaddress

from django.conf import settings


@functools.lru_cache(maxsize=8)
def _networks(text: str) -> tuple:
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part.strip())


def trusted_proxies() -> tuple:
    """The networks of settings.GANGWEB_TRUSTED_PROXIES (a comma-separated CIDR list, or a list of them). Raises
    ValueError for a bad network (settings check it at start-up)."""
    value = getattr(settings, "GANGWEB_TRUSTED_PROXIES", "") or ""
    return _networks(value if isinstance(value, str) else ",".join(value))


def _parse(text: str):
    try:
        return ipaddress.ip_address(text.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _trusted(address, networks) -> bool:
    return address is not None and any(address.version == n.version and address in n for n in networks)


def client_ip(request) -> str:
    """The client address of `request` (text), per the module docstring: `REMOTE_ADDR`, or the nearest
    `X-Forwarded-For` entry that is not one of the install's trusted proxies when the request came through one."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    networks = trusted_proxies()
    if not networks or not _trusted(_parse(remote), networks):
        return remote
    client = remote
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        address = _parse(hop)
        if address is None:
            break
        client = str(address)
        if not _trusted(address, networks):
            break
    return client
