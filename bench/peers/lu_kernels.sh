#!/usr/bin/env bash
# Tuning aid (a showcase, not a regression check): the LU's CPU kernels alone,
# tessera's panel against OpenBLAS dgetrf on a panel of the same shape, and the
# GEMM per tile with and without row blocks, alternated ROUNDS times, medians.
#   bash bench/peers/lu_kernels.sh [N] [NB] [ROUNDS]   (defaults: 8192 448 3)
# Needs: apt-get install libopenblas-dev.
set -euo pipefail
N=${1:-8192}
NB=${2:-448}
ROUNDS=${3:-3}
cd "$(dirname "$0")/../.."
export OPENBLAS_CORETYPE=${PEER_OPENBLAS_CORETYPE:-SkylakeX}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release -q
gcc -O2 -o "$work/blas_peer" bench/peers/blas_peer.c -lopenblas
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== panel ${N}x${NB}: tessera (core 1 idle, then running GEMMs) and OpenBLAS dgetrf (1 and 2 threads), alternated $ROUNDS times"
ti=(); tb=(); fa=(); o1=(); o2=()
for _ in $(seq "$ROUNDS"); do
  ./target/release/tessera lu-kernels --what panel --n "$N" --nb "$NB" --rounds 1 --companion none > "$work/t.txt"
  ti+=("$(awk '/^panel tessera/ {print $(NF-1)}' "$work/t.txt")")
  fa+=("$(awk '/^panel faer/ {print $(NF-1)}' "$work/t.txt")")
  ./target/release/tessera lu-kernels --what panel --n "$N" --nb "$NB" --rounds 1 --companion gemm > "$work/t.txt"
  tb+=("$(awk '/^panel tessera/ {print $(NF-1)}' "$work/t.txt")")
  o1+=("$(OPENBLAS_NUM_THREADS=1 "$work/blas_peer" "$N" 3 "$NB" | awk '{print $4}')")
  o2+=("$(OPENBLAS_NUM_THREADS=2 "$work/blas_peer" "$N" 3 "$NB" | awk '{print $4}')")
  echo "  tessera ${ti[-1]} (busy core 1: ${tb[-1]})   faer ${fa[-1]}   OpenBLAS 1t ${o1[-1]}   2t ${o2[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ti=$(median "${ti[@]}"); tb=$(median "${tb[@]}"); fa=$(median "${fa[@]}")
o1=$(median "${o1[@]}"); o2=$(median "${o2[@]}")
echo "== GEMM per tile, 2 threads, cold tiles"
./target/release/tessera lu-kernels --what gemm --nb 256,384,448,512 --rows whole,auto --rounds "$ROUNDS"
echo
echo "== same-run panel ratios (medians, GFLOP/s)"
awk -v ti="$ti" -v tb="$tb" -v fa="$fa" -v o1="$o1" -v o2="$o2" 'BEGIN {
  printf "tessera panel (core 1 idle)   %7.2f   /OpenBLAS 1t = %.3f   /OpenBLAS 2t = %.3f\n", ti, ti / o1, ti / o2
  printf "tessera panel (core 1 busy)   %7.2f\n", tb
  printf "faer lu_in_place (core 1 idle) %6.2f   tessera/faer = %.3f\n", fa, ti / fa
  printf "OpenBLAS dgetrf 1 thread      %7.2f\n", o1
  printf "OpenBLAS dgetrf 2 threads     %7.2f\n", o2
}'
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
