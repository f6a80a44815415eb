#!/usr/bin/env bash
# Stop 46, run 2: the second resident LU (device solve, warm-up outside the timed region,
# uploads issued as needed, permutation swaps, split TRSM) against r1's and the merged updates.
#   NEW: 901117a; R1: r1's binary (8fc1937); OLD: bf9fb10 (merged updates)
set -u
NEW=$PWD/.gpu/tessera-new
OLD=$PWD/.gpu/tessera-base
R1=$PWD/.gpu/tessera-r1
O=/tmp/r2
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-380} ))
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
step 02-res64k-2048  60 "$NEW" lu --n 65536 --nb 2048 --gpus all --update resident --trace "$O/res64k-2048.json"
step 03-old64k       60 "$OLD" lu --n 65536 --nb 2048 --gpus all
step 04-res64k-1024  60 "$NEW" lu --n 65536 --nb 1024 --gpus all --update resident --trace "$O/res64k-1024.json"
step 05-r1-64k-2048  60 "$R1" lu --n 65536 --nb 2048 --gpus all --update resident
step 06-res64k-2048  60 "$NEW" lu --n 65536 --nb 2048 --gpus all
step 07-res45k-1024  50 "$NEW" lu --n 45056 --nb 1024 --gpus all --update resident
step 08-res45k-2048  50 "$NEW" lu --n 45056 --nb 2048 --gpus all --update resident
step 09-res32k-2048  40 "$NEW" lu --n 32768 --nb 2048 --gpus all --update resident
step 10-res32k-nola  40 "$NEW" lu --n 32768 --nb 1024 --gpus all --update resident:no-lookahead
step 11-res32k-nopin 40 "$NEW" lu --n 32768 --nb 1024 --gpus all --update resident --no-pin
step 12-gpu.sh      150 bash bench/peers/gpu.sh "$NEW" "$O/gpush"
step 13-res90k      90 "$NEW" lu --n 90112 --nb 2048 --gpus all --update resident
echo done >> "$O/summary.txt"
gzip -f "$O"/*.json 2>/dev/null
tar czf "${OUT:-/tmp}/r2.tgz" -C /tmp r2
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
