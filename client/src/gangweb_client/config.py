"""Where the server URL and token come from: flags, then the environment, then a profile in the config file.

The config file (`GANGWEB_CONFIG`, default `<user config dir>/gangweb/config.yaml` by platformdirs) is YAML::

    current: default
    profiles:
      default: {url: https://gangweb.example.com, token: gw_...}
      staging: {url: https://gangweb-staging.example.com, token: gw_...}

It holds secrets, so it is written readable by its owner only (0600, its folder 0700).
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import yaml

from .errors import InputError

URL_ENV, TOKEN_ENV, PROFILE_ENV, CONFIG_ENV = "GANGWEB_URL", "GANGWEB_TOKEN", "GANGWEB_PROFILE", "GANGWEB_CONFIG"
DEFAULT_PROFILE = "default"


def config_path() -> Path:
    """The config file's path (it may not exist)."""
    return Path(os.environ.get(CONFIG_ENV) or platformdirs.user_config_path("gangweb") / "config.yaml")


def load(path: Path | None = None) -> dict:
    """The config file as a dict ({"profiles": {}} when there is none). Raises InputError for a file that is not
    a YAML mapping."""
    path = path or config_path()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return {"profiles": {}}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"config file {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("profiles", {}), dict):
        raise InputError(f"config file {path}: expected a mapping with 'profiles'")
    data.setdefault("profiles", {})
    return data


def save_profile(name: str, url: str, token: str, path: Path | None = None, make_current: bool = True) -> Path:
    """Store `url` and `token` as profile `name` (and make it current), replacing the file atomically with one
    created 0600. Returns the path."""
    path = path or config_path()
    data = load(path)
    data["profiles"][name] = {"url": url, "token": token}
    if make_current or "current" not in data:
        data["current"] = name
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".config-", dir=path.parent)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(data, fh, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@dataclass(frozen=True)
class Settings:
    """The server and token a command uses, and the profile they came from (None: flags or environment)."""

    url: str
    token: str | None
    profile: str | None


def resolve(url: str | None = None, token: str | None = None, profile: str | None = None) -> Settings:
    """Each of URL and token from the flag, else GANGWEB_URL / GANGWEB_TOKEN, else the profile (`profile`, else
    GANGWEB_PROFILE, else the file's `current`). A profile named but not in the file is an InputError."""
    data = load()
    wanted = profile or os.environ.get(PROFILE_ENV)
    name = wanted or data.get("current") or DEFAULT_PROFILE
    stored = data["profiles"].get(name)
    if wanted and stored is None:
        known = ", ".join(sorted(data["profiles"])) or "none; run 'gangweb login'"
        raise InputError(f"no profile '{wanted}' in {config_path()} (profiles: {known})")
    stored = stored or {}
    return Settings(url=url or os.environ.get(URL_ENV) or stored.get("url") or "",
                    token=token or os.environ.get(TOKEN_ENV) or stored.get("token"),
                    profile=name if stored else None)
