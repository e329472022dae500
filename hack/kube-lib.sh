# Shared by the scripts that build Kubernetes from source (sourced, not run): the pinned
# versions, the cache, and the scratch module every Kubernetes command builds from.
# shellcheck shell=bash

KUBE_VERSION=1.37.1
PS_CACHE=${PS_CACHE:-$HOME/.cache/partnerstream}
OUT=bin/k8s

# reports_version BIN TEXT [ARGS...]: BIN exists and its version output (ARGS, default
# --version) contains TEXT. The output is read whole: `| grep -q` would stop reading at the
# match, and under pipefail the writer's SIGPIPE made a cached binary look stale.
reports_version() {
  local bin=$1 text=$2 out
  shift 2
  [ $# -gt 0 ] || set -- --version
  [ -x "$bin" ] && out=$("$bin" "$@" 2>/dev/null) && [[ $out == *"$text"* ]]
}

# kube_version_ldflags: what `--version` of a command built from the module reports.
kube_version_ldflags() {
  echo "-X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_VERSION#1.}"
}

# kube_scratch_module: prints the directory of a module that requires k8s.io/kubernetes and
# repeats its replace lines (`go install` refuses a module with replace directives). The
# commands are `package main` inside k8s.io/kubernetes and build from it by import path.
kube_scratch_module() {
  local mod=$PS_CACHE/build/kubernetes-v$KUBE_VERSION
  if [ ! -f "$mod/go.mod" ]; then
    rm -rf "$mod.tmp" && mkdir -p "$mod.tmp"
    local gomod
    gomod=$(cd "$mod.tmp" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
    {
      echo "module psbuild/kubernetes"
      echo "go 1.25"
      echo "require k8s.io/kubernetes v$KUBE_VERSION"
      grep -E '=> \./staging/src/' "$gomod" | awk -v v="v0.${KUBE_VERSION#1.}" '{print "replace " $1 " => " $1 " " v}'
    } >"$mod.tmp/go.mod"
    rm -rf "$mod" && mv "$mod.tmp" "$mod"
  fi
  echo "$mod"
}
