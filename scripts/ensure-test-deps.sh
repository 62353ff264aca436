#!/usr/bin/env bash
# System packages the test suite needs that pip cannot bring: Debian's chromium for the browser tests, redis-server
# for the tests of the Redis broker transport and submit throttle.
# Installs them when missing and we are root (CI and the project's machines); otherwise says what to install.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "ensure-test-deps: installing ${need[*]}"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "ensure-test-deps: please install: ${need[*]} (sudo apt-get install ${need[*]})" >&2
  exit 1
fi
