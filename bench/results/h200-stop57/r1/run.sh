#!/usr/bin/env bash
# Stop 57's GPU run. The code of 3ca7849 (tessera-new; 163 commits after
# stop 46's last GPU run, among them the resident LU split into modules, the
# one LU entry point and the engine's worker and submission changes) through
# bench/peers/gpu.sh, then the resident LU at N=65536, nb 2048, alternated
# with stop 46's final binary (805e387, tessera-old) in the same run.
set -u
O=/tmp/r57
rm -rf "$O"; mkdir -p "$O"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/summary.txt"; }
{ nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2; } > "$O/host.txt"
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo)"
timeout -k 3 ${GPUSH_BUDGET:-240} bash bench/peers/gpu.sh "$PWD/.gpu/tessera-new" "$O/gpush" > "$O/gpu.sh.txt" 2>&1
log "gpu.sh rc=$?"
grep -E "^ *(ok|FAIL)|^TS|PASSED|FAILED|% of|CPU-only|SpMV matrix|rror|panick" "$O/gpu.sh.txt" | tee -a "$O/summary.txt"
# the same library path as gpu.sh
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
export LD_LIBRARY_PATH
for r in 1 2; do
  for b in new old; do
    timeout -k 3 75 ".gpu/tessera-$b" lu --n 65536 --nb 2048 --gpus all > "$O/lu65536-$b-r$r.txt" 2>&1
    rc=$?
    log "lu 65536/2048 $b round $r rc=$rc: $(grep -E '^TS' "$O/lu65536-$b-r$r.txt" | awk '{print $7 " GFLOP/s, " $6 " s"}') $(grep -oE 'PASSED|FAILED' "$O/lu65536-$b-r$r.txt")"
  done
done
timeout -k 3 40 .gpu/tessera-new lu --n 65536 --nb 2048 --gpus all --trace "$O/lu65536-new.json" > "$O/lu65536-new-trace.txt" 2>&1
log "traced run rc=$?: $(grep -E '^TS' "$O/lu65536-new-trace.txt" | awk '{print $7}') $(grep -oE 'PASSED|FAILED' "$O/lu65536-new-trace.txt")"
gzip -f "$O/lu65536-new.json" 2>/dev/null
tar czf "${OUT:-/tmp}/r57.tgz" -C /tmp r57
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
log "done"
