#!/usr/bin/env bash
# First real-GPU run: every GPU path, small sizes first, a global deadline.
set -u
BIN=$PWD/.gpu/tessera
O=/tmp/o
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-330} ))
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
: "${LD_LIBRARY_PATH:=}"
export LD_LIBRARY_PATH RUST_BACKTRACE=1
{ nvidia-smi; nproc; free -g; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ls /usr/local/cuda*/lib64 2>/dev/null | grep -E 'cublas|cusolver|nvrtc' ; } > "$O/env.txt" 2>&1
step() { # name limit cmd...
  local name=$1 lim=$2; shift 2
  local left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 8 ]; then echo "SKIP $name (deadline)" | tee -a "$O/summary.txt"; return; fi
  [ "$lim" -gt "$left" ] && lim=$left
  local t0=$(date +%s.%N)
  timeout -k 3 "$lim" "$@" > "$O/$name.txt" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$(grep -E 'PASSED|FAILED|GFLOP|GB/s|rror' "$O/$name.txt" | tail -2 | tr '\n' ' ' | cut -c1-200)" | tee -a "$O/summary.txt"
}
OLD=$PWD/.gpu/tessera-old
step 01-gpu-check        60 "$BIN" gpu-check
step 02-lu32k-old        60 "$OLD" lu --n 32768 --nb 2048 --gpus all
step 03-lu32k-new        60 "$BIN" lu --n 32768 --nb 2048 --gpus all --trace "$O/lu32k-new.json"
step 04-lu32k-old        60 "$OLD" lu --n 32768 --nb 2048 --gpus all
step 05-lu32k-new        60 "$BIN" lu --n 32768 --nb 2048 --gpus all
step 06-lu32k-merged     60 "$BIN" lu --n 32768 --nb 2048 --gpus all --update merged
step 07-lu40k-new        60 "$BIN" lu --n 40960 --nb 2048 --gpus all --trace "$O/lu40k-new.json"
step 08-lu64k-nb4k       75 "$BIN" lu --n 65536 --nb 4096 --gpus all --trace "$O/lu64k.json"
echo done >> "$O/summary.txt"
tar czf "${OUT:-/tmp}/all.tgz" -C /tmp o
