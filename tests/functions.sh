# Shell helpers for integration tests.  Sourced by tests/*.sh.
#
# Tests run the real nbdkit with the plugin under "nbdkit --run", so the
# server always stops when the client command finishes (bounded, no
# leftover processes), on a private Unix socket (-U -).
set -e
set -u

: "${NBDKIT:=nbdkit}"
: "${PLUGIN:?PLUGIN must point at the built plugin .so}"

# Skip (exit 77, automake's SKIP) unless every program named is present.
requires () {
  for p in "$@"; do
    if ! command -v "$p" >/dev/null 2>&1; then
      echo "$0: SKIP: $p not found"
      exit 77
    fi
  done
}

# A private temporary directory, removed at exit.
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/stabledif-test.XXXXXX")
cleanup_hooks=""
cleanup () {
  for h in $cleanup_hooks; do "$h" || :; done
  rm -rf "$tmpdir"
}
trap cleanup EXIT

# Run nbdkit with the plugin and plugin parameters, serving on a private
# Unix socket, and run the command given after "--" with $uri/$unixsocket
# set (nbdkit --run).  Example:
#   serve size=1M -- nbdinfo '$uri'
serve () {
  local params=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do params+=("$1"); shift; done
  shift
  "$NBDKIT" -U - --exit-with-parent "$PLUGIN" "${params[@]}" --run "$*"
}

fail () {
  echo "$0: FAIL: $*" >&2
  exit 1
}
