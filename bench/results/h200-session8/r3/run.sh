#!/usr/bin/env bash
# Session 8, run 2: the SpMV kernel's own rate, device-sized blocks, the
# transfer-aware balancer (new vs old alternated), parallel HPL generation at N=65536.
set -u
NEW=$PWD/.gpu/tessera-s8b
OLD=$PWD/.gpu/tessera-a5e
O=/tmp/r3
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-200} ))
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
  printf '%-18s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$(grep -E 'PASSED|FAILED|TSPRIO|TSDMDA|GFLOP|rror|panick|iterations in|spmv_csr kernel' "$O/$name.txt" | tail -3 | tr '\n' ' ' | cut -c1-300)" | tee -a "$O/summary.txt"
}
S="spmv --gen stencil27:200 --gpus all --no-faer --iters 50"
step 00-check        40 "$NEW" gpu-check
step 00b-ondev4-old  30 "$OLD" $S --on-device --blocks-per-worker 1 --trace "$O/ondev16-old.json"
step 01-ondev4       30 "$NEW" $S --on-device --trace "$O/ondev4.json"
step 02-ondev256     30 "$NEW" $S --on-device --blocks-per-worker 16
step 03-bal-new      30 "$NEW" $S --balance
step 04-bal-old      30 "$OLD" $S --balance
step 05-bal-new      30 "$NEW" $S --balance
step 06-cpu          30 "$NEW" $S
step 07-bal-old      30 "$OLD" $S --balance
echo done >> "$O/summary.txt"
tar czf "${OUT:-/tmp}/r3.tgz" -C /tmp r3
