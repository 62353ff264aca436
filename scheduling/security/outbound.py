"""Outbound HTTP to tenant-chosen servers: pinned to the checked address, never redirected.

Every connection gangweb makes on a tenant's say-so (a cluster's API server, a webhook receiver) follows two rules
(issue 32, rows 1 and 2), built here once and used by `kube/client.py` and `services/webhooks/delivery.py`:

- **Pinned.** The host name is resolved and every address checked once (`addresses.resolve`); the request goes
  to the first checked address itself: the URL holds the IP (`pinned_url`), the HTTP `Host` header keeps the
  name the tenant gave, and TLS sends the name as SNI and verifies the certificate against it (`pool_manager`'s
  `server_name`). A DNS answer that changes between the check and the connection (rebinding) is never used.
- **No redirects.** A 3xx answer is returned to the caller as it is and never followed (`no_redirects`): a
  redirect would send the request (a job's body, a signed event) to a host no rule has checked. Callers report it
  as `REDIRECT_REFUSED`. urllib3 follows redirects by default: `PoolManager.urlopen(redirect=True)` with
  `Retry.DEFAULT` when the request names no retries (urllib3 2.x; the pool-level `retries` keyword does not reach
  that decision), which the kubernetes client relies on. So the managers built here force `redirect=False` on every
  request (`NoRedirectPoolManager`, `NoRedirectProxyManager`) and urllib3 hands back the 3xx response as it is.
"""
from __future__ import annotations

import ssl
import urllib.request

import urllib3
from requests.utils import should_bypass_proxies
from urllib3.util.retry import Retry

from . import addresses

REDIRECT_REFUSED = "the server answered a redirect, which gangweb does not follow"


def is_redirect(status: int | None) -> bool:
    """True for an HTTP 3xx status (a redirect, or 304/300 that gangweb never asks for either)."""
    return status is not None and 300 <= status < 400


def redirect_message(status: int) -> str:
    """What a user reads about a redirect answer: `REDIRECT_REFUSED` with the status; never the Location (an
    internal address the server points at is not shown)."""
    return f"{REDIRECT_REFUSED} (HTTP {status})"


def no_redirects(total: int = 1) -> Retry:
    """urllib3 retries: `total` retries of connection failures, zero redirects, and a 3xx handed back as an answer
    rather than an error (`raise_on_redirect=False`)."""
    return Retry(total=total, redirect=0, raise_on_redirect=False)


def pinned_url(scheme: str, address: str, port: int, path: str = "") -> str:
    """`scheme://<address>:<port><path>` with an IPv6 address in brackets: the URL a pinned request goes to."""
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}{path}"


def host_header(host: str, port: int, scheme: str) -> str:
    """The `Host` header for `host` (name or IP, no brackets) on `port`: the port only when not the scheme's."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"


def environment_proxy(url: str, no_proxy: str | None = None) -> str | None:
    """The install's proxy for `url` from its environment (HTTPS_PROXY / HTTP_PROXY, minus NO_PROXY), or None."""
    scheme = url.split(":", 1)[0]
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or should_bypass_proxies(url, no_proxy=no_proxy):
        return None
    return proxy


class NoRedirectPoolManager(urllib3.PoolManager):
    """A PoolManager that never follows a redirect, whatever the caller asks (module docstring)."""

    def urlopen(self, method, url, redirect=True, **kw):  # noqa: ARG002 - the caller's wish is overruled
        return super().urlopen(method, url, redirect=False, **kw)


class NoRedirectProxyManager(urllib3.ProxyManager):
    """A ProxyManager that never follows a redirect, whatever the caller asks (module docstring)."""

    def urlopen(self, method, url, redirect=True, **kw):  # noqa: ARG002 - the caller's wish is overruled
        return super().urlopen(method, url, redirect=False, **kw)


def pool_manager(*, server_name: str | None, ssl_context: ssl.SSLContext | None, retries: Retry | int | None = None,
                 maxsize: int = 4, proxy: str | None = None, proxy_headers: dict | None = None
                 ) -> urllib3.PoolManager:
    """A urllib3 pool manager for pinned requests: TLS verified with `ssl_context` (required for https) against
    `server_name` (SNI and certificate check; None for an IP-literal server, checked against the IP), no redirect
    ever followed (`retries` keeps its retry count but its redirect budget is forced to 0), through `proxy` when
    the install has one (CONNECT to the pinned address, so the proxy cannot resolve the name again)."""
    total = retries.total if isinstance(retries, Retry) else retries
    kwargs = {"num_pools": 4, "maxsize": maxsize, "retries": no_redirects(total if isinstance(total, int) else 1)}
    if ssl_context is not None:
        kwargs.update(cert_reqs=ssl.CERT_REQUIRED, ssl_context=ssl_context)
    if server_name:
        kwargs["server_hostname"] = server_name
    if proxy:
        return NoRedirectProxyManager(proxy_url=proxy, proxy_headers=proxy_headers, **kwargs)
    return NoRedirectPoolManager(**kwargs)


def without_redirects(manager: urllib3.PoolManager) -> urllib3.PoolManager:
    """The same pool manager (its connection keywords, its proxy) rebuilt so that it never follows a redirect: for
    clients whose pools the kubernetes library built itself (in-cluster mode)."""
    if isinstance(manager, (NoRedirectPoolManager, NoRedirectProxyManager)):
        return manager
    if isinstance(manager, urllib3.ProxyManager):
        return NoRedirectProxyManager(proxy_url=str(manager.proxy), proxy_headers=manager.proxy_headers,
                                      **manager.connection_pool_kw)
    return NoRedirectPoolManager(**manager.connection_pool_kw)


def server_name_for(host: str, tls_server_name: str | None = None) -> str | None:
    """The TLS name to send and verify: `tls_server_name` when given, else `host` unless it is an IP literal."""
    return tls_server_name or (None if addresses.is_ip_literal(host) else host)
