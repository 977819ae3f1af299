#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: nbdinfo shows the device profile of each view: the exports
# "", data and dif are listed with their profile lines as descriptions,
# and each export has the size, block sizes and capabilities of its view.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires "$NBDKIT" "$NBDINFO" python3

# check PARAMS... -- NBLOCKS INTERVAL TUPLE FORMAT
check () {
  local params=()
  while [ "$1" != "--" ]; do params+=("$1"); shift; done
  shift
  local nblocks=$1 interval=$2 tuple=$3 format=$4
  local sw=1
  [ "$format" != none ] || sw=0
  local data_line="stabledif/1 view=data format=$format interval=$interval tuple=$tuple stable_writes=$sw"
  local dif_line="stabledif/1 view=dif format=$format interval=$interval tuple=$tuple stable_writes=$sw"
  local out="$tmpdir/out"
  rm -rf "$out"; mkdir "$out"

  serve "${params[@]}" -- '
    set -e
    '"$NBDINFO"' --list "$uri" > '"$out"'/list.txt
    '"$NBDINFO"' --list --json "$uri" > '"$out"'/list.json
    for e in "" data dif; do
      '"$NBDINFO"' --json --no-content \
        "nbd+unix:///$e?socket=$unixsocket" > '"$out"'/export-$e.json
    done'

  # The text listing shows both description lines.
  grep -qxF "	description: $dif_line" "$out/list.txt" ||
    { cat "$out/list.txt"; fail "${params[*]}: no dif description in --list"; }
  grep -qxF "	description: $data_line" "$out/list.txt" ||
    { cat "$out/list.txt"; fail "${params[*]}: no data description in --list"; }

  python3 - "$out" "$nblocks" "$interval" "$tuple" "$data_line" "$dif_line" <<'PY'
import json, sys
out, nblocks, interval, tuple_, data_line, dif_line = sys.argv[1:]
nblocks, interval, tuple_ = int(nblocks), int(interval), int(tuple_)
ext = interval + tuple_
want = {
    "": (data_line, nblocks * interval),
    "data": (data_line, nblocks * interval),
    "dif": (dif_line, nblocks * ext),
}

def check_export(e, where):
    name = e["export-name"]
    line, size = want[name]
    assert e.get("description") == line, (where, name, e.get("description"))
    assert e["export-size"] == size, (where, name, e["export-size"], size)
    assert e["is_read_only"] is False, (where, name)
    for cap in ("can_flush", "can_fua", "can_trim", "can_zero",
                "can_fast_zero"):
        assert e[cap] is True, (where, name, cap)
    assert e["block_size_minimum"] == 1, (where, name, e)
    assert e["block_size_preferred"] == interval, (where, name, e)
    mx = e["block_size_maximum"]
    if name == "dif":
        assert mx % ext == 0 and mx <= 32 << 20 and mx + ext > 32 << 20, \
            (where, name, mx)
    else:
        assert mx == 32 << 20, (where, name, mx)
    assert "base:allocation" in e.get("contexts", []), (where, e)

listing = json.load(open(out + "/list.json"))
names = sorted(e["export-name"] for e in listing["exports"])
assert names == ["", "data", "dif"], names
for e in listing["exports"]:
    check_export(e, "--list")
for name in ("", "data", "dif"):
    j = json.load(open("%s/export-%s.json" % (out, name)))
    assert len(j["exports"]) == 1, j
    assert j["exports"][0]["export-name"] == name, j
    check_export(j["exports"][0], "export " + repr(name))
PY
  echo "ok: ${params[*]}: $dif_line"
}

check size=1M -- 2048 512 8 T10-DIF-TYPE1-CRC
check 1M -- 2048 512 8 T10-DIF-TYPE1-CRC
check size=1M format=T10-DIF-TYPE2-CRC -- 2048 512 8 T10-DIF-TYPE2-CRC
check size=1M format=T10-DIF-TYPE3-CRC interval=4096 -- 256 4096 8 T10-DIF-TYPE3-CRC
check size=1M format=EXT-DIF-TYPE1-CRC64 -- 256 4096 16 EXT-DIF-TYPE1-CRC64
check size=1M format=EXT-DIF-TYPE3-CRC64 interval=4096 -- 256 4096 16 EXT-DIF-TYPE3-CRC64
check size=1M format=none -- 2048 512 0 none
check size=1M format=none interval=4096 -- 256 4096 0 none
