#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# "make install" into a DESTDIR puts every deliverable where the build's
# prefix says, and nothing else (no libtool archive in nbdkit's plugin
# directory); the installed programs, plugin, header and stabledif.pc
# work from there; "make uninstall" removes every file again.  Neither
# rewrites anything in the build tree, which the tests running meanwhile
# use.
source "${srcdir:-$(dirname "$0")}/functions.sh"

dest="$tmpdir/dest"
# make as the build tree's Makefiles are run, without what the make of
# "make check" passes down (its jobserver, its variables such as TESTS).
tmake () {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" \
    --no-print-directory "$@"
}
# var SUBDIR NAME: the value of the make variable NAME in the build
# tree's SUBDIR/Makefile.
var () {
  tmake -s -C "$top_builddir/$1" --eval="print-var: ; @echo '\$($2)'" \
    print-var
}

bindir=$(var . bindir)
libdir=$(var . libdir)
includedir=$(var . includedir)
man1dir=$(var man man1dir)
man3dir=$(var man man3dir)
man7dir=$(var man man7dir)
pkgconfigdir=$(var client/libstabledif pkgconfigdir)
plugindir=$(var plugin plugindir)
for d in "$bindir" "$libdir" "$includedir" "$man1dir" "$man3dir" \
    "$man7dir" "$pkgconfigdir" "$plugindir"; do
  case $d in /*) ;; *) fail "cannot read the install directories ('$d')" ;; esac
done

# The library's file names as libtool installs them (real file, soname
# link, development link).
la="$top_builddir/client/libstabledif/libstabledif.la"
library_names=$(sed -n "s/^library_names='\(.*\)'\$/\1/p" "$la")
soname=$(sed -n "s/^dlname='\(.*\)'\$/\1/p" "$la")
[ -n "$library_names" ] && [ -n "$soname" ] || fail "$la: no library names"

expected="$tmpdir/expected"
{
  for p in stabledif-ctl stabledif-bench stabledif-attach; do
    echo "$bindir/$p"
  done
  for n in libstabledif.la $library_names; do echo "$libdir/$n"; done
  echo "$includedir/stabledif.h"
  echo "$pkgconfigdir/stabledif.pc"
  echo "$plugindir/nbdkit-stabledif-plugin.so"
  for p in stabledif-ctl stabledif-bench stabledif-attach \
      nbdkit-stabledif-plugin stabledif-fio; do
    echo "$man1dir/$p.1"
  done
  # The fio engine, if configure found a fio source tree.
  if [ -f "$top_builddir/client/fio-engine/stabledif-fio.la" ]; then
    echo "$libdir/stabledif/stabledif-fio.so"
  fi
  echo "$man3dir/libstabledif.3"
  echo "$man7dir/stabledif.7"
} | sort > "$expected"

# --- install ---

# A build that is out of date is brought up to date first (never the case
# under "make check", which builds everything before running tests), so
# that whatever changes in the build tree from here on is install's doing.
tmake -C "$top_builddir" all > "$tmpdir/all.log" 2>&1 ||
  fail "make all failed: $(tail -20 "$tmpdir/all.log")"
marker="$tmpdir/marker"
touch "$marker"
tmake -C "$top_builddir" install DESTDIR="$dest" > "$tmpdir/install.log" 2>&1 ||
  fail "make install DESTDIR=... failed: $(tail -20 "$tmpdir/install.log")"

(cd "$dest" && find . ! -type d | sed 's/^\.//' | sort) > "$tmpdir/installed"
diff -u "$expected" "$tmpdir/installed" > "$tmpdir/diff" ||
  fail "make install: the installed files are not the expected ones:
$(cat "$tmpdir/diff")"

[ -L "$dest$libdir/$soname" ] && [ -f "$dest$libdir/$soname" ] ||
  fail "$libdir/$soname is not a link to the library"

# The installed programs run with the installed library.
export LD_LIBRARY_PATH="$dest$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for p in stabledif-ctl stabledif-bench; do
  "$dest$bindir/$p" --help > "$tmpdir/help" 2>&1 ||
    fail "installed $p --help failed: $(cat "$tmpdir/help")"
  grep -q "^Usage: $p" "$tmpdir/help" ||
    fail "installed $p --help: no usage: $(cat "$tmpdir/help")"
done
lib=$(ldd "$dest$bindir/stabledif-bench" | awk -v s="$soname" '$1 == s { print $3 }')
[ "$lib" -ef "$dest$libdir/$soname" ] ||
  fail "installed stabledif-bench loads '$lib', not $libdir/$soname"

# nbdkit loads the installed plugin.
if command -v "$NBDKIT" > /dev/null 2>&1; then
  run_nbdkit "$dest$plugindir/nbdkit-stabledif-plugin.so" --dump-plugin \
    > "$tmpdir/dump" 2>&1 ||
    fail "nbdkit cannot load the installed plugin: $(cat "$tmpdir/dump")"
  grep -qx 'name=stabledif' "$tmpdir/dump" ||
    fail "installed plugin: $(cat "$tmpdir/dump")"
fi

# stabledif.pc describes the installed library; a program builds against
# the installed header and library alone.
pkg_config=$(var . PKG_CONFIG)
pc () { PKG_CONFIG_PATH="$dest$pkgconfigdir" "$pkg_config" "$@" stabledif; }
[ "$(pc --variable=libdir)" = "$libdir" ] &&
  [ "$(pc --variable=includedir)" = "$includedir" ] ||
  fail "stabledif.pc: libdir $(pc --variable=libdir), includedir $(pc --variable=includedir)"
pc --libs | grep -qw -- -lstabledif || fail "stabledif.pc: Libs: $(pc --libs)"
cat > "$tmpdir/prog.c" <<'EOF'
#include <stabledif.h>
int
main (void)
{
  struct stabledif_handle *h = stabledif_create ();
  if (h == NULL)
    return 1;
  stabledif_close (h);
  return 0;
}
EOF
cc=$(var . CC)
cflags=$(var . CFLAGS)
ldflags=$(var . LDFLAGS)
# shellcheck disable=SC2086  # the build's own flags, split as make does
$cc $cflags -I"$dest$includedir" -o "$tmpdir/prog" "$tmpdir/prog.c" \
  $ldflags -L"$dest$libdir" -lstabledif > "$tmpdir/cc.log" 2>&1 ||
  fail "cannot build against the installed library: $(cat "$tmpdir/cc.log")"
"$tmpdir/prog" || fail "a program linked with the installed library failed"

# --- uninstall ---

tmake -C "$top_builddir" uninstall DESTDIR="$dest" \
  > "$tmpdir/uninstall.log" 2>&1 ||
  fail "make uninstall DESTDIR=... failed: $(tail -20 "$tmpdir/uninstall.log")"
left=$(cd "$dest" && find . ! -type d)
[ -z "$left" ] || fail "make uninstall left files behind: $left"

# Nothing in the build tree was rebuilt or rewritten (tests/ holds the
# logs of the tests running meanwhile).
changed=$(find "$top_builddir" -path "$top_builddir/tests" -prune -o \
  -path "$tmpdir" -prune -o ! -type d -newer "$marker" -print)
[ -z "$changed" ] ||
  fail "make install/uninstall rewrote files of the build tree: $changed"
