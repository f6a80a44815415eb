#!/usr/bin/env bash
# Stop 57, run 3, on a freshly started machine: does the tile LU's first run
# still lose ~10 s with the warm-up before the clock (tessera-fix) that
# 3ca7849 (tessera-new) lacks? The page cache is dropped before each run
# where the machine allows it; else only the first run is cold, and it is
# tessera-fix's.
set -u
O=/tmp/r57c
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
log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; }
if drop; then DROP=1; log "drop_caches works"; else DROP=0; log "drop_caches refused: only the first run is cold"; fi
A="lu --n 22528 --nb 2048 --gpus all --update tiles --workers 1"
one() { # binary tag
  [ "$DROP" = 1 ] && drop
  timeout -k 3 45 ".gpu/tessera-$1" $A --trace "$O/tiles-$2.json" > "$O/tiles-$2.txt" 2>&1
  log "$2 rc=$?: $(awk '/^TS/ {print $7 " GFLOP/s " $6 " s"}' "$O/tiles-$2.txt") $(grep -oE 'PASSED|FAILED' "$O/tiles-$2.txt") | $(grep -E 'warmed|cuda0:.*MiB' "$O/tiles-$2.txt" | tr '\n' ' ')"
  ".gpu/tessera-fix" trace summary "$O/tiles-$2.json" > "$O/tiles-$2-summary.txt" 2>&1
  gzip -f "$O/tiles-$2.json"
}
if [ "$DROP" = 1 ]; then
  one new new-r1; one fix fix-r1; one new new-r2; one fix fix-r2
else
  one fix fix-r1-cold; one new new-r1; one fix fix-r2; one new new-r2
fi
# the GPU-only tile LU at the default nb too, and the resident LU, with the fix
timeout -k 3 45 .gpu/tessera-fix lu --n 22528 --gpus all --update tiles --workers 1 > "$O/tiles-fix-defaultnb.txt" 2>&1
log "fix default nb rc=$?: $(awk '/^TS/ {print $1, $3, $7 " GFLOP/s"}' "$O/tiles-fix-defaultnb.txt") $(grep -oE 'PASSED|FAILED' "$O/tiles-fix-defaultnb.txt")"
tar czf "${OUT:-/tmp}/r57c.tgz" -C /tmp r57c
log done
