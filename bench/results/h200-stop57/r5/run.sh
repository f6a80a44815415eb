#!/usr/bin/env bash
# Stop 57, run 5 (the stop's final code, tessera-final):
#  1. the GPU-only tile LU once, for the warm-up's stderr line;
#  2. on the 16 host cores, idle workers counted as searching (a pusher
#     skips the futex wake-up while one searches): tessera-fix (the code
#     before) and tessera-final alternated, 3 rounds, Task Bench stencil_1d
#     (width 16, 10000 steps) and nearest (width 64, 2000 steps), STF and
#     symbolic, at the granularities around their METG50 in r4;
#  3. bench/peers/taskbench.sh with tessera-final and OpenMP, one round less.
set -u
O=/tmp/r57e
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
timeout -k 3 40 .gpu/tessera-final lu --n 22528 --nb 2048 --gpus all --update tiles --workers 1 > "$O/tiles-final.txt" 2>&1
rc=$?; tar czf "${OUT:-/tmp}/r57e.tgz" -C /tmp r57e
log "tiles final rc=$rc: $(awk '/^TS/ {print $7 " GFLOP/s " $6 " s"}' "$O/tiles-final.txt") $(grep -oE 'PASSED|FAILED' "$O/tiles-final.txt") | $(grep warmed "$O/tiles-final.txt")"
el() { awk '/^Elapsed Time/ {print $3}' "$1"; }
for r in 1 2 3; do
  for fe in stf symbolic; do
    for g in "stencil_1d -width 16 -steps 10000" "nearest -radix 5 -width 64 -steps 2000"; do
      for it in 8192 4096 2048 1024; do
        line="r$r $fe ${g%% *} iter $it:"
        for b in fix final; do
          f="$O/ab-$b.txt"
          timeout -k 3 30 ".gpu/tessera-$b" taskbench --workers 16 --frontend $fe -type $g -kernel compute_bound -iter $it > "$f" 2>&1
          line="$line $b $(el "$f")"
        done
        echo "$line" >> "$O/ab.txt"
      done
    done
  done
done
log "A/B done"
tar czf "${OUT:-/tmp}/r57e.tgz" -C /tmp r57e
TESSERA_BIN=$PWD/.gpu/tessera-final SYSTEMS="tessera tessera-sym openmp" ROUNDS=2 RUN_TIMEOUT=60 \
  TASKBENCH_DIR=$PWD/.gpu/tbsrc TASKBENCH_BUILD=/tmp/tbbuild \
  timeout -k 5 ${BUDGET:-150} bash bench/peers/taskbench.sh > "$O/taskbench.txt" 2>&1
log "taskbench.sh rc=$?"
tar czf "${OUT:-/tmp}/r57e.tgz" -C /tmp r57e
sed -n '/METG50 in us/,/^$/p' "$O/taskbench.txt"
log done
