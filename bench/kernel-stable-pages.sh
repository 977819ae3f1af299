#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/kernel-stable-pages.sh: what stable_writes costs a real kernel's
# writers on a stabledif device, next to stabledif-bench's model.
#
#   make -C BUILDDIR/tests vm-relay vm-stable-probe
#   bench/kernel-stable-pages.sh [BUILDDIR] [--json] [--svg FILE]
#
# For each kernel image in /boot whose modules are installed (or the one
# STABLEDIF_VM_KERNEL names), one boot of the VM tests' guest (Debian's
# kernel under QEMU, tests/vm/), with T10-DIF-TYPE1-CRC devices served by
# nbdkit behind its delay filter and attached in the guest with
# stabledif-attach (stable_writes=1).  On each, per filesystem (ext2 and
# ext4), the flag is written through sysfs before mkfs, 1 then 0 or 0
# then 1 in turn, and the guest measures (tests/vm/vm-stable-probe.c):
#
#   rewrite  write a 4 KiB page, start its writeback, write it again:
#            the second write's latency, ITER times, at each device
#            latency of DELAYS;
#   writers  the workload of stabledif-bench's model: THREADS writers
#            writing WRITE_SIZE bytes at random in PAGES hot pages,
#            THINK_US apart, for SECS seconds, the kernel's flusher
#            writing back every FLUSH_MS (vm.dirty_writeback_centisecs
#            and vm.dirty_expire_centisecs), on the device of MODEL_DELAY;
#            after the guest, stabledif-bench runs the same workload
#            (policies wait and none) on that device's dif view;
#   dbench   (if installed) DBENCH_CLIENTS clients for DBENCH_SECS on
#            ext2, DBENCH_RUNS runs per setting, alternating, on a
#            device of DBENCH_DELAY, vm.dirty_expire_centisecs=100 and
#            vm.dirty_writeback_centisecs=500 (the kernel's default).
#
# It prints the tables and the ratios stable_writes=1 over 0 (and the
# model's wait over none); --json prints one JSON object instead (per
# kernel: rewrite, writers, model and dbench results, latencies in ms),
# --svg FILE writes the write latency percentiles of the kernel and the
# model under both settings.  Environment (defaults): DELAYS ("20 50 100" ms),
# ITER (15), FSS ("ext2 ext4"), MODEL_DELAY (50), THREADS (4), PAGES
# (1024), SECS (5), WRITE_SIZE (512), THINK_US (20), FLUSH_MS (100),
# DBENCH_DELAY (100), DBENCH_CLIENTS (4), DBENCH_SECS (20), DBENCH_RUNS
# (3; 0 skips dbench), and those of tests/vm/run-vm.sh.  Under TCG on 2
# CPUs a kernel takes about 6.5 minutes.  Not part of "make check".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=. json= svg=
while [ $# -gt 0 ]; do
  case $1 in
    --json) json=1 ;;
    --svg) [ $# -ge 2 ] || { echo "$0: --svg needs a FILE" >&2; exit 2; }
           svg=$2; shift ;;
    -*) echo "$0: unknown option $1" >&2; exit 2 ;;
    *) builddir=$1 ;;
  esac
  shift
done
[ -x "$builddir/tests/vm-stable-probe" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)
probe_prog=$builddir/tests/vm-stable-probe
relay_prog=$builddir/tests/vm-relay
attach_prog=$builddir/client/stabledif-attach/stabledif-attach
bench_prog=$builddir/client/stabledif-bench/stabledif-bench
for p in "$probe_prog" "$relay_prog" "$attach_prog" "$bench_prog"; do
  [ -x "$p" ] || { echo "$0: $p not found: build, then make -C BUILDDIR/tests vm-relay vm-stable-probe" >&2; exit 2; }
