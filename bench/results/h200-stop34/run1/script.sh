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
step 01-gpu-check        60 "$BIN" gpu-check
step 02-lu8k-auto        45 "$BIN" lu --n 8192 --nb 1024 --gpus all
step 03-lu8k-tiles       45 "$BIN" lu --n 8192 --nb 1024 --gpus all --update tiles
step 04-lu8k-merged      45 "$BIN" lu --n 8192 --nb 1024 --gpus all --update merged
step 05-lu8k-streamed    45 "$BIN" lu --n 8192 --nb 1024 --gpus all --update streamed
step 06-spmv-ondev       40 "$BIN" spmv --gen stencil27:100 --gpus all --on-device --iters 20 --no-faer
step 07-spmv-mixed       40 "$BIN" spmv --gen stencil27:100 --gpus all --iters 20
step 08-lu8k-adaptive    45 "$BIN" lu --n 8192 --nb 1024 --gpus all --split adaptive
step 09-lu16k-cpu        40 "$BIN" lu --n 16384 --nb 1024
step 10-lu16k-gpu1w       40 "$BIN" lu --n 16384 --nb 1024 --gpus all --workers 1
step 11-lu16k-both       40 "$BIN" lu --n 16384 --nb 1024 --gpus all
step 12-spmv200-ondev    50 "$BIN" spmv --gen stencil27:200 --gpus all --on-device --iters 50 --no-faer
step 13-spmv200-cpu      50 "$BIN" spmv --gen stencil27:200 --iters 50
step 14-lu32k-both       90 "$BIN" lu --n 32768 --nb 2048 --gpus all --trace "$O/lu32k.json"
step 15-lu40k-both       90 "$BIN" lu --n 40960 --nb 2048 --gpus all
echo done >> "$O/summary.txt"
tar czf "${OUT:-/tmp}/all.tgz" -C /tmp o
