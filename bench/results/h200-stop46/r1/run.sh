#!/usr/bin/env bash
# Stop 46, run 1: the device-resident LU (--update resident) on its first
# GPU, against the merged updates of the previous binary in the same run.
#   NEW: this stop's tessera (resident LU); OLD: bf9fb10's (the start of the stop)
set -u
NEW=$PWD/.gpu/tessera-new
OLD=$PWD/.gpu/tessera-base
O=/tmp/r1
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-270} ))
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
: "${LD_LIBRARY_PATH:=}"
export LD_LIBRARY_PATH RUST_BACKTRACE=1
step() { # name limit cmd...
  local name=$1 lim=$2; shift 2
  local left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 8 ]; then echo "SKIP $name (deadline)" | tee -a "$O/summary.txt"; return; fi
  [ "$lim" -gt "$left" ] && lim=$left
  local t0=$(date +%s.%N)
  timeout -k 3 "$lim" "$@" > "$O/$name.txt" 2>&1
  local rc=$?
  printf '%-16s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$(grep -E 'PASSED|FAILED|^TS|rror|panick|page-locked|pageable|% of the GPU' "$O/$name.txt" | tail -4 | tr '\n' ' ' | cut -c1-400)" | tee -a "$O/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$O/nvidia-smi.txt" 2>&1
step 00-check        40 "$NEW" gpu-check
step 01-res32k       40 "$NEW" lu --n 32768 --nb 1024 --gpus all --update resident
step 02-old32k       40 "$OLD" lu --n 32768 --nb 2048 --gpus all
step 03-res32k-2048  40 "$NEW" lu --n 32768 --nb 2048 --gpus all --update resident
step 04-res64k       70 "$NEW" lu --n 65536 --nb 1024 --gpus all --update resident --trace "$O/res64k.json"
step 05-old64k       70 "$OLD" lu --n 65536 --nb 2048 --gpus all
step 06-res32k-nola  40 "$NEW" lu --n 32768 --nb 1024 --gpus all --update resident:no-lookahead
step 07-res32k-nopin 40 "$NEW" lu --n 32768 --nb 1024 --gpus all --update resident --no-pin
step 08-res45k       50 "$NEW" lu --n 45056 --nb 1024 --gpus all --update resident
step 09-res64k-2048  70 "$NEW" lu --n 65536 --nb 2048 --gpus all --update resident
step 10-spmv         40 "$NEW" spmv --gen stencil27:200 --gpus all --on-device --iters 50 --no-faer
echo done >> "$O/summary.txt"
gzip -f "$O"/*.json 2>/dev/null
tar czf "${OUT:-/tmp}/r1.tgz" -C /tmp r1
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