done
[ -z "$svg" ] || svg=$(cd "$(dirname "$svg")" && pwd)/${svg##*/}

: "${DELAYS:=20 50 100}" "${ITER:=15}" "${FSS:=ext2 ext4}" "${MODEL_DELAY:=50}"
: "${THREADS:=4}" "${PAGES:=1024}" "${SECS:=5}" "${WRITE_SIZE:=512}"
: "${THINK_US:=20}" "${FLUSH_MS:=100}"
: "${DBENCH_DELAY:=100}" "${DBENCH_CLIENTS:=4}" "${DBENCH_SECS:=20}" "${DBENCH_RUNS:=3}"
[ $((FLUSH_MS % 10)) = 0 ] && [ "$FLUSH_MS" -ge 10 ] ||
  { echo "$0: FLUSH_MS=$FLUSH_MS: must be a multiple of 10 (the sysctls count centiseconds)" >&2; exit 2; }

# The test helpers, as "make check" runs them.
export srcdir=$here/../tests top_builddir=$builddir
export PLUGIN=${PLUGIN:-$builddir/stabledif.so}
: "${STABLEDIF_TEST_TIMEOUT:=7200}" "${STABLEDIF_VM_TIMEOUT:=3600}"
export STABLEDIF_TEST_TIMEOUT STABLEDIF_VM_TIMEOUT
source "$srcdir/functions.sh"
source "$srcdir/vm/functions-vm.sh"
requires "$NBDKIT" python3

dbench_files=()
if [ "$DBENCH_RUNS" -gt 0 ]; then
  if [ -x /usr/bin/dbench ] && [ -f /usr/share/dbench/client.txt ]; then
    dbench_files=(-b /usr/bin/dbench -f /usr/share/dbench/client.txt)
  else
    echo "$0: dbench not installed (Debian: dbench): skipping its table" >&2
    DBENCH_RUNS=0
  fi
fi

# Every image with its modules, or the one the environment names.
kernels=()
if [ -n "${STABLEDIF_VM_KERNEL:-}" ]; then
  kernels=("$STABLEDIF_VM_KERNEL")
else
  for k in $(ls /boot/vmlinuz-* 2>/dev/null | sort -V); do
    [ -d "/lib/modules/${k#/boot/vmlinuz-}/kernel" ] && kernels+=("$k")
  done
fi
[ ${#kernels[@]} -gt 0 ] ||
  { echo "$0: no /boot/vmlinuz-* with modules (Debian: linux-image-cloud-amd64)" >&2; exit 2; }

# The guest's tests: flusher settings, one probe per device.
flush_cs=$((FLUSH_MS / 10))
devices=() tests="sysctl:vm.dirty_writeback_centisecs/$flush_cs"
tests="$tests,sysctl:vm.dirty_expire_centisecs/$flush_cs"
fss=$(echo $FSS | tr ' ' +)
i=0 n=0 model_port=
for d in $DELAYS; do
  work=rewrite/$ITER
  if [ "$d" = "$MODEL_DELAY" ]; then
    work="$work+writers/$THREADS/$PAGES/$SECS/$WRITE_SIZE/$THINK_US"
    model_port=d$d
  fi
  flags=1+0
  [ $((i % 2)) = 1 ] && flags=0+1
  devices+=("d$d --filter=delay $PLUGIN format=T10-DIF-TYPE1-CRC size=64M wdelay=${d}ms")
  tests="$tests,probe:d$d:$n:$fss:$work:$flags"
  i=$((i + 1)) n=$((n + 1))
done
[ -n "$model_port" ] ||
  { echo "$0: MODEL_DELAY=$MODEL_DELAY is not one of DELAYS ($DELAYS)" >&2; exit 2; }
if [ "$DBENCH_RUNS" -gt 0 ]; then
  flags=
  for ((r = 0; r < DBENCH_RUNS; r++)); do
    if [ $((r % 2)) = 0 ]; then flags=$flags+1+0; else flags=$flags+0+1; fi
  done
  devices+=("dbench --filter=delay $PLUGIN format=T10-DIF-TYPE1-CRC size=256M wdelay=${DBENCH_DELAY}ms")
  tests="$tests,sysctl:vm.dirty_writeback_centisecs/500"
  tests="$tests,sysctl:vm.dirty_expire_centisecs/100"
  tests="$tests,probe:dbench:$n:ext2:dbench/$DBENCH_CLIENTS/$DBENCH_SECS:${flags#+}"
fi

say () { [ -n "$json" ] || echo "$*"; }
say "kernel-stable-pages: ${#kernels[@]} kernel image(s): ${kernels[*]}"
say "guest tests: $tests"

results=()
for k in "${kernels[@]}"; do
  STABLEDIF_VM_KERNEL=$k vm_requires
  kdir=$tmpdir/${vm_kver}
  mkdir -p "$kdir"
  vm_initramfs "$kdir/initrd.cpio" -m virtio_pci -m virtio_console -m nbd \
    -b /sbin/mke2fs -b "$attach_prog" -b "$relay_prog" -b "$probe_prog" \
    ${dbench_files[@]+"${dbench_files[@]}"}
  log=$kdir/console.log
  # The model on the writers' device, same parameters, after the guest.
  model="$bench_prog --no-progress --json -p wait,none -t $THREADS"
  model="$model --working-set $((PAGES * 4096)) -d $SECS --write-size $WRITE_SIZE"
  model="$model --think-us $THINK_US --flush-interval $FLUSH_MS"
  model="$model 'nbd+unix:///dif?socket=$tmpdir/$model_port.sock' > $kdir/model.json"
  say "booting $k ($(date +%T))"
  start=$(date +%s)
  rc=0
  # nbdkit's messages (the model's policy none gets writes rejected).
  vm_boot_nbd "$log" "$kdir/initrd.cpio" "$tests" "$model" "${devices[@]}" \
    2> "$kdir/nbdkit.log" || rc=$?
  say "  guest and model took $(( $(date +%s) - start ))s"
  [ "$(cat "$tmpdir/qemu.rc")" = 0 ] || { vm_show "$log"; fail "$k: QEMU exit status $(cat "$tmpdir/qemu.rc")"; }
  for t in $(echo "$tests" | tr , ' '); do
    vm_result "$log" "$t" > /dev/null
  done
  [ $rc = 0 ] || { tail -20 "$kdir/nbdkit.log" >&2; fail "$k: stabledif-bench (the model) failed (status $rc)"; }
  results+=("$vm_kver" "$log" "$kdir/model.json")
done

python3 - "$json" "$svg" "$MODEL_DELAY" "${results[@]}" <<'EOF'
import json, re, statistics, sys

as_json, svg_path, model_delay = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]
kernels = [args[i:i + 3] for i in range(0, len(args), 3)]

line_re = re.compile(r"^STABLEDIF-VM: PROBE: (\S+) attach=(\d) stable_writes=(\d) "
                     r"fs=(\S+) (\S+) (.*)$")

def parse(log):
    rows = []
    for raw in open(log, "rb").read().decode("utf-8", "replace").splitlines():
        m = line_re.match(raw.strip("\r"))
        if not m:
            continue
        port, attach, sw, fs, kind, rest = m.groups()
        kv = dict(w.split("=", 1) for w in rest.split() if "=" in w)
        rows.append(dict(port=port, sw=int(sw), fs=fs, kind=kind, **kv))
    return rows

def ratio(a, b):
    return a / b if b else float("inf")

out = {"latency_unit": "ms", "model_delay_ms": model_delay, "kernels": []}
for kver, log, model_json in kernels:
    rows = parse(log)
    model = json.load(open(model_json))
    k = {"kernel": kver, "rewrite": [], "writers": [], "model": {}, "dbench": {}}
    for r in rows:
        if r["kind"] == "rewrite":
            k["rewrite"].append({"delay_ms": int(r["port"][1:]), "fs": r["fs"],
                                 "stable_writes": r["sw"],
                                 **{q: int(r[q + "_us"]) / 1000.0
                                    for q in ("min", "median", "p99", "max")}})
        elif r["kind"] == "writers":
            n, secs = int(r["n"]), float(r["secs"])
            k["writers"].append({"fs": r["fs"], "stable_writes": r["sw"], "count": n,
                                 "mb_s": int(r["bytes"]) / secs / 1e6,
                                 **{q: int(r[q + "_ns"]) / 1e6 for q in
                                    ("avg", "p50", "p90", "p99", "p999", "p9999", "max")}})
        elif r["kind"] == "dbench":
            k["dbench"].setdefault(str(r["sw"]), []).append(r)
    for run in model["runs"]:
        w = run["operations"]["write"]
        k["model"][run["policy"]] = {"count": w["count"], "avg": w["avg_ms"],
                                     "p50": w["p50_ms"], "p99": w["p99_ms"],
                                     "p999": w["p999_ms"], "max": w["max_ms"],
                                     "mb_s": run["throughput_mb_s"]}
    k["model_config"] = model["config"]
    # dbench: split each setting's rows into runs (each starts at its first op).
    db = {}
    for sw, rs in k["dbench"].items():
        runs, cur = [], []
        for r in rs:
            if cur and r["op"] == cur[0]["op"]:
                runs.append(cur)
                cur = []
            cur.append({"op": r["op"], "count": int(r["count"]),
                        "avg_ms": float(r["avg_ms"]), "max_ms": float(r["max_ms"])})
        if cur:
            runs.append(cur)
        db[sw] = runs
    k["dbench"] = db
    out["kernels"].append(k)

if as_json:
    json.dump(out, sys.stdout, indent=1)
    print()
else:
    for k in out["kernels"]:
        print()
        print("== kernel %s" % k["kernel"])
        print()
        print("Rewrite of a page under writeback (ms): stable_writes=1 vs 0")
        print(" fs    delay |   1: min   median      p99      max |   0: min   median      p99      max | median 1/0")
        keys = sorted({(r["fs"], r["delay_ms"]) for r in k["rewrite"]})
        for fs, d in keys:
            one = [r for r in k["rewrite"] if (r["fs"], r["delay_ms"], r["stable_writes"]) == (fs, d, 1)][0]
            zero = [r for r in k["rewrite"] if (r["fs"], r["delay_ms"], r["stable_writes"]) == (fs, d, 0)][0]
            print(" %-5s %3d ms | %8.3f %8.3f %8.3f %8.3f | %8.3f %8.3f %8.3f %8.3f | %8.0fx"
                  % (fs, d, one["min"], one["median"], one["p99"], one["max"],
                     zero["min"], zero["median"], zero["p99"], zero["max"],
                     ratio(one["median"], zero["median"])))
        c = k["model_config"]
        print()
        print("Writers, model and kernel side by side: %d writers, %d pages of 4096 bytes, "
              "%d-byte writes %d us apart, %g s, writeback every %d ms, device write +%d ms"
              % (c["threads"], c["working_set"] // c["page_size"], c["write_size"],
                 c["think_us"], c["duration_s"], c["flush_interval_ms"], model_delay))
        print(" side    setting                 count  write avg  write p99 write p99.9  write max     MB/sec")
        def row(side, setting, r):
            print(" %-7s %-18s %10d %10.3f %10.3f %11.3f %10.3f %10.3f"
                  % (side, setting, r["count"], r["avg"], r["p99"], r["p999"], r["max"], r["mb_s"]))
        for pol, sw in (("wait", 1), ("none", 0)):
            if pol in k["model"]:
                row("model", "policy " + pol, k["model"][pol])
            for w in k["writers"]:
                if w["stable_writes"] == sw:
                    row("kernel", "stable_writes=%d %s" % (sw, w["fs"]), w)
        print(" ratios, 1 over 0 (model: wait over none):")
        if "wait" in k["model"] and "none" in k["model"]:
            m1, m0 = k["model"]["wait"], k["model"]["none"]
            print("  model         p99 %9.1fx  p99.9 %9.1fx  max %9.1fx  MB/sec %6.2fx"
                  % (ratio(m1["p99"], m0["p99"]), ratio(m1["p999"], m0["p999"]),
                     ratio(m1["max"], m0["max"]),
                     ratio(m1["mb_s"], m0["mb_s"])))
        for fs in sorted({w["fs"] for w in k["writers"]}):
            w1 = [w for w in k["writers"] if w["fs"] == fs and w["stable_writes"] == 1][0]
            w0 = [w for w in k["writers"] if w["fs"] == fs and w["stable_writes"] == 0][0]
            print("  kernel %-6s p99 %9.1fx  p99.9 %9.1fx  max %9.1fx  MB/sec %6.2fx"
                  % (fs, ratio(w1["p99"], w0["p99"]), ratio(w1["p999"], w0["p999"]),
                     ratio(w1["max"], w0["max"]),
                     ratio(w1["mb_s"], w0["mb_s"])))
        if k["dbench"]:
            print()
            print("dbench on ext2 (ms), the run with the median WriteX max per setting:")
            wx = {}
            for sw in ("1", "0"):
                runs = k["dbench"].get(sw, [])
                maxes = [next(r["max_ms"] for r in run if r["op"] == "WriteX") for run in runs]
                wx[sw] = maxes
                if not runs:
                    continue
                med = sorted(range(len(runs)), key=lambda i: maxes[i])[len(runs) // 2]
                print(" stable_writes=%s" % sw)
                print("  Operation      Count    AvgLat    MaxLat")
                print("  ----------------------------------------")
                for r in runs[med]:
                    print("  %-12s %7d %9.3f %9.3f" % (r["op"], r["count"], r["avg_ms"], r["max_ms"]))
            print(" WriteX max, every run: stable_writes=1: %s; 0: %s"
                  % (", ".join("%.1f" % v for v in wx.get("1", [])),
                     ", ".join("%.1f" % v for v in wx.get("0", []))))
            if wx.get("1") and wx.get("0"):
                print(" median WriteX max 1 over 0: %.1fx"
                      % ratio(statistics.median(wx["1"]), statistics.median(wx["0"])))

if svg_path:
    # Write latency percentiles, log scale: model wait/none, kernel 1/0.
    qs = [("p50", "p50"), ("p99", "p99"), ("p99.9", "p999"), ("max", "max")]
    series = []
    colours = {"1": "#c0392b", "0": "#2471a3"}
    for k in out["kernels"]:
        for pol, sw in (("wait", "1"), ("none", "0")):
            if pol in k["model"]:
                series.append(("model %s" % pol, colours[sw], "6,4",
                               [k["model"][pol][q] for _, q in qs]))
            for w in k["writers"]:
                if str(w["stable_writes"]) == sw:
                    series.append(("%s %s stable_writes=%s" % (k["kernel"], w["fs"], sw),
                                   colours[sw], "", [w[q] for _, q in qs]))
    import math
    vals = [v for s in series for v in s[3] if v > 0]
    lo = math.floor(math.log10(min(vals))) if vals else -3
    hi = math.ceil(math.log10(max(vals))) if vals else 3
    hi = max(hi, lo + 1)
    W, H, L, T, B = 900, 420, 70, 30, 60
    pw, ph = W - L - 390, H - T - B
    def y(v):
        v = max(v, 10 ** lo)
        return T + ph - (math.log10(v) - lo) / (hi - lo) * ph
    def x(i):
        return L + i * pw / (len(qs) - 1)
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="14">Write latency: the kernel (stable_writes) and stabledif-bench\'s model (policy)</text>' % L]
    for e in range(lo, hi + 1):
        s.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (L, L + pw, y(10 ** e), y(10 ** e)))
        s.append('<text x="%d" y="%.1f" text-anchor="end">%g ms</text>' % (L - 6, y(10 ** e) + 4, 10 ** e))
    for i, (name, _) in enumerate(qs):
        s.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x(i), T + ph + 20, name))
    for j, (name, col, dash, v) in enumerate(series):
        pts = " ".join("%.1f,%.1f" % (x(i), y(val)) for i, val in enumerate(v))
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>' % (col, dash, pts))
        ly = T + 10 + j * 18
        s.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>' % (L + pw + 20, L + pw + 50, ly, ly, col, dash))
        s.append('<text x="%d" y="%d">%s</text>' % (L + pw + 56, ly + 4, name))
    s.append('<text x="%d" y="%d">percentile of the writers\' write latencies</text>' % (L, H - 15))
    s.append("</svg>")
    with open(svg_path, "w") as f:
        f.write("\n".join(s) + "\n")
    if not as_json:
        print()
        print("SVG: %s" % svg_path)
EOF
