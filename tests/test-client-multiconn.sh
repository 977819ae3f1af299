#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif with several connections per handle
# (stabledif_set_connections) against the real plugin.  See
# test-client-multiconn.c for what each mode checks.
#  - io with 2 and 4 connections on T10-DIF-TYPE1-CRC/512 and
#    EXT-DIF-TYPE1-CRC64/4096, behind nbdkit's log filter: the log shows
#    which connection carried each request (the "log" mode checks it),
#    and nbdcopy reads the data view back for comparison;
#  - the multi-conn filter hiding multi-conn: one connection, I/O works;
#  - the limit filter refusing the second connection;
#  - a server describing another disk on a further connection (eval);
#  - argument errors and 16 connections;
#  - the server killed, and one connection of two cut by a relay.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires "$NBDCOPY"

P=./test-client-multiconn
size=$((16 * 1024 * 1024))

# io_run FORMAT INTERVAL N EXPECT [FILTER PARAM]: the io mode with N
# connections asked and EXPECT wanted (behind the log filter and
# FILTER with PARAM), then the log check, and the data view as nbdcopy
# reads it against what the program wrote.
io_run () {
  local f=$1 i=$2 n=$3 expect=$4 filter=() param=()
  local log=$tmpdir/log out=$tmpdir/io.out writes
  [ $# -lt 6 ] || { filter=(--filter="$5"); param=("$6"); }
  # The --run command ends only once the server has closed every
  # connection (the log filter writes Disconnect in its close): nbdkit
  # 1.32 skips .close for a connection still closing when it is told to
  # quit, and LeakSanitizer then reports that connection's handles.
  # Bounded: 10 s at most.
  rm -f "$log" "$tmpdir/model" "$tmpdir/data"
  run_nbdkit -U - --exit-with-parent --filter=log ${filter[@]+"${filter[@]}"} \
    "$PLUGIN" size=$size format="$f" interval="$i" ctl=none \
    logfile="$log" ${param[@]+"${param[@]}"} --run "$(run_cmd "$P \"\$uri\" io $n $expect $tmpdir/model > $out &&
      $NBDCOPY \"nbd+unix:///data?socket=\$unixsocket\" - > $tmpdir/data &&
      for t in \$(seq 100); do
        [ \$(grep -c ' Connect ' $log) = \$(grep -c ' Disconnect ' $log) ] && break
        sleep 0.1
      done")" ||
    fail "io: $f/$i, $n connections asked, $expect wanted"
  cat "$out"
  cmp "$tmpdir/model" "$tmpdir/data" ||
    fail "io: $f/$i, $n connections: nbdcopy reads other data than written"
  writes=$(sed -n 's/^writes=//p' "$out")
  [ -n "$writes" ] || fail "io: no write count"
  $P - log "$log" "$f" "$i" "$expect" "$writes" ||
    fail "log: $f/$i, $n connections"
}

for fi in T10-DIF-TYPE1-CRC:512 EXT-DIF-TYPE1-CRC64:4096; do
  for n in 2 4; do
    io_run "${fi%%:*}" "${fi##*:}" $n $n
  done
done

# The server does not advertise multi-conn: one connection, no error.
io_run T10-DIF-TYPE1-CRC 512 4 1 multi-conn multi-conn-mode=disable

# Argument errors; the most connections.
serve size=1M ctl=none -- $P '$uri' api || fail "api"

# One client at a time: the second connection is refused.
run_nbdkit -U - --exit-with-parent --filter=limit "$PLUGIN" size=1M \
  ctl=none limit=1 --run "$(run_cmd "$P \"\$uri\" refused 2")" ||
  fail "refused"

# A further connection that describes another disk: nbdkit's eval
# plugin numbers its connections and answers like the real plugin,
# except for one size or profile line.
if "$NBDKIT" eval --version >/dev/null 2>&1; then
  serve size=1M format=T10-DIF-TYPE1-CRC interval=512 ctl=none -- \
    $P '$uri' describe '>' "$tmpdir/describe" || fail "describe"
  profile=$(sed -n 1p "$tmpdir/describe")
  difsize=$(sed -n 2p "$tmpdir/describe")
  ext=$(sed -n 3p "$tmpdir/describe")
  case "$profile" in
    "stabledif/1 view=dif "*) ;;
    *) fail "describe: profile \"$profile\"" ;;
  esac
  # The same disk but for an app tag it checks: another disk.
  other="$profile app_tag=0x1234/0xffff"
  for variant in size:2 profile:3; do
    what=${variant%%:*}
    which=${variant##*:}
    rm -f "$tmpdir/opens"
    run_nbdkit -U - --exit-with-parent eval \
      open="n=\$(cat $tmpdir/opens 2>/dev/null || echo 0); n=\$((n + 1));
            echo \$n > $tmpdir/opens; echo \$n" \
      get_size="if [ $what = size ] && [ \"\$2\" = $which ]; then
                  echo $((difsize + ext)); else echo $difsize; fi" \
      export_description="if [ $what = profile ] && [ \"\$2\" = $which ];
                  then echo '$other'; else echo '$profile'; fi" \
      can_multi_conn='exit 0' \
      pread='head -c "$3" /dev/zero' \
      --run "$(run_cmd "$P \"\$uri\" mismatch 3 $which")" ||
      fail "mismatch: $what on connection $which"
  done
else
  echo "$0: nbdkit's eval plugin is missing: the profile mismatch is" \
    "not tested"
fi

# The server killed with requests on both connections.
serve_killable size=1M ctl=none
$P "nbd+unix:///?socket=$sock" killed "$pidfile" || fail "killed"
wait "$bg" || :

# One connection of two cut (the first, then the second): the program
# relays both through its own socket and drops one.
for k in 0 1; do
  serve size=1M ctl=none -- \
    $P '$unixsocket' cut "$tmpdir/relay.sock" $k || fail "cut $k"
done
