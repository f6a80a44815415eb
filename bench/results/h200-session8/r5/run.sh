#!/usr/bin/env bash
# Session 8, run 4: staging copies on 4 threads (s8d) against one (s8c), alternated.
set -u
NEW=$PWD/.gpu/tessera-s8d
OLD=$PWD/.gpu/tessera-s8c
O=/tmp/r5
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-130} ))
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
  printf '%-14s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$(grep -E 'PASSED|FAILED|^TS|rror|panick|staged|round trip' "$O/$name.txt" | tail -3 | tr '\n' ' ' | cut -c1-300)" | tee -a "$O/summary.txt"
}
L="lu --n 32768 --nb 2048 --gpus all"
step 00-check    40 "$NEW" gpu-check
step 01-lu-new   35 "$NEW" $L
step 02-lu-old   35 "$OLD" $L
step 03-lu-new   35 "$NEW" $L --trace "$O/lu32k-new.json"
step 04-lu-old   35 "$OLD" $L
step 05-lu64k-new 45 "$NEW" lu --n 65536 --nb 2048 --gpus all
echo done >> "$O/summary.txt"
tar czf "${OUT:-/tmp}/r5.tgz" -C /tmp r5
