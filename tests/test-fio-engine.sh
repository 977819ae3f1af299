#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the fio engine (client/fio-engine, stabledif-fio(1)) with
# the real plugin.  Every PI format and interval: fio's randrw with its
# own crc32c verify on top of the library's PI, at iodepth 1 and 32, and
# with the engine's own PI (pi_act=0), no PI error anywhere.  mutate=
# under policy none: the device rejects the changed writes, and the engine's count of rejections is the device's
# (stabledif-ctl counters); the same job under wait and snapshot: no
# rejection, and fio's verify still passes.  Bad engine options fail
# with fio's option error naming the option.  App tags: writes whose
# app tag the device does not take are rejected there (the engine's
# rejections are the device's), reads check apptag= under apptag_mask=
# and only what pi_chk= names.  A server killed under a running job
# ends it with errors naming the lost connection.  Skips without the engine
# (configure found no fio source tree) or fio.
. "${srcdir:-$(dirname "$0")}/functions.sh"
: "${top_builddir:?top_builddir must be set}"
engine=$top_builddir/client/fio-engine/.libs/stabledif-fio.so
[ -f "$engine" ] ||
  { echo "$0: SKIP: the fio engine was not built (configure --with-fio=DIR)"; exit 77; }
requires "$NBDKIT" "$FIO" python3
ctl=$top_builddir/client/stabledif-ctl/stabledif-ctl

