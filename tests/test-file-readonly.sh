#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: file= storage that cannot be opened for writing is served
# read-only, as nbdkit's file plugin serves a read-only image.
#
# A disk written through both views is served again from a read-only
# directory (as root: a read-only bind mount in a private mount
# namespace, EROFS; otherwise the permission bits, EACCES).  Both views
# are read-only exports that read back every byte of data and PI; writes
# are refused by libnbd and, with libnbd's checks off, by the server;
# flush works; the control socket reports the store read-only and
# refuses inject; the files are byte for byte what they were.  Two
# read-only servers share the files.  An image without PATH.pi, and a new
# disk, in a read-only directory are refused with the reason.

# As root, start again in a private mount namespace: the read-only mount
# below goes away with this test, whatever happens to it.
if [ "$(id -u)" = 0 ] && [ -z "${STABLEDIF_PRIVATE_MOUNTS:-}" ]; then
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "$0: SKIP: root cannot make a private mount namespace (unshare -m)"
    exit 77
  fi
  STABLEDIF_PRIVATE_MOUNTS=1 exec unshare -m --propagation private \
    bash "$0" "$@"
fi

. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires cmp
STABLEDIF_CTL=$top_builddir/client/stabledif-ctl/stabledif-ctl
[ -x "$STABLEDIF_CTL" ] || fail "$STABLEDIF_CTL not built"

d=$tmpdir/disks
mkdir "$d"
f=$d/disk

# Phase 1: a disk with host PI (dif view) and device PI (data view).
cat > "$tmpdir/write.py" <<'PY'
rng = random.Random(5)
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
I, E, N = d.interval, d.ext, d.nblocks
for k in range(12):
    lba = rng.randrange(0, N - 4)
    hd.pwrite(b"".join(d.block(rand_bytes(rng, I), lba + i, app=k)
                       for i in range(4)), lba * E)
hdata.pwrite(rand_bytes(rng, 3 * I + 100), 5 * I + 7)
hd.flush()
open(os.environ["OUT"], "wb").write(hd.pread(N * E, 0))
open(os.environ["OUT"] + ".data", "wb").write(hdata.pread(N * I, 0))
PY
OUT=$tmpdir/img run_nbdsh "$tmpdir/write.py" size=256K file="$f"
cp "$f" "$tmpdir/disk.before"
cp "$f.pi" "$tmpdir/disk.pi.before"
# A raw image of the same size, without PATH.pi.
head -c 262144 /dev/zero > "$d/raw"

undo_read_only () {
  if [ "$(id -u)" = 0 ]; then
    umount "$d" || umount -l "$d" || :
  else
    chmod -R u+w "$d" 2>/dev/null || :
  fi
}
cleanup_hooks="${cleanup_hooks:-} undo_read_only"
if [ "$(id -u)" = 0 ]; then
  mount --bind "$d" "$d"
  mount -o remount,ro,bind "$d"
  why="Read-only file system"
else
  chmod a-w "$d"/* "$d"
  why="Permission denied"
fi
if : 2>/dev/null > "$d/probe"; then
  fail "$d is still writable"
fi

# Phase 2: read-only exports with every byte of data and PI.
cat > "$tmpdir/read.py" <<'PY'
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
N, E, I = d.nblocks, d.ext, d.interval
assert hd.is_read_only() and hdata.is_read_only(), "not read-only exports"
assert not hd.can_trim() and not hdata.can_zero()
assert hd.pread(N * E, 0) == open(os.environ["OUT"], "rb").read()
assert hdata.pread(N * I, 0) == open(os.environ["OUT"] + ".data", "rb").read()
# libnbd refuses to write to a read-only export; so does the server when
# libnbd lets the request through.
for strict in (True, False):
    for export, n in (("dif", E), ("data", I)):
        h = connect(export, strict=strict)
        expect_error(errno.EPERM, h.pwrite, bytes(n), 0)
        # (libnbd says EINVAL for a command the export does not offer.)
        expect_error((errno.EPERM, errno.EINVAL), h.trim, n, 0)
        expect_error((errno.EPERM, errno.EINVAL), h.zero, n, 0)
hdata.flush()
hd.flush()
print("ok: both views read-only, data and PI intact")
PY
ctl=$tmpdir/ctl.sock
SERVE_LOG=$tmpdir/serve.log \
  OUT=$tmpdir/img run_nbdsh "$tmpdir/read.py" size=256K file="$f" ctl="$ctl" ||
  { cat "$tmpdir/serve.log" >&2; fail "reading the read-only disk"; }
grep -q "file=$f cannot be opened for writing: serving it read-only" \
  "$tmpdir/serve.log" || fail "nbdkit did not say the disk is read-only"
cmp "$f" "$tmpdir/disk.before" || fail "the data file changed"
cmp "$f.pi" "$tmpdir/disk.pi.before" || fail "the PI file changed"

# The control socket: status says read-only, inject is refused.
serve size=256K file="$f" ctl="$ctl" -- "
  '$STABLEDIF_CTL' -s '$ctl' status > '$tmpdir/status.txt' &&
  '$STABLEDIF_CTL' -s '$ctl' --json status > '$tmpdir/status.json' &&
  if '$STABLEDIF_CTL' -s '$ctl' inject guard 3 2> '$tmpdir/inject.err'; then
    echo inject-succeeded > '$tmpdir/inject.bad'
  fi"
grep -q '^size .*store file (read-only)$' "$tmpdir/status.txt" ||
  { cat "$tmpdir/status.txt" >&2; fail "status does not say read-only"; }
python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["profile"]["read_only"] is True
' "$tmpdir/status.json" || fail "profile: read_only is not true"
[ ! -e "$tmpdir/inject.bad" ] || fail "inject on a read-only disk succeeded"
grep -q 'inject: the disk is read-only' "$tmpdir/inject.err" ||
  { cat "$tmpdir/inject.err" >&2; fail "inject: no read-only refusal"; }
cmp "$f.pi" "$tmpdir/disk.pi.before" || fail "inject changed the PI file"
echo "ok: stabledif-ctl status (and its JSON) says read-only, inject refused"

# Two read-only servers at once (a shared lock).
serve_killable size=256K file="$f" ctl=none
serve size=256K file="$f" ctl=none -- "$NBDINFO \"\$uri\"" \
  > "$tmpdir/second.txt"
"$NBDINFO" "nbd+unix:///?socket=$sock" > "$tmpdir/first.txt"
stop_bg
wait "$bg" || :
grep -q 'is_read_only: true' "$tmpdir/first.txt" || fail "first server"
grep -q 'is_read_only: true' "$tmpdir/second.txt" || fail "second server"
echo "ok: two read-only servers share the files"

# Nothing new can be made in the read-only directory.
expect_config_error "cannot be opened for writing.*raw\.pi" \
  size=256K file="$d/raw"
expect_config_error "fresh: $why" size=256K file="$d/fresh"
[ ! -e "$d/raw.pi" ] && [ ! -e "$d/fresh" ] || fail "a file was created"
