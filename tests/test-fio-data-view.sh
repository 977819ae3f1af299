#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: bench/fio-data-view.sh, briefly (two rounds of one second
# per job on 16 MiB devices).  Not a measurement: it proves that the
# script runs fio against both servers and prints both tables with all
# four jobs; that each server-CPU quotient is the quotient of its two
# figures (n/a only where a server used no clock tick); that each
# round's ratio is the quotient of that round's bandwidths; that the
# summary gives, per job, the medians of the rounds' bandwidths and
# ratios and their lowest and highest ratio; and that the exit status
# says whether a median ratio is below the target (MISSED).
. "${srcdir:-$(dirname "$0")}/functions.sh"
: "${top_builddir:?top_builddir must be set}"
requires "$NBDKIT" "$FIO" python3
"$FIO" --enghelp=nbd >/dev/null 2>&1 || { echo "$0: SKIP: fio has no nbd engine"; exit 77; }
out=$tmpdir/out

r=0
RUNTIME=1 ROUNDS=2 SIZE=16M FIO="$FIO" NBDKIT=$(nbdkit_wrapper) \
  bash "$srcdir/../bench/fio-data-view.sh" "$top_builddir" > "$out" 2>&1 ||
  r=$?
[ "$r" = 0 ] || [ "$r" = 1 ] || { cat "$out"; fail "fio-data-view.sh: exit $r"; }
python3 - "$out" "$r" <<'PY' || { cat "$out"; fail "fio-data-view.sh: tables"; }
import re, statistics, sys
text = open(sys.argv[1]).read()
rounds, rest = text.split("server CPU (user + system, all threads) per GB moved")
cpu, tput = rest.split("vs nbdkit memory plugin")
jobs = ["write:128k", "read:128k", "randwrite:4k", "randread:4k"]
close = lambda x, y, tol: abs(x - y) <= tol + 0.01 * abs(y)
missed = False
for j in jobs:
    # The rounds: stabledif's bandwidth, the memory plugin's, their ratio.
    rs = re.findall(r"^  round ([0-9]+) %s +stabledif +([0-9.]+) MB/s +memory +"
                    r"([0-9.]+) MB/s +([0-9.]+)x$" % j, rounds, re.M)
    assert [int(x[0]) for x in rs] == [1, 2], ("rounds", j, rs)
    a_s = [float(x[1]) for x in rs]
    b_s = [float(x[2]) for x in rs]
    q_s = [float(x[3]) for x in rs]
    for a, b, q in zip(a_s, b_s, q_s):
        assert a > 0 and b > 0 and close(q, a / b, 0.006), (j, a, b, q)

    m = re.search(r"^%s +([0-9]+) ms/GB +([0-9]+) ms/GB +(n/a|[0-9.]+x)$" % j,
                  cpu, re.M)
    assert m, ("cpu row", j)
    a, b = int(m.group(1)), int(m.group(2))
    assert a + b > 0, ("no server used any CPU", j)
    if a > 0 and b > 0:
        q = float(m.group(3)[:-1])
        assert close(q, a / b, 0.01), (j, a, b, q)
    else:
        assert m.group(3) == "n/a", m.group(0)

    m = re.search(r"^%s +([0-9.]+) MB/s +([0-9.]+) MB/s +([0-9.]+)x +"
                  r"([0-9.]+)-([0-9.]+)x +0\.90x(  MISSED)?$" % j, tput, re.M)
    assert m, ("summary row", j)
    a, b, q, lo, hi = (float(m.group(i)) for i in range(1, 6))
    assert close(a, statistics.median(a_s), 0.1), ("median stabledif", j, a)
    assert close(b, statistics.median(b_s), 0.1), ("median memory", j, b)
    assert close(q, statistics.median(q_s), 0.006), ("median ratio", j, q)
    assert close(lo, min(q_s), 0.006) and close(hi, max(q_s), 0.006), \
        ("lowest/highest", j, lo, hi, q_s)
    # MISSED exactly when the median is below 0.9 (printed with two
    # decimals: 0.90 may be a median just below it).
    if abs(q - 0.9) > 0.006:
        assert bool(m.group(6)) == (q < 0.9), m.group(0)
    missed = missed or bool(m.group(6))
assert missed == (sys.argv[2] == "1"), "exit status and MISSED disagree"
PY
echo "$0: ok"
