"""Where the locally built control-plane binaries live.

`localcluster/build.sh` builds them from the Go module proxy into a cache outside the repository, keyed by the
versions pinned in `localcluster/versions.env`. This module reads the same file and computes the same paths, so
the Python side and the build script can never disagree about which binaries a cluster runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
VERSIONS_FILE = PACKAGE_DIR / "versions.env"
BUILD_SCRIPT = PACKAGE_DIR / "build.sh"


class BinariesMissing(RuntimeError):
    """Raised when a control-plane binary has not been built yet."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Return the pinned versions, e.g. ``{"K8S_VERSION": "1.36.3", ...}``.

    Reads the shell-style ``KEY=value`` lines of ``versions.env``; comments and blank lines are skipped.
    """
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        versions[key.strip()] = value.strip().strip("'\"")
    return versions


def cache_dir() -> Path:
    """Return the binary cache root, ``$GANGWEB_CACHE/localcluster`` (default ``~/.cache/gangweb/localcluster``).

    Mirrors the ``CACHE=`` line of ``build.sh``: ``GANGWEB_CACHE``, else ``$XDG_CACHE_HOME/gangweb``, else
    ``~/.cache/gangweb``.
    """
    root = os.environ.get("GANGWEB_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = os.path.join(xdg, "gangweb")
    return Path(root) / "localcluster"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of the five executables a local cluster runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path

    def missing(self) -> list[Path]:
        """Return the paths that do not exist or are not executable."""
        paths = [getattr(self, f.name) for f in fields(self)]
        return [p for p in paths if not (p.is_file() and os.access(p, os.X_OK))]


def find_binaries(versions: dict[str, str] | None = None) -> Binaries:
    """Return where the pinned binaries are expected, whether or not they exist yet."""
    v = versions or read_versions()
    root = cache_dir()
    k8s = root / f"k8s-v{v['K8S_VERSION']}" / "bin"
    return Binaries(
        etcd=root / f"etcd-v{v['ETCD_VERSION']}" / "bin" / "etcd",
        kube_apiserver=k8s / "kube-apiserver",
        kube_controller_manager=k8s / "kube-controller-manager",
        kube_scheduler=k8s / "kube-scheduler",
        kwok=root / f"kwok-v{v['KWOK_VERSION']}" / "bin" / "kwok",
    )


def require_binaries() -> Binaries:
    """Return the pinned binaries, or raise `BinariesMissing` naming what is missing and how to build it."""
    binaries = find_binaries()
    missing = binaries.missing()
    if missing:
        listing = "\n  ".join(str(p) for p in missing)
        raise BinariesMissing(
            f"local control-plane binaries are missing:\n  {listing}\n"
            f"Build them with `make localcluster-build` (runs {BUILD_SCRIPT.relative_to(REPO_DIR)}; "
            "about 10 minutes cold on 2 cores, under a second warm)."
        )
    return binaries
