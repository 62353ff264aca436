"""Where the locally built control-plane binaries live.

`localcluster/build.sh` builds them from the Go module proxy into a cache outside the repository, keyed by the
versions pinned in `localcluster/versions.env`. This module reads the same file and computes the same paths, so
the Python side and the build script can never disagree about which binaries a cluster runs.

Several Kubernetes releases can be built side by side (``K8S_VERSIONS``, the first is the default); the
environment variable ``GANGWEB_K8S_VERSION`` (or an explicit argument) picks another. etcd and kwok are shared by
every release, so a control plane can be upgraded in place over the same etcd data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
VERSIONS_FILE = PACKAGE_DIR / "versions.env"
BUILD_SCRIPT = PACKAGE_DIR / "build.sh"
K8S_VERSION_ENV = "GANGWEB_K8S_VERSION"


class BinariesMissing(RuntimeError):
    """Raised when a control-plane binary has not been built yet."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Return the pinned versions, e.g. ``{"K8S_VERSIONS": "1.37.2 1.36.3", "ETCD_VERSION": "3.6.16", ...}``.

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
    k8s_version: str = ""  # the Kubernetes release of the three kube-* binaries; "" means `resolve_k8s_version()`

    def missing(self) -> list[Path]:
        """Return the paths that do not exist or are not executable."""
        paths = [getattr(self, f.name) for f in fields(self) if f.name != "k8s_version"]
        return [p for p in paths if not (p.is_file() and os.access(p, os.X_OK))]


def k8s_versions(versions: dict[str, str] | None = None) -> list[str]:
    """The Kubernetes releases localcluster can build and run, default first, e.g. ``["1.37.2", "1.36.3"]``."""
    return (versions or read_versions())["K8S_VERSIONS"].split()


def resolve_k8s_version(wanted: str | None = None, versions: dict[str, str] | None = None) -> str:
    """The Kubernetes release to run: ``wanted``, else ``$GANGWEB_K8S_VERSION``, else the first of ``K8S_VERSIONS``.

    A leading "v" is accepted ("v1.36.3"). Raises ValueError naming the known releases for any other value.
    """
    known = k8s_versions(versions)
    chosen = (wanted or os.environ.get(K8S_VERSION_ENV) or known[0]).strip().removeprefix("v")
    if chosen not in known:
        raise ValueError(f"Kubernetes {chosen} is not one localcluster builds ({', '.join(known)}; "
                         f"see {VERSIONS_FILE.relative_to(REPO_DIR)})")
    return chosen


def minor_of(k8s_version: str) -> str:
    """``"1.37.2"`` -> ``"1.37"``."""
    return ".".join(k8s_version.split(".")[:2])


def find_binaries(versions: dict[str, str] | None = None, k8s_version: str | None = None) -> Binaries:
    """Return where the pinned binaries of Kubernetes ``k8s_version`` (default: `resolve_k8s_version`) are
    expected, whether or not they exist yet. Raises ValueError for a release that is not pinned."""
    v = versions or read_versions()
    root = cache_dir()
    version = resolve_k8s_version(k8s_version, v)
    k8s = root / f"k8s-v{version}" / "bin"
    return Binaries(
        etcd=root / f"etcd-v{v['ETCD_VERSION']}" / "bin" / "etcd",
        kube_apiserver=k8s / "kube-apiserver",
        kube_controller_manager=k8s / "kube-controller-manager",
        kube_scheduler=k8s / "kube-scheduler",
        kwok=root / f"kwok-v{v['KWOK_VERSION']}" / "bin" / "kwok",
        k8s_version=version,
    )


def require_binaries(k8s_version: str | None = None) -> Binaries:
    """Return the pinned binaries of ``k8s_version`` (default: `resolve_k8s_version`), or raise `BinariesMissing`
    naming what is missing and how to build it."""
    version = resolve_k8s_version(k8s_version)
    binaries = find_binaries(k8s_version=version)
    missing = binaries.missing()
    if missing:
        listing = "\n  ".join(str(p) for p in missing)
        raise BinariesMissing(
            f"local control-plane binaries of Kubernetes {version} are missing:\n  {listing}\n"
            f"Build them with `make localcluster-build` (runs {BUILD_SCRIPT.relative_to(REPO_DIR)} --all; "
            f"`{BUILD_SCRIPT.relative_to(REPO_DIR)} --k8s-version {version}` builds only this one; "
            "about 10 minutes cold per release on 2 cores, under a second warm)."
        )
    return binaries


def find_helm(versions: dict[str, str] | None = None) -> Path:
    """Where `build.sh` puts the pinned Helm (``HELM_VERSION`` of versions.env), built or not:
    ``<cache>/helm-v<HELM_VERSION>/bin/helm``. Helm is not one of `Binaries`: only the chart's tests need it, and a
    cluster must start without it."""
    v = versions or read_versions()
    return cache_dir() / f"helm-v{v['HELM_VERSION']}" / "bin" / "helm"


def kueue_dir(versions: dict[str, str] | None = None) -> Path:
    """The cache directory of the pinned Kueue (``KUEUE_VERSION`` of versions.env): ``<cache>/kueue-v<version>``,
    holding ``bin/kueue`` (the manager) and ``config/components/{crd,webhook}`` (copied from the Go module by
    `build.sh`), built or not."""
    v = versions or read_versions()
    return cache_dir() / f"kueue-v{v['KUEUE_VERSION']}"


def find_kueue(versions: dict[str, str] | None = None) -> Path:
    """Where `build.sh` puts the pinned Kueue manager, built or not: ``<cache>/kueue-v<KUEUE_VERSION>/bin/kueue``.
    Not one of `Binaries`: a cluster starts without Kueue unless asked for it (``ClusterConfig.kueue``)."""
    return kueue_dir(versions) / "bin" / "kueue"


def require_kueue(versions: dict[str, str] | None = None) -> Path:
    """Return the Kueue cache directory (`kueue_dir`) once the manager and its copied manifests are there; raise
    `BinariesMissing` naming what is missing and `build.sh` otherwise."""
    top = kueue_dir(versions)
    wanted = [find_kueue(versions), top / "config" / "components" / ".complete"]
    missing = [p for p in wanted if not p.is_file() or (p.name == "kueue" and not os.access(p, os.X_OK))]
    if missing:
        listing = "\n  ".join(str(p) for p in missing)
        raise BinariesMissing(
            f"Kueue {top.name.removeprefix('kueue-v')} is not built:\n  {listing}\n"
            f"Build it with `{BUILD_SCRIPT.relative_to(REPO_DIR)}` (any arguments: it always builds Kueue beside the "
            "rest; about 25 minutes cold on a loaded 2-core machine, under a second warm), or start the cluster "
            "without Kueue (`python -m localcluster up --no-kueue`)."
        )
    return top
