#!/usr/bin/env bash
# Session 8, run 3: the timed SpMV after a warm-up; the balancer new vs old, alternated.
set -u
NEW=$PWD/.gpu/tessera-s8c
OLD=$PWD/.gpu/tessera-a5e
O=/tmp/r4
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-100} ))
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
  printf '%-12s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$(grep -E 'warm-up|rror|panick|iterations in|check:' "$O/$name.txt" | tail -3 | tr '\n' ' ' | cut -c1-300)" | tee -a "$O/summary.txt"
}
S="spmv --gen stencil27:200 --gpus all --no-faer --iters 50"
step 01-ondev    30 "$NEW" $S --on-device
step 02-bal-new  25 "$NEW" $S --balance
step 03-bal-old  25 "$OLD" $S --balance
step 04-bal-new  25 "$NEW" $S --balance
step 05-bal-old  25 "$OLD" $S --balance
echo done >> "$O/summary.txt"
tar czf "${OUT:-/tmp}/r4.tgz" -C /tmp r4
