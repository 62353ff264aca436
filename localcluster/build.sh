#!/usr/bin/env bash
# Build the local control plane from the Go module proxy into a cache outside the repo, keyed by version.
#
#   localcluster/build.sh                  build what is missing for the default Kubernetes version
#                                          ($GANGWEB_K8S_VERSION, else the first of K8S_VERSIONS); a warm
#                                          cache returns in about a second
#   localcluster/build.sh --k8s-version V  the same for Kubernetes V (one of K8S_VERSIONS)
#   localcluster/build.sh --all            every Kubernetes version in K8S_VERSIONS (what `make test` needs), all at
#                                          once: a cold build of two takes about as long as of one after the other,
#                                          and overlaps best with whatever else runs (CI starts it before apt-get)
#   localcluster/build.sh --regen ...      rewrite the wrapper go.mod files from upstream (k8s staging list
#                                          read from k8s.io/kubernetes' own go.mod), then build
#
# Binaries land in $GANGWEB_CACHE/localcluster/{k8s-vX,etcd-vY,kwok-vZ,helm-vW,kueue-vU}/bin. Build logs sit beside
# them. Helm (for the chart's tests) builds in parallel with the Kubernetes releases; it needs no wrapper module.
# The Kueue manager builds in parallel too (the longest single build: ~25 min cold at the lowest priority on a loaded
# machine); its CRDs and webhook manifests are copied from the module into kueue-vU/config/components/ beside it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$here/versions.env"
CACHE=${GANGWEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangweb}/localcluster
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false"
regen=0; all=0; wanted=${GANGWEB_K8S_VERSION:-}
while [ $# -gt 0 ]; do
  case $1 in
    --regen) regen=1 ;;
    --all) all=1 ;;
    --k8s-version) wanted=${2:?--k8s-version needs a version}; shift ;;
    --k8s-version=*) wanted=${1#*=} ;;
    *) echo "localcluster/build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
read -r -a known <<<"$K8S_VERSIONS"
if [ $all = 1 ]; then versions=("${known[@]}"); else versions=("${wanted:-${known[0]}}"); fi
for v in "${versions[@]}"; do
  [[ " ${known[*]} " == *" $v "* ]] ||
    { echo "localcluster: Kubernetes $v is not one of K8S_VERSIONS (${known[*]}) in versions.env" >&2; exit 2; }
done
# Regenerating may rewrite go.mod/go.sum; a plain build must build exactly what is committed.
[ $regen = 1 ] && export GOFLAGS="-mod=mod -buildvcs=false"

command -v go >/dev/null || { echo "localcluster: Go is required (go >= 1.26)" >&2; exit 1; }

# One build at a time per cache: a second one (`make test` while the one .ci/run started before its apt-get still runs,
# or two shells) waits for the first, then finds its binaries built and returns at once.
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock -n 9 || { echo "localcluster: another build of $CACHE is running; waiting for it"; flock 9; }

