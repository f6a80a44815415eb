#!/usr/bin/env bash
# The whole GPU verification in one go, on a machine with NVIDIA GPUs and no
# Rust toolchain: build here (`cargo build --release`), copy the binary, run
# this there. Every figure it prints is a same-run ratio.
#   bash bench/peers/gpu.sh [TESSERA_BINARY] [OUT_DIR] [N] [NB]
# defaults: target/release/tessera, ./gpu-out, N from the memories, NB 2048
# Through the device tool, which brings back at most 8 files from $OUT: give
# an OUT_DIR outside $OUT and tar it into $OUT afterwards (the eighth
# session lost this script's own files that way; its stdout came back).
#  1. tessera gpu-check: each GPU op against the CPU, cuBLAS dgemm, D2D copy
#  2. LU at the largest N that fits (PASSED, % of the GPUs' cuBLAS dgemm;
#     with one GPU --update auto runs the device-resident LU)
#  3. Cashmere's efficiency: CPU+GPU against CPU-only plus GPU-only GFLOP/s
#     (tile tasks, which both take)
#  4. SpMV on the GPU alone against its device-to-device copy rate
set -uo pipefail
BIN=${1:-target/release/tessera}
OUT=${2:-gpu-out}
NB=${4:-2048}
mkdir -p "$OUT"
# cuBLAS/cuSOLVER/NVRTC from the toolkit or from Python wheels, if not on the path.
# Never a `stubs` folder: its libcuda.so is found before the driver's
# libcuda.so.1 and cuInit fails with CUDA_ERROR_STUB_LIBRARY.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
export LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.txt"

echo "== 1. gpu-check"
"$BIN" gpu-check 2>&1 | tee "$OUT/gpu-check.txt"

# Largest N whose matrix fits 85 % of one GPU's memory and an eighth of the
# host's (the host keeps the matrix, a copy for the residual and the
# generator's buffers), rounded to NB. On an H200 node with 125 GiB of host
# memory this is 45056; the 85 %-of-the-GPU size alone (124928) needs most of
# the host's memory and minutes per run.
MEM_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
HOST_MIB=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
N=${3:-$(python3 -c "import math; m=min(0.85*$MEM_MIB, $HOST_MIB/8); n=int(math.sqrt(m*2**20/8)); print(n//$NB*$NB)")}
echo "== 2. LU N=$N NB=$NB on every GPU and the CPU cores"
"$BIN" lu --n "$N" --nb "$NB" --gpus all --trace "$OUT/lu-gpu.json" 2>&1 | tee "$OUT/lu-gpu.txt"

echo "== 3. CPU+GPU vs CPU-only + GPU-only at N=$((N / 2))"
# With one GPU, --update auto runs the resident LU, where the CPU cores take
# no part (stop 46: "both" read 98 % of the sum because the GPU alone did
# the work). Cashmere's question is whether they cooperate: tile tasks,
# shared by dmda.
H=$((N / 2 / NB * NB))
"$BIN" lu --n "$H" --nb "$NB" 2>&1 | tee "$OUT/lu-cpu.txt"
"$BIN" lu --n "$H" --nb "$NB" --gpus all --update tiles --workers 1 2>&1 | tee "$OUT/lu-gpu-only.txt"
"$BIN" lu --n "$H" --nb "$NB" --gpus all --update tiles 2>&1 | tee "$OUT/lu-both.txt"
gf() { awk '/^TS/ {print $7}' "$1"; }
awk -v c="$(gf "$OUT/lu-cpu.txt")" -v g="$(gf "$OUT/lu-gpu-only.txt")" -v b="$(gf "$OUT/lu-both.txt")" \
  'BEGIN { printf "CPU-only %.1f + GPU (1 CPU worker) %.1f GFLOP/s; both %.1f = %.1f %% of the sum\n", c, g, b, 100 * b / (c + g) }' \
  | tee "$OUT/cashmere.txt"

echo "== 4. SpMV on the GPU alone"
"$BIN" spmv --gen stencil27:200 --gpus all --on-device --iters 50 --no-faer 2>&1 | tee "$OUT/spmv-gpu.txt"
# The same with 256 row blocks (16 per worker, the default before
# --on-device took 4): each device task ends with a stream synchronisation.
# On an H200, 256 blocks took 15.7 ms per product and 16 blocks 9.3 ms.
# gpu-check's "spmv_csr kernel" line is the kernel alone.
"$BIN" spmv --gen stencil27:200 --gpus all --on-device --iters 50 --no-faer --blocks-per-worker 16 2>&1 \
  | tee "$OUT/spmv-gpu-256blocks.txt" | grep -E "^spmv:|^effective"
# The device's own limit is its memory bandwidth: gpu-check's device-to-device
# copy (read + write), not the host's STREAM triad that spmv prints.
awk '/device-to-device copy/ {for (i = 1; i <= NF; i++) if ($i == "GB/s") d = $(i - 1)}
     /^spmv: .* iterations in/ {it = $2; s = $5}
     /^matrix / {for (i = 1; i <= NF; i++) if ($i == "MiB,") mib = $(i - 1)}
     END { if (d && it && s) { gbs = mib * 1.048576e6 * it / s / 1e9;
             printf "SpMV matrix stream %.1f GB/s over %d iterations = %.1f %% of the device-to-device copy rate (%s GB/s)\n", gbs, it, 100 * gbs / d, d } }' \
  "$OUT/gpu-check.txt" "$OUT/spmv-gpu.txt" | tee "$OUT/spmv-ratio.txt"
echo "logs in $OUT"
