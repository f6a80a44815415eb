#!/usr/bin/env bash
# Session 8, run 1: bench/peers/gpu.sh as the brief asks, then the extras
# (update shapes, CG and the Roadrunner balancer on the GPU, N=65536).
set -u
BIN=$PWD/.gpu/tessera-a5e
O=${OUT:-/tmp/out}/r1
mkdir -p "$O"
DEADLINE=$(( $(date +%s) + ${BUDGET:-320} ))
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
: "${LD_LIBRARY_PATH:=}"
export LD_LIBRARY_PATH RUST_BACKTRACE=1
{ nvidia-smi; nproc; free -g; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; } > "$O/env.txt" 2>&1
step() { # name limit cmd...
  local name=$1 lim=$2; shift 2
  local left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 8 ]; then echo "SKIP $name (deadline)" | tee -a "$O/summary.txt"; return; fi
  [ "$lim" -gt "$left" ] && lim=$left
  local t0=$(date +%s.%N)
  timeout -k 3 "$lim" "$@" > "$O/$name.txt" 2>&1
  local rc=$?
  printf '%-22s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$(grep -E 'PASSED|FAILED|GFLOP|GB/s|rror|panick|iteration' "$O/$name.txt" | tail -3 | tr '\n' ' ' | cut -c1-260)" | tee -a "$O/summary.txt"
}
step 00-gpu-check   40 "$BIN" gpu-check
step 01-gpu.sh     170 bash bench/peers/gpu.sh "$BIN" "$O/gpush"
step 02-lu32k-auto  40 "$BIN" lu --n 32768 --nb 2048 --gpus all --trace "$O/lu32k-auto.json"
step 03-lu32k-tiles 40 "$BIN" lu --n 32768 --nb 2048 --gpus all --update tiles
step 04-cg-gpu      30 "$BIN" spmv --gen stencil27:150 --solver cg --iters 50 --gpus all
step 05-cg-cpu      30 "$BIN" spmv --gen stencil27:150 --solver cg --iters 50
step 06-spmv-bal    30 "$BIN" spmv --gen stencil27:200 --gpus all --balance --iters 50
step 07-lu64k       75 "$BIN" lu --n 65536 --nb 2048 --gpus all --trace "$O/lu64k.json"
echo done >> "$O/summary.txt"
gzip -q "$O"/*.json "$O"/gpush/*.json 2>/dev/null
