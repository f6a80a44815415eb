#!/usr/bin/env bash
# Stop 57, run 2: gpu.sh's GPU-only tile LU (N=22528, nb 2048, --update tiles,
# --workers 1: one CPU worker and the GPU, dmda) ran at 3746 GFLOP/s in run 1
# against 4942 in stop 46's r4. The same in one run, old (805e387) and new
# (3ca7849) alternated, 3 rounds, then one traced run of each.
set -u
O=/tmp/r57b
rm -rf "$O"; mkdir -p "$O"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/summary.txt"; }
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
export LD_LIBRARY_PATH
A="lu --n 22528 --nb 2048 --gpus all --update tiles --workers 1"
for r in 1 2 3; do
  for b in new old; do
    timeout -k 3 40 ".gpu/tessera-$b" $A > "$O/tiles-$b-r$r.txt" 2>&1
    log "tiles $b r$r rc=$?: $(awk '/^TS/ {print $7 " GFLOP/s " $6 " s"}' "$O/tiles-$b-r$r.txt") $(grep -oE 'PASSED|FAILED' "$O/tiles-$b-r$r.txt")"
  done
done
for b in new old; do
  timeout -k 3 40 ".gpu/tessera-$b" $A --trace "$O/tiles-$b.json" > "$O/tiles-$b-trace.txt" 2>&1
  log "traced $b rc=$?: $(awk '/^TS/ {print $7}' "$O/tiles-$b-trace.txt")"
  ".gpu/tessera-new" trace summary "$O/tiles-$b.json" > "$O/tiles-$b-summary.txt" 2>&1
  gzip -f "$O/tiles-$b.json"
done
tar czf "${OUT:-/tmp}/r57b.tgz" -C /tmp r57b
log done