# An engine built with --enable-sanitizers needs the runtimes loaded
# first into fio, which is not instrumented.
fio_env=()
if ldd "$engine" | grep -q libasan; then
  fio_env=(env "LD_PRELOAD=$SANITIZER_PRELOAD"
           "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi

# $tmpdir/fio.sh URI OUT [fio args...]: fio with the engine on URI, its
# output in OUT; then, if $tmpdir/ctl.sock exists, the device's counters
# in OUT.ctl.  Exit status: fio's.
cat > "$tmpdir/fio.sh" <<SH
uri=\$1 out=\$2; shift 2
r=0
${fio_env[*]+$(printf '%q ' "${fio_env[@]}")}"$FIO" --ioengine=external:"$engine" --uri="\$uri" "\$@" \
  > "\$out" 2>&1 || r=\$?
[ ! -S "$tmpdir/ctl.sock" ] ||
  "$ctl" -s "$tmpdir/ctl.sock" --json counters > "\$out.ctl" || r=99
exit \$r
SH

# counter OUT JOB NAME: the engine's counter NAME of job JOB in OUT.
counter () {
  sed -n "s/^stabledif-fio: $2: .* $3=\([0-9]*\).*/\1/p" "$1"
}

# 1. Every format and interval, randrw + crc32c verify, iodepth 1 and 32.
for fi in T10-DIF-TYPE1-CRC:512 T10-DIF-TYPE1-CRC:4096 \
          T10-DIF-TYPE2-CRC:512 T10-DIF-TYPE2-CRC:4096 \
          T10-DIF-TYPE3-CRC:512 T10-DIF-TYPE3-CRC:4096 \
          EXT-DIF-TYPE1-CRC64:4096 EXT-DIF-TYPE3-CRC64:4096; do
  f=${fi%:*} i=${fi#*:} out=$tmpdir/out-$f-$i
  serve size=8M format="$f" interval="$i" ctl=none -- \
    bash "$tmpdir/fio.sh" '$uri' "$out" --rw=randrw --bs=4k --size=4m \
      --verify=crc32c --name=qd1 --iodepth=1 \
      --name=qd32 --iodepth=32 --stonewall \
      --name=caller --iodepth=32 --pi_act=0 --stonewall ||
    { cat "$out"; fail "$f/$i: fio failed"; }
  for j in qd1 qd32 caller; do
    w=$(counter "$out" $j writes) r=$(counter "$out" $j reads)
    [ "${w:-0}" -gt 0 ] && [ "${r:-0}" -gt 0 ] ||
      { cat "$out"; fail "$f/$i $j: no counters line, or no I/O"; }
    for c in rejected_writes write_errors read_pi_errors read_errors; do
      [ "$(counter "$out" $j $c)" = 0 ] ||
        { cat "$out"; fail "$f/$i $j: $c is not 0"; }
    done
  done
  grep -q 'err= 0' "$out" || { cat "$out"; fail "$f/$i: fio saw errors"; }
  echo "ok: $f/$i"
done

# 2. mutate=: rejected under none, never under wait or snapshot.
mutate_job=(--name=m --rw=write --bs=4k --size=1m --iodepth=8 --mutate=3
            --race_delay_us=300)
out=$tmpdir/out-none
serve size=4M ctl="$tmpdir/ctl.sock" -- \
  bash "$tmpdir/fio.sh" '$uri' "$out" "${mutate_job[@]}" \
    --policy=none --unsafe=1 --continue_on_error=write && r=0 || r=$?
[ "$r" != 99 ] || { cat "$out"; fail "none: stabledif-ctl failed"; }
n=$(counter "$out" m rejected_writes)
dev=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"]["writes_rejected"])' "$out.ctl")
[ "${n:-0}" -gt 0 ] && [ "$n" = "$dev" ] ||
  { cat "$out" "$out.ctl"; fail "none: engine rejections ${n:-none}, device $dev"; }
grep -q 'rejected by device (EIO) at LBA' "$out" ||
  { cat "$out"; fail "none: no message naming the LBA"; }
echo "ok: policy none: $n writes rejected, as the device counted"

for p in wait snapshot; do
  out=$tmpdir/out-$p
  serve size=4M ctl="$tmpdir/ctl.sock" -- \
    bash "$tmpdir/fio.sh" '$uri' "$out" "${mutate_job[@]}" --policy=$p \
      --verify=crc32c ||
    { cat "$out"; fail "$p: fio failed"; }
  dev=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"]["writes_rejected"])' "$out.ctl")
  [ "$(counter "$out" m rejected_writes)" = 0 ] && [ "$dev" = 0 ] ||
    { cat "$out"; fail "$p: writes rejected"; }
  echo "ok: policy $p: no write rejected, verify passed"
done
rm -f "$tmpdir/ctl.sock"

# 3. Bad options: fio's option error naming the option; policy none on
# a device that needs stable writes, without unsafe=1: the library's.
for bad in "policy=bogus:policy" "pi_chk=GUARD,CRC:pi_chk" \
           "connections=17:connections" "pi_act=2:pi_act" \
           "apptag=0x10000:apptag" "apptag_mask=0x10000:apptag_mask" \
           "race_delay_us=20000000:race_delay_us" "policy=none:policy"; do
  opt=${bad%:*} name=${bad##*:} out=$tmpdir/out-bad
  if serve size=1M ctl=none -- bash "$tmpdir/fio.sh" '$uri' "$out" \
       --"$opt" --name=b --rw=read --size=64k; then
    cat "$out"; fail "$opt: fio accepted it"
  fi
  grep -q "$name" "$out" || { cat "$out"; fail "$opt: no error naming $name"; }
done
echo "ok: bad options"

# JSON output stays JSON: the counters go to standard error then.
out=$tmpdir/out-json
serve size=1M ctl=none -- bash "$tmpdir/fio.sh" '$uri' "$out" --name=j \
  --rw=write --bs=4k --size=64k --thread --output-format=json \
  --output="$tmpdir/j.json" || { cat "$out"; fail "json: fio failed"; }
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmpdir/j.json" ||
  { cat "$tmpdir/j.json"; fail "json: fio's output is not JSON"; }
[ "$(counter "$out" j writes)" = 16 ] ||
  { cat "$out"; fail "json: no counters line on standard error"; }
echo "ok: --output-format=json"

# 4. App tags, on a device that checks 0x12xx (app-tag=0x1234/0xff00).
# rejected OUT JOB: the engine's rejections of JOB in OUT, checked
# against the device's counter (OUT.ctl); prints them.
rejected () {
  local n dev
  n=$(counter "$1" "$2" rejected_writes)
  dev=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"]["writes_rejected"])' "$1.ctl")
  [ "${n:-x}" = "$dev" ] ||
    { cat "$1" "$1.ctl"; fail "$2: engine rejections ${n:-none}, device $dev"; }
  echo "$n"
}
app_job=(--rw=write --bs=4k --size=256k --iodepth=8)
for act in 0 1; do
  out=$tmpdir/out-app$act
  # A tag the device takes under its mask: stored, then read back with
  # the APPTAG check on the bits that matter.
  serve size=1M app-tag=0x1234/0xff00 ctl="$tmpdir/ctl.sock" -- \
    bash "$tmpdir/fio.sh" '$uri' "$out" --pi_act=$act --apptag=0x12ab \
      --name=w "${app_job[@]}" --name=r --rw=read --bs=4k --size=256k \
      --apptag_mask=0xff00 --pi_chk=APPTAG --stonewall ||
    { cat "$out"; fail "pi_act=$act apptag=0x12ab: fio failed"; }
  [ "$(rejected "$out" w)" = 0 ] && [ "$(counter "$out" r read_pi_errors)" = 0 ] ||
    { cat "$out"; fail "pi_act=$act apptag=0x12ab: rejected or read errors"; }
  # A tag it does not take: every write rejected by the device, named.
  out=$tmpdir/out-app$act-bad
  serve size=1M app-tag=0x1234/0xff00 ctl="$tmpdir/ctl.sock" -- \
    bash "$tmpdir/fio.sh" '$uri' "$out" --pi_act=$act --apptag=0x5600 \
      --name=w "${app_job[@]}" --continue_on_error=write && r=0 || r=$?
  [ "$r" != 99 ] || { cat "$out"; fail "apptag=0x5600: stabledif-ctl failed"; }
  [ "$(rejected "$out" w)" = 64 ] ||
    { cat "$out"; fail "pi_act=$act apptag=0x5600: not all 64 writes rejected"; }
  grep -q 'app check' "$out" ||
    { cat "$out"; fail "pi_act=$act apptag=0x5600: no message naming the app check"; }
  echo "ok: pi_act=$act: app tag 0x12ab stored and read back, 0x5600 rejected"
done
rm -f "$tmpdir/ctl.sock"

# Reads check the tag asked for, under its mask, and only with APPTAG.
out=$tmpdir/out-appread
cat > "$tmpdir/appread.sh" <<SH
uri=\$1 out=\$2 rd=(--name=r --rw=read --bs=4k --size=64k)
bash "$tmpdir/fio.sh" "\$uri" "\$out.w" --apptag=0x12ab --name=w --rw=write \\
  --bs=4k --size=64k || exit 1
bash "$tmpdir/fio.sh" "\$uri" "\$out.bad" --apptag=0x12cd "\${rd[@]}" \\
  --continue_on_error=read
[ -s "\$out.bad" ] || exit 1
bash "$tmpdir/fio.sh" "\$uri" "\$out.mask" --apptag=0x12cd \\
  --apptag_mask=0xff00 "\${rd[@]}" || exit 1
bash "$tmpdir/fio.sh" "\$uri" "\$out.guard" --apptag=0x12cd \\
  --pi_chk=GUARD,REFTAG "\${rd[@]}"
SH
serve size=1M app-tag=0x1234/0xff00 ctl=none -- \
  bash "$tmpdir/appread.sh" '$uri' "$out" ||
  { cat "$out".*; fail "apptag on read: not checked as asked"; }
[ "$(counter "$out.bad" r read_errors)" = 16 ] && grep -q 'app check' "$out.bad" ||
  { cat "$out.bad"; fail "apptag 0x12cd on read: not 16 failed reads naming the app check"; }
echo "ok: reads check apptag= under apptag_mask=, as pi_chk= asks"

# 5. The server dies under a running job (fio waits in the library's
# poll): the job ends, within a bound, with I/O errors that name the
# lost connection, and the engine's counters are printed.
# The server is killed once it has taken writes from the job (fio may
# take a while to start on a loaded machine); its control socket is not
# $tmpdir/ctl.sock, which fio.sh would ask once fio has ended.
rm -f "$tmpdir/ctl.sock"
serve_killable size=4M ctl="$tmpdir/ctl-lost.sock"
out=$tmpdir/out-lost
timeout 60 bash "$tmpdir/fio.sh" "nbd+unix:///dif?socket=$tmpdir/sock" \
  "$out" --name=l --rw=randwrite --bs=4k --size=4m --iodepth=32 \
  --time_based --runtime=30 &
job=$!
n=0
for _ in $(seq 300); do
  n=$("$ctl" -s "$tmpdir/ctl-lost.sock" --json counters 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["requests"]["dif"]["write"])' \
      2>/dev/null) || n=0
  [ "${n:-0}" -gt 0 ] && break
  sleep 0.1
done
[ "${n:-0}" -gt 0 ] || fail "server killed: no write from fio within 30 s"
kill -9 "$(cat "$pidfile")"
r=0
wait "$job" || r=$?
[ "$r" != 0 ] && [ "$r" != 124 ] ||
  { cat "$out"; fail "server killed: fio exited $r (124: did not end)"; }
grep -q 'connection to the device lost' "$out" ||
  { cat "$out"; fail "server killed: no error naming the lost connection"; }
w=$(counter "$out" l write_errors)
[ "${w:-0}" -gt 0 ] ||
  { cat "$out"; fail "server killed: no failed write counted"; }
echo "ok: server killed mid-job: fio ended with $w failed writes"
echo "$0: ok"
