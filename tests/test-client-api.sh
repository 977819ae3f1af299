#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif's public API is consistent everywhere: every
# function declared in stabledif.h is listed in the version script, is
# exported by the built shared library (and nothing else is), and is
# documented in libstabledif(3); stabledif.pc names the library.
. "${srcdir:-$(dirname "$0")}/functions.sh"

top=${top_srcdir:-$srcdir/..}
builddir=${top_builddir:-..}
hdr=$top/client/libstabledif/stabledif.h
syms=$top/client/libstabledif/libstabledif.syms
pod=$top/man/libstabledif.pod
so=$builddir/client/libstabledif/.libs/libstabledif.so

# Functions: an identifier followed by " (" at the start of a declaration.
grep -oE '\bstabledif_[a-z0-9_]+ \(' "$hdr" | sed 's/ ($//' | sort -u \
  > "$tmpdir/header"
grep -oE '^[[:space:]]+stabledif_[a-z0-9_]+;' "$syms" | tr -d ' \t;' |
  sort -u > "$tmpdir/syms"
[ -s "$tmpdir/header" ] || fail "no functions found in $hdr"
diff -u "$tmpdir/header" "$tmpdir/syms" ||
  fail "stabledif.h and libstabledif.syms disagree"

requires nm
nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' |
  sed 's/@.*//' | sort -u > "$tmpdir/exported"
diff -u "$tmpdir/header" "$tmpdir/exported" ||
  fail "$so exports something else than the API"

while read -r f; do
  grep -q "\\b$f\\b" "$pod" || fail "$f is not documented in $pod"
done < "$tmpdir/header"
echo "$(wc -l < "$tmpdir/header") functions: declared, listed, exported," \
  "documented"

# The pkg-config file, as configured in the build tree.
requires pkg-config
libs=$(PKG_CONFIG_PATH=$builddir/client/libstabledif pkg-config --libs stabledif)
echo "pkg-config --libs stabledif: $libs"
case "$libs" in *-lstabledif*) ;; *) fail "stabledif.pc: $libs" ;; esac
PKG_CONFIG_PATH=$builddir/client/libstabledif pkg-config --print-requires-private \
  stabledif | grep -q '^libnbd' || fail "stabledif.pc does not require libnbd"
