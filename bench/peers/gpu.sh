#!/usr/bin/env bash
# The whole GPU verification in one go, on a machine with NVIDIA GPUs and no
# Rust toolchain: build here (`cargo build --release`), copy the binary, run
# this there. Every figure it prints is a same-run ratio.
#   bash bench/peers/gpu.sh [TESSERA_BINARY] [OUT_DIR] [N] [NB]
# defaults: target/release/tessera, ./gpu-out, N from the GPU's memory, NB 2048
#  1. tessera gpu-check: each GPU op against the CPU, cuBLAS dgemm, D2D copy
#  2. LU at the largest N that fits (PASSED, % of the GPUs' cuBLAS dgemm)
#  3. Cashmere's efficiency: CPU+GPU against CPU-only plus GPU-only GFLOP/s
#  4. SpMV on the GPU alone against its device-to-device copy rate
set -uo pipefail
BIN=${1:-target/release/tessera}
OUT=${2:-gpu-out}
NB=${4:-2048}
mkdir -p "$OUT"
# cuBLAS/cuSOLVER/NVRTC from the toolkit or from Python wheels, if not on the path.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
export LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.txt"

echo "== 1. gpu-check"
"$BIN" gpu-check 2>&1 | tee "$OUT/gpu-check.txt"

# Largest N whose matrix fits 85 % of one GPU's memory (tiles of NB), rounded to NB.
MEM_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
N=${3:-$(python3 -c "import math; n=int(math.sqrt(0.85*$MEM_MIB*2**20/8)); print(n//$NB*$NB)")}
echo "== 2. LU N=$N NB=$NB on every GPU and the CPU cores"
"$BIN" lu --n "$N" --nb "$NB" --gpus all --trace "$OUT/lu-gpu.json" 2>&1 | tee "$OUT/lu-gpu.txt"

echo "== 3. CPU+GPU vs CPU-only + GPU-only at N=$((N / 2))"
H=$((N / 2 / NB * NB))
"$BIN" lu --n "$H" --nb "$NB" 2>&1 | tee "$OUT/lu-cpu.txt"
"$BIN" lu --n "$H" --nb "$NB" --gpus all --workers 1 2>&1 | tee "$OUT/lu-gpu-only.txt"
"$BIN" lu --n "$H" --nb "$NB" --gpus all 2>&1 | tee "$OUT/lu-both.txt"
gf() { awk '/^TS/ {print $7}' "$1"; }
awk -v c="$(gf "$OUT/lu-cpu.txt")" -v g="$(gf "$OUT/lu-gpu-only.txt")" -v b="$(gf "$OUT/lu-both.txt")" \
  'BEGIN { printf "CPU-only %.1f + GPU (1 CPU worker) %.1f GFLOP/s; both %.1f = %.1f %% of the sum\n", c, g, b, 100 * b / (c + g) }' \
  | tee "$OUT/cashmere.txt"

echo "== 4. SpMV on the GPU alone"
"$BIN" spmv --gen stencil27:200 --gpus all --on-device --iters 50 --no-faer 2>&1 | tee "$OUT/spmv-gpu.txt"
echo "logs in $OUT"
