#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: a writer and a mutator race over one buffer (see
# test-client-race.c).  Under policy none the device rejects the writes
# whose data changed after the checksum -- its own counters (read with
# stabledif-ctl) agree with the library's -- the library names the
# changed bytes, and nothing corrupt is stored; under wait, wait-sent and
# snapshot the same workload gets no error, in the library or the
# device; on a device without PI, auto never waits.
. "${srcdir:-$(dirname "$0")}/functions.sh"

R=./test-client-race
CTL=${top_builddir:-..}/client/stabledif-ctl/stabledif-ctl
[ -x "$CTL" ] || fail "$CTL is not built"

# counter NAME FILE: a counter from "stabledif-ctl counters" output.
counter () {
  awk -v n="$1" '$1 == n { print $2 }' "$2"
}
# stat NAME FILE: a field of the client's last "stats:" line.
stat () {
  tail -n1 "$2" | tr ' ' '\n' | awk -F= -v n="$1" '$1 == n { print $2 }'
}

for fi in T10-DIF-TYPE1-CRC:512 EXT-DIF-TYPE1-CRC64:4096; do
  f=${fi%%:*}
  i=${fi##*:}
  for p in none wait wait-sent snapshot auto; do
    sock=$tmpdir/ctl.sock
    out=$tmpdir/client.out
    cnt=$tmpdir/counters.out
    rm -f "$out" "$cnt"
    serve size=4M format=$f interval=$i ctl=$sock -- \
      "$R \"\$uri\" $p > $out && $CTL -s $sock counters > $cnt" ||
      fail "policy $p on $f/$i"
    cat "$out"
    rejected=$(stat rejected "$out")
    guard=$(counter write_errors.guard "$cnt")
    dev_rejected=$(counter writes_rejected "$cnt")
    echo "  device: write_errors.guard=$guard writes_rejected=$dev_rejected"
    [ "$dev_rejected" = "$rejected" ] ||
      fail "$p on $f: device rejected $dev_rejected, library $rejected"
    # Each rejected write had exactly one changed block.
    [ "$guard" = "$rejected" ] ||
      fail "$p on $f: device counted $guard guard errors for $rejected writes"
    if [ "$p" = none ]; then
      [ "$rejected" -gt 0 ] || fail "none on $f: nothing rejected"
    else
      [ "$rejected" = 0 ] || fail "$p on $f: $rejected writes rejected"
    fi
  done
done

serve size=4M format=none ctl=none -- $R '$uri' auto ||
  fail "auto on format=none"
