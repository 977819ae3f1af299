#!/usr/bin/env bash
# stabledif: bench/fio-data-view.sh, briefly (one round of one second per
# job on 16 MiB devices).  Not a measurement: it proves that the script
# runs fio against both servers and prints both tables with all four
# jobs, that each server-CPU quotient is the quotient of its two figures
# (n/a only where a server used no clock tick), and that the exit status
# says whether a throughput ratio is below the target (MISSED).
. "${srcdir:-$(dirname "$0")}/functions.sh"
: "${top_builddir:?top_builddir must be set}"
requires "$NBDKIT" "$FIO" python3
"$FIO" --enghelp=nbd >/dev/null 2>&1 || { echo "$0: SKIP: fio has no nbd engine"; exit 77; }
out=$tmpdir/out

r=0
RUNTIME=1 ROUNDS=1 SIZE=16M FIO="$FIO" NBDKIT=$(nbdkit_wrapper) \
  bash "$srcdir/../bench/fio-data-view.sh" "$top_builddir" > "$out" 2>&1 ||
  r=$?
[ "$r" = 0 ] || [ "$r" = 1 ] || { cat "$out"; fail "fio-data-view.sh: exit $r"; }
python3 - "$out" "$r" <<'PY' || { cat "$out"; fail "fio-data-view.sh: tables"; }
import re, sys
text = open(sys.argv[1]).read()
cpu, tput = text.split("server CPU (user + system, all threads) per GB moved")[1] \
    .split("vs nbdkit memory plugin")
jobs = ["write:128k", "read:128k", "randwrite:4k", "randread:4k"]
missed = False
for j in jobs:
    m = re.search(r"^%s +([0-9]+) ms/GB +([0-9]+) ms/GB +(n/a|[0-9.]+x)$" % j,
                  cpu, re.M)
    assert m, ("cpu row", j)
    a, b = int(m.group(1)), int(m.group(2))
    assert a + b > 0, ("no server used any CPU", j)
    if a > 0 and b > 0:
        q = float(m.group(3)[:-1])
        assert abs(q - a / b) <= 0.01 + 0.01 * q, (j, a, b, q)
    else:
        assert m.group(3) == "n/a", m.group(0)
    m = re.search(r"^%s +([0-9.]+) MB/s +([0-9.]+) MB/s +([0-9.]+)x +0\.90x(  MISSED)?$"
                  % j, tput, re.M)
    assert m, ("throughput row", j)
    a, b, q = (float(m.group(i)) for i in (1, 2, 3))
    assert a > 0 and b > 0 and abs(q - a / b) <= 0.01 + 0.01 * q, (j, a, b, q)
    assert bool(m.group(4)) == (a / b < 0.9), m.group(0)
    missed = missed or bool(m.group(4))
assert missed == (sys.argv[2] == "1"), "exit status and MISSED disagree"
PY
echo "$0: ok"
