#!/usr/bin/env bash
# Build kubemark's hollow kubelet with carpool's patches (patches/*.patch: the machine's size, providerID and
# node IP from flags, the kubelet's --config, allocatable by the kubelet's own formula, the kubelet's refusal
# of restricted --node-labels) into $REALCLUSTER_HOME/bin/kubemark. The scheduler, controller manager and
# API server stay unpatched, where ../shared/kube-control-plane/build.sh put them.
#   tests/realcluster/build.sh     (~1-2 min on 2 cores once ../shared/kube-apiserver/build.sh warmed the cache;
#                                   nothing to do when the binary was built from the same patches)
# The patches are applied in place to the shared Kubernetes source by ../shared/kube-control-plane/build.sh
# (PATCH_DIR); a patch changed since it was applied is first taken back out (its applied copy is kept).
# Environment: SHARED_DIR (default: ../shared beside the repository, or beside the main checkout of a git
# worktree), KUBE_APISERVER_HOME, SRC, REALCLUSTER_HOME (default ~/.cache/carpool-realcluster), OUT.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
shared_dir() {
  [[ -n ${SHARED_DIR:-} ]] && { echo "$SHARED_DIR"; return; }
  [[ -d $ROOT/../shared ]] && { echo "$ROOT/../shared"; return; }
  # a git worktree lives elsewhere; its main checkout is where ../shared is
  local common; common=$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  [[ -n $common && -d $common/../../shared ]] && { echo "$common/../../shared"; return; }
  echo "$ROOT/../shared"
}
SHARED_DIR=$(shared_dir)
BUILD=$SHARED_DIR/kube-control-plane/build.sh
[[ -x $BUILD ]] || { echo "no $BUILD: set SHARED_DIR to the folder holding kube-control-plane/" >&2; exit 1; }
KUBE_APISERVER_HOME=${KUBE_APISERVER_HOME:-$HOME/.cache/carpool-kube-apiserver}
SRC=${SRC:-$KUBE_APISERVER_HOME/k8s}
REALCLUSTER_HOME=${REALCLUSTER_HOME:-$HOME/.cache/carpool-realcluster}
OUT=${OUT:-$REALCLUSTER_HOME/bin}
PATCH_DIR=$HERE/patches
APPLIED=$REALCLUSTER_HOME/applied-patches
STAMP=$OUT/kubemark.patches.sha256
mkdir -p "$OUT" "$APPLIED"

wanted=$(cat "$PATCH_DIR"/*.patch | sha256sum | cut -d' ' -f1)
if [[ -x $OUT/kubemark && -f $STAMP && $(cat "$STAMP") == "$wanted" ]]; then
  echo "kubemark up to date: $OUT/kubemark"; exit 0
fi
# take out, newest first, each applied patch that changed or went away, so the new version applies
for old in $(ls -r "$APPLIED"/*.patch 2>/dev/null || true); do
  new=$PATCH_DIR/$(basename "$old")
  [[ -f $new ]] && cmp -s "$old" "$new" && continue
  if git -C "$SRC" apply --reverse --check "$old" 2>/dev/null; then git -C "$SRC" apply --reverse "$old"; echo "reverted $old"; fi
  rm -f "$old"
done
rc=0
PATCH_DIR=$PATCH_DIR COMPONENTS=kubemark OUT=$OUT SRC=$SRC KUBE_APISERVER_HOME=$KUBE_APISERVER_HOME "$BUILD" || rc=$?
# recorded even when the build failed: what is applied must be taken out before a fixed version goes in
cp "$PATCH_DIR"/*.patch "$APPLIED"/
[[ $rc == 0 ]] || exit $rc
echo "$wanted" > "$STAMP"
