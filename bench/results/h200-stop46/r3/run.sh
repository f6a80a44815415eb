#!/usr/bin/env bash
# Stop 46, run 3: the third resident LU (two steps per arriving block, one TRSM call, release
# after the clock) against r2's, alternated; the merged updates once.
#   NEW: this commit's parent tree; R2: r2's binary (901117a); OLD: bf9fb10 (merged updates)
set -u
NEW=$PWD/.gpu/tessera-new
OLD=$PWD/.gpu/tessera-base
R2=$PWD/.gpu/tessera-r2
O=/tmp/r3
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-250} ))
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
step 01-new64k       60 "$NEW" lu --n 65536 --nb 2048 --gpus all --trace "$O/new64k.json"
step 02-r2-64k       60 "$R2" lu --n 65536 --nb 2048 --gpus all
step 03-new64k       60 "$NEW" lu --n 65536 --nb 2048 --gpus all
step 04-r2-64k       60 "$R2" lu --n 65536 --nb 2048 --gpus all
step 05-new64k-1024  60 "$NEW" lu --n 65536 --nb 1024 --gpus all
step 06-new45k       40 "$NEW" lu --n 45056 --nb 2048 --gpus all
step 07-new32k       40 "$NEW" lu --n 32768 --nb 2048 --gpus all
step 08-old32k       40 "$OLD" lu --n 32768 --nb 2048 --gpus all
step 09-new90k       80 "$NEW" lu --n 90112 --nb 2048 --gpus all
step 10-new64k-nb448 60 "$NEW" lu --n 65536 --gpus all
echo done >> "$O/summary.txt"
gzip -f "$O"/*.json 2>/dev/null
tar czf "${OUT:-/tmp}/r3.tgz" -C /tmp r3
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
