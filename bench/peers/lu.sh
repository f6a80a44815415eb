#!/usr/bin/env bash
# Showcase: tiled LU against its peers on this machine, all in one run, printing
# same-run ratios. Peers: OpenBLAS dgemm and dgetrf (Debian libopenblas-dev),
# HPL from Debian's hpcc under 2 MPI ranks.
#   bash bench/peers/lu.sh [N] [NB] [HPL_NB] [NO_HPL]   (defaults: 8192 448 256)
#   ROUNDS=5 bash bench/peers/lu.sh ...                  (default 3 rounds)
# Needs: apt-get install libopenblas-dev hpcc (openmpi comes with hpcc).
set -euo pipefail
N=${1:-8192}
NB=${2:-448}
HPL_NB=${3:-256}
NO_HPL=${4:-}
ROUNDS=${ROUNDS:-3}
cd "$(dirname "$0")/../.."
# OpenBLAS auto-detects a slow kernel in this VM, and some environments preset
# another core type: force the fastest one (PLATFORM.md) unless told otherwise.
# SkylakeX needs AVX-512; on a VM type without it (Illegal instruction), Haswell.
if grep -qw avx512f /proc/cpuinfo; then fastest=SkylakeX; else fastest=Haswell; fi
export OPENBLAS_CORETYPE=${PEER_OPENBLAS_CORETYPE:-$fastest}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release -q
gcc -O2 -o "$work/blas_peer" bench/peers/blas_peer.c -lopenblas

hpl_ok=""
if [ -z "$NO_HPL" ] && command -v hpcc >/dev/null && command -v mpirun >/dev/null; then
  hpl_ok=1
  sed -e "s/^1000 .*Ns/$N         Ns/" -e "s/^80 .*NBs/$HPL_NB           NBs/" \
      -e "s/^2 .*Ps$/1            Ps/" -e "s/^2 .*Qs$/2            Qs/" \
      /usr/share/doc/hpcc/examples/_hpccinf.txt > "$work/hpccinf.txt"
elif [ -n "$NO_HPL" ]; then
  echo "== HPL: skipped (asked)"
else
  echo "== HPL: hpcc or mpirun not installed (apt-get install hpcc): skipped"
fi
hpl_run() {
  rm -f "$work/hpccoutf.txt"
  (cd "$work" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
     mpirun --allow-run-as-root --oversubscribe -np 2 hpcc >/dev/null 2>&1) || true
  awk -F= '/^HPL_Tflops=/ {printf "%.2f", $2 * 1000}' "$work/hpccoutf.txt" 2>/dev/null || true
}

# Alternate tessera, OpenBLAS and HPL each round so all see the same machine
# load (this VM drifts by up to 2x within minutes); print each round's ratios,
# then medians.
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== tessera lu N=$N NB=$NB, OpenBLAS ($OPENBLAS_CORETYPE) dgemm/dgetrf${hpl_ok:+, HPL (hpcc, 2 ranks, P=1 Q=2, NB=$HPL_NB)}, alternated $ROUNDS times"
ts=(); gs=(); fs=(); hs=()
for r in $(seq "$ROUNDS"); do
  g=$(./target/release/tessera lu --n "$N" --nb "$NB" | awk '/^TS/ {printf "%.2f", $7}')
  ts+=("$g")
  "$work/blas_peer" "$N" 1 > "$work/blas.txt"
  gs+=("$(awk '/^dgemm/ {print $3}' "$work/blas.txt")")
  fs+=("$(awk '/^dgetrf/ {print $3}' "$work/blas.txt")")
  h=""
  if [ -n "$hpl_ok" ]; then h=$(hpl_run); hs+=("${h:-nan}"); fi
  awk -v r="$r" -v t="$g" -v g="${gs[-1]}" -v f="${fs[-1]}" -v h="$h" 'BEGIN {
    printf "  round %d: tessera %7.2f  dgemm %7.2f  dgetrf %7.2f", r, t, g, f
    if (h != "") printf "  HPL %7.2f", h
    printf "   | /dgemm %.3f  /dgetrf %.3f", t / g, t / f
    if (h != "" && h > 0) printf "  /HPL %.3f", t / h
    printf "\n"
  }'
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
tessera=$(median "${ts[@]}")
dgemm=$(median "${gs[@]}")
dgetrf=$(median "${fs[@]}")
hpl=""
if [ -n "$hpl_ok" ]; then hpl=$(median "${hs[@]}"); fi
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== same-run ratios, medians of $ROUNDS rounds (N=$N, tessera NB=$NB, HPL NB=$HPL_NB)"
awk -v t="$tessera" -v g="$dgemm" -v f="$dgetrf" -v h="$hpl" 'BEGIN {
  printf "tessera lu      %8.2f GFLOP/s\n", t
  printf "OpenBLAS dgemm  %8.2f GFLOP/s   tessera/dgemm  = %.3f\n", g, t / g
  printf "OpenBLAS dgetrf %8.2f GFLOP/s   tessera/dgetrf = %.3f\n", f, t / f
  if (h != "" && h > 0) printf "HPL (hpcc)      %8.2f GFLOP/s   tessera/HPL    = %.3f\n", h, t / h
}'
