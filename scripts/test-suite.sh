#!/usr/bin/env bash
# The whole suite (`make test`, so CI), ordered to keep the machine's cores busy with it (docs/testing.md,
# "Tests and CI"):
#   1. the control planes' build (localcluster/build.sh --all, in the background; about a second when built, and it
#      waits for a build already running, e.g. the one .ci/run starts before installing packages) beside the tests
#      that need none of its binaries (`-m "not built"`, tests/build_markers.py: ~1,870 tests of CPU work);
#   2. then the tests that need it on the default release: tests/cluster and the Helm chart (`-m "built and not
#      faults"`) on xdist workers that each start a control plane of their own (so no test sees another's
#      cluster-wide objects); beside them, in pytests of their own, the fault runs (`-m faults`: one private stack)
#      and, on every other release, the tests marked k8s_version (their output is printed after).
# Every part runs even when an earlier one failed; the script fails when any did (or when the build did).
#   GANGWEB_TEST_WORKERS            xdist workers of part 1 (default 2)
#   GANGWEB_TEST_CLUSTER_WORKERS    xdist workers of part 2, one control plane each (default 2)
#   PYTEST_ARGS                     added to every pytest run (e.g. "-x", or "-k queue")
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
# shellcheck source=/dev/null
. localcluster/versions.env
read -r -a releases <<<"$K8S_VERSIONS"
default=${releases[0]}
read -r -a extra <<<"${PYTEST_ARGS:-}"
mkdir -p var
status=0

# pytest's 5 ("no tests collected") is not a failure of one part: PYTEST_ARGS may select tests of one part only.
record() { local rc=$1; [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1; }
pytest_on() {  # pytest_on RELEASE ARGS...: pytest against the control plane of that Kubernetes release
  local release=$1; shift
  GANGWEB_TESTING=1 GANGWEB_K8S_VERSION=$release "$PYTHON" -m pytest "$@" "${extra[@]}"
}

echo "test-suite: building the control planes (var/localcluster-build.log) beside the tests that need no binary"
start=$SECONDS
bash localcluster/build.sh --all >var/localcluster-build.log 2>&1 &
build=$!
pytest_on "$default" -n "${GANGWEB_TEST_WORKERS:-2}" -m "not built"
record $?
echo "test-suite: the tests without the build took $((SECONDS - start)) s; waiting for the build"
wait "$build"
built=$?
# .ci/run starts the build before it installs packages (var/localcluster-build-ci.log); this one then waited for it.
[ -f var/localcluster-build-ci.log ] && cat var/localcluster-build-ci.log
cat var/localcluster-build.log
if [ $built != 0 ]; then
  echo "test-suite: the control-plane build failed" >&2
  exit 1
fi
echo "test-suite: built after $((SECONDS - start)) s"

# Beside the xdist run: the fault runs in a pytest of their own (their tests share one private stack per process, ~1
# min to start, so they are not spread test by test), and on every other release the tests marked k8s_version. Their output is printed after. Each has a test
# database of its own (GANGWEB_TEST_DB_SUFFIX, tests/conftest.py); xdist's workers add their own suffix.
side=(faults)
# The fault runs by file on 2 workers: test_faults.py's (~5 min) on one, the others' on the other; each worker starts
# the session's stack once, when its first test needs it.
(GANGWEB_TEST_DB_SUFFIX=faults pytest_on "$default" -n 2 --dist loadfile -m faults >var/test-faults.log 2>&1
 echo $? >var/test-faults.rc) &
others=("${releases[@]:1}")
for v in "${others[@]}"; do
  side+=("k8s-$v")
  (GANGWEB_TEST_DB_SUFFIX="k8s_${v//./_}" GANGWEB_K8S_UPGRADE_TO=$default pytest_on "$v" -m k8s_version tests/cluster \
     >"var/test-k8s-$v.log" 2>&1
   echo $? >"var/test-k8s-$v.rc") &
done
echo "test-suite: beside the cluster tests: ${side[*]} (var/test-<part>.log)"
pytest_on "$default" -n "${GANGWEB_TEST_CLUSTER_WORKERS:-2}" -m "built and not faults"
record $?
wait
for part in "${side[@]}"; do
  echo "test-suite: $part:"
  cat "var/test-$part.log"
  record "$(cat "var/test-$part.rc")"
done
echo "test-suite: $((SECONDS - start)) s in all"
exit $status