k8s_dir() { local minor=${1#1.}; echo "$here/go/k8s-1.${minor%%.*}"; }

k8s_regen() {
  local K8S_VERSION=$1; local d; d=$(k8s_dir "$K8S_VERSION"); local staging=v0.${K8S_VERSION#1.} gomod
  mkdir -p "$d"
  [ -f "$d/tools.go" ] || printf '%s\n' '//go:build tools' '' \
    '// Package tools pins the Kubernetes commands this wrapper module builds.' 'package tools' '' 'import (' \
    '	_ "k8s.io/kubernetes/cmd/kube-apiserver"' '	_ "k8s.io/kubernetes/cmd/kube-controller-manager"' \
    '	_ "k8s.io/kubernetes/cmd/kube-scheduler"' ')' >"$d/tools.go"
  (cd "$d" && rm -f go.mod go.sum && go mod init gangweb.invalid/localcluster/k8s >/dev/null 2>&1 &&
    go mod edit -go=1.26 -require="k8s.io/kubernetes@v$K8S_VERSION" &&
    gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])') &&
    for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[A-Za-z0-9._-]*\) => ./staging/src/k8s.io/.*|\1|p' "$gomod"); do
      go mod edit "-replace=$m=$m@$staging"
    done &&
    go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" \
           "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION" \
           "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" && go mod tidy)
}
etcd_regen() {
  (cd "$here/go/etcd" && rm -f go.mod go.sum && go mod init gangweb.invalid/localcluster/etcd >/dev/null 2>&1 &&
    go mod edit -go=1.26 && go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" && go mod tidy)
}
kwok_regen() {
  (cd "$here/go/kwok" && rm -f go.mod go.sum && go mod init gangweb.invalid/localcluster/kwok >/dev/null 2>&1 &&
    go mod edit -go=1.26 && go get "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION" && go mod tidy)
}
kueue_regen() {
  (cd "$here/go/kueue" && rm -f go.mod go.sum && go mod init gangweb.invalid/localcluster/kueue >/dev/null 2>&1 &&
    go mod edit -go=1.26 && go get "sigs.k8s.io/kueue/cmd/kueue@v$KUEUE_VERSION" && go mod tidy)
}

build_k8s() {
  local K8S_VERSION=$1; local d; d=$(k8s_dir "$K8S_VERSION")
  local out=$CACHE/k8s-v$K8S_VERSION/bin v=k8s.io/component-base/version cv=k8s.io/client-go/pkg/version
  local minor=${K8S_VERSION#1.}; minor=${minor%%.*}
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-scheduler" ] && [ -x "$out/kube-controller-manager" ] && return 0
  mkdir -p "$out"
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ) ldf="-s -w"
  for p in $v $cv; do
    ldf+=" -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitVersion=v$K8S_VERSION -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  echo "localcluster: building kube-apiserver, kube-scheduler, kube-controller-manager v$K8S_VERSION (cold: ~10 min on 2 idle cores)"
  (cd "$d" && go build -trimpath -ldflags "$ldf" -o "$out/.tmp/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager) \
     >"$out/../build.log" 2>&1 || { cat "$out/../build.log" >&2; exit 1; }
  mv "$out"/.tmp/* "$out/" && rmdir "$out/.tmp"
  echo "localcluster: built Kubernetes v$K8S_VERSION in $SECONDS s from the start"
}
build_etcd() {
  local out=$CACHE/etcd-v$ETCD_VERSION/bin
  [ -x "$out/etcd" ] && return 0
  mkdir -p "$out"; echo "localcluster: building etcd v$ETCD_VERSION"
  (cd "$here/go/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3) \
    >"$out/../build.log" 2>&1 || { cat "$out/../build.log" >&2; exit 1; }
  mv "$out/etcd.tmp" "$out/etcd"
  echo "localcluster: built etcd v$ETCD_VERSION in $SECONDS s from the start"
}
build_helm() {
  local out=$CACHE/helm-v$HELM_VERSION/bin
  [ -x "$out/helm" ] && return 0
  mkdir -p "$out"; echo "localcluster: building helm v$HELM_VERSION"
  local start; start=$(date +%s)
  # `go install module@version` builds with the module's own go.mod and go.sum (verified against sum.golang.org);
  # -mod=mod because the readonly default applies to a main module, which this build has none of.
  rm -rf "$out/.tmp"
  (GOFLAGS="-mod=mod -buildvcs=false" GOBIN="$out/.tmp" go install -trimpath \
     -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
     "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION") >"$out/../build.log" 2>&1 || { cat "$out/../build.log" >&2; exit 1; }
  mv "$out/.tmp/helm" "$out/helm" && rmdir "$out/.tmp"
  echo "localcluster: built helm v$HELM_VERSION in $(( $(date +%s) - start )) s" | tee -a "$out/../build.log"
}
build_kwok() {
  local out=$CACHE/kwok-v$KWOK_VERSION/bin
  [ -x "$out/kwok" ] && return 0
  mkdir -p "$out"; echo "localcluster: building kwok v$KWOK_VERSION"
  (cd "$here/go/kwok" && go build -trimpath -ldflags "-s -w" -o "$out/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok) \
    >"$out/../build.log" 2>&1 || { cat "$out/../build.log" >&2; exit 1; }
  mv "$out/kwok.tmp" "$out/kwok"
  echo "localcluster: built kwok v$KWOK_VERSION in $SECONDS s from the start"
}
# Kueue's CRDs (config/components/crd: bases, the conversion-webhook patches and their kustomization) and webhook
# manifests (config/components/webhook), copied from the module of the wrapper's go.mod (downloaded if needed) into
# the cache beside the binary: localcluster/kueue.py installs them, rewritten for the local API server.
kueue_manifests() {
  local top=$1 src
  [ -f "$top/config/components/.complete" ] && return 0
  src=$(cd "$here/go/kueue" && go mod download -json sigs.k8s.io/kueue |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || return 1
  rm -rf "$top/config.tmp" && mkdir -p "$top/config.tmp/components" &&
    cp -r "$src/config/components/crd" "$src/config/components/webhook" "$top/config.tmp/components/" &&
    chmod -R u+w "$top/config.tmp" &&  # the module cache is read-only; a later rm -rf must work
    touch "$top/config.tmp/components/.complete" &&
    rm -rf "$top/config" && mv "$top/config.tmp" "$top/config"
}
build_kueue() {
  local top=$CACHE/kueue-v$KUEUE_VERSION
  local out=$top/bin
  mkdir -p "$out"
  kueue_manifests "$top" || { echo "localcluster: copying Kueue's manifests from its module failed" >&2; exit 1; }
  [ -x "$out/kueue" ] && return 0
  echo "localcluster: building the Kueue manager v$KUEUE_VERSION (cold: ~25 min at the lowest priority on a loaded machine)"
  local start; start=$(date +%s)
  (cd "$here/go/kueue" && go build -trimpath \
     -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=v$KUEUE_VERSION" \
     -o "$out/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue) >"$top/build.log" 2>&1 || { cat "$top/build.log" >&2; exit 1; }
  mv "$out/kueue.tmp" "$out/kueue"
  echo "localcluster: built Kueue v$KUEUE_VERSION in $(( $(date +%s) - start )) s" | tee -a "$top/build.log"
}

if [ $regen = 1 ]; then
  for v in "${versions[@]}"; do k8s_regen "$v"; done
  etcd_regen; kwok_regen; kueue_regen
fi
# Everything at once: each `go build` has serial stretches (loading, linking) that the others fill, and a cold build
# overlaps best with whatever else runs (make test runs the tests that need no binary beside it).
pids=()
for part in build_etcd build_kwok build_helm build_kueue; do
  $part &
  pids+=($!)
done
for v in "${versions[@]}"; do
  build_k8s "$v" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed = 0 ] || exit 1
for v in "${versions[@]}"; do "$CACHE/k8s-v$v/bin/kube-apiserver" --version; done
"$CACHE/helm-v$HELM_VERSION/bin/helm" version --short
"$CACHE/etcd-v$ETCD_VERSION/bin/etcd" --version | sed -n 1p  # reads all of it: head would close the pipe early, and pipefail turns SIGPIPE into exit 141
ls -l "$CACHE/kueue-v$KUEUE_VERSION/bin/kueue"  # the manager has no --version flag
echo "localcluster: binaries in $CACHE"
