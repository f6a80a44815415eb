#!/usr/bin/env bash
# Stop 64, run 1: the head of main (b26afc3, tessera-new) on the H200 node.
#  1. bench/peers/gpu.sh (gpu-check, resident LU, Cashmere's check, SpMV);
#  2. bench/peers/taskbench.sh on the 16 host cores: Tessera STF and symbolic,
#     this head against stop 58's head (e0f6d84, tessera-head: before stop 63's
#     submission window and yield), alternated in every round, and OpenMP.
set -u
O=/tmp/r64a
rm -rf "$O"; mkdir -p "$O"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/summary.txt"; }
{ nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2; nvidia-smi -L; } > "$O/host.txt" 2>&1
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo)"
timeout -k 3 ${GPUSH_BUDGET:-200} bash bench/peers/gpu.sh "$PWD/.gpu/tessera-new" "$O/gpush" > "$O/gpu.sh.txt" 2>&1
log "gpu.sh rc=$?"
grep -E "^ *(ok|FAIL)|^TS|PASSED|FAILED|% of|CPU-only|SpMV matrix|rror|panick" "$O/gpu.sh.txt" | tee -a "$O/summary.txt"
tar czf "${OUT:-/tmp}/r64a.tgz" -C /tmp r64a
TESSERA_BIN=$PWD/.gpu/tessera-new TESSERA_BASE_BIN=$PWD/.gpu/tessera-head \
  SYSTEMS="tessera base-tessera tessera-sym base-tessera-sym openmp" ROUNDS=2 RUN_TIMEOUT=60 \
  TASKBENCH_DIR=$PWD/.gpu/tbsrc TASKBENCH_BUILD=/tmp/tbbuild \
  timeout -k 5 ${BUDGET:-240} bash bench/peers/taskbench.sh > "$O/taskbench.txt" 2>&1
log "taskbench.sh rc=$?"
sed -n '/METG50 in us/,/^$/p' "$O/taskbench.txt" | tee -a "$O/summary.txt"
tar czf "${OUT:-/tmp}/r64a.tgz" -C /tmp r64a
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
log done
