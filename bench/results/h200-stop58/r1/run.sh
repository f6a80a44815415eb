#!/usr/bin/env bash
# Stop 58, run 1: the head of main (e0f6d84; code of 30dc35c, tessera-head)
#  1. bench/peers/gpu.sh (gpu-check, resident LU, Cashmere's check, SpMV);
#  2. the GPU-only tile LU from a cold page cache (the warm-up line);
#  3. bench/peers/taskbench.sh on the 16 host cores, Tessera STF, symbolic
#     and OpenMP: stop 57's final sleep protocol (P2') as it landed.
set -u
O=/tmp/r58a
rm -rf "$O"; mkdir -p "$O"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/summary.txt"; }
{ nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2; nvidia-smi -L; } > "$O/host.txt" 2>&1
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo)"
timeout -k 3 ${GPUSH_BUDGET:-200} bash bench/peers/gpu.sh "$PWD/.gpu/tessera-head" "$O/gpush" > "$O/gpu.sh.txt" 2>&1
log "gpu.sh rc=$?"
grep -E "^ *(ok|FAIL)|^TS|PASSED|FAILED|% of|CPU-only|SpMV matrix|rror|panick" "$O/gpu.sh.txt" | tee -a "$O/summary.txt"
tar czf "${OUT:-/tmp}/r58a.tgz" -C /tmp r58a
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
export LD_LIBRARY_PATH
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && log "page cache dropped"
timeout -k 3 40 .gpu/tessera-head lu --n 22528 --nb 2048 --gpus all --update tiles --workers 1 > "$O/tiles-cold.txt" 2>&1
log "tiles cold rc=$?: $(awk '/^TS/ {print $7 " GFLOP/s " $6 " s"}' "$O/tiles-cold.txt") $(grep -oE 'PASSED|FAILED' "$O/tiles-cold.txt") | $(grep warmed "$O/tiles-cold.txt")"
TESSERA_BIN=$PWD/.gpu/tessera-head SYSTEMS="tessera tessera-sym openmp" ROUNDS=2 RUN_TIMEOUT=60 \
  TASKBENCH_DIR=$PWD/.gpu/tbsrc TASKBENCH_BUILD=/tmp/tbbuild \
  timeout -k 5 ${BUDGET:-150} bash bench/peers/taskbench.sh > "$O/taskbench.txt" 2>&1
log "taskbench.sh rc=$?"
sed -n '/METG50 in us/,/^$/p' "$O/taskbench.txt" | tee -a "$O/summary.txt"
tar czf "${OUT:-/tmp}/r58a.tgz" -C /tmp r58a
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
log done
