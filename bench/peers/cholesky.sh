#!/usr/bin/env bash
# A user's tiled Cholesky (`tessera cholesky`, written once against
# dist::Submit) in one process and on 2 ranks, beside OpenBLAS's dpotrf and
# ScaLAPACK's pdpotrf, all in one run, alternated round by round, printing
# same-run ratios:
#   - 2 ranks x 1 worker against ScaLAPACK's pdpotrf on 2 ranks (1 x 2 grid,
#     the same block size and dealing) and against 1 process x 2 workers
#     (the same 2 cores): what distributing costs;
#   - 1 process x 2 workers against dpotrf on 2 threads (the same cores);
#   - 1 process x 1 worker, for scale.
# Each tessera figure is the best of its run's --rounds factorisations (each
# of a fresh matrix, checked against faer's factor).
#   bash bench/peers/cholesky.sh [N] [NB]       (defaults: 2048 256)
#   ROUNDS=5 bash bench/peers/cholesky.sh ...   (default 5 rounds)
# Needs: apt-get install libopenblas-dev libscalapack-openmpi-dev libopenmpi-dev openmpi-bin.
set -euo pipefail
N=${1:-2048}
NB=${2:-256}
ROUNDS=${ROUNDS:-5}
cd "$(dirname "$0")/../.."
if grep -qw avx512f /proc/cpuinfo; then fastest=SkylakeX; else fastest=Haswell; fi
export OPENBLAS_CORETYPE=${PEER_OPENBLAS_CORETYPE:-$fastest}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release -q -p tessera-bench --features mpi
gcc -O2 -o "$work/potrf_peer" bench/peers/potrf_peer.c -lopenblas
mpicc -O2 -o "$work/pdpotrf_peer" bench/peers/pdpotrf_peer.c -lscalapack-openmpi -lopenblas
T=./target/release/tessera
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OPENBLAS_CORETYPE -np 2)
gf() { awk '/^best/ {print $4}'; }
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== cholesky N=$N NB=$NB: tessera 1 process (1 and 2 workers), 2 ranks x 1 worker; ScaLAPACK pdpotrf on 2 ranks; OpenBLAS ($OPENBLAS_CORETYPE) dpotrf on 1 and 2 threads; GFLOP/s, $ROUNDS rounds alternated"
r2=(); sc=(); r1=(); one=(); p2=(); p1=()
for r in $(seq "$ROUNDS"); do
  r2+=("$("${MPI[@]}" $T cholesky --workers 1 --no-peer --n "$N" --nb "$NB" | gf)")
  sc+=("$(OPENBLAS_NUM_THREADS=1 "${MPI[@]}" -x OPENBLAS_NUM_THREADS "$work/pdpotrf_peer" "$N" "$NB" 3 | awk '{print $5}')")
  r1+=("$($T cholesky --workers 2 --no-peer --n "$N" --nb "$NB" | gf)")
  one+=("$($T cholesky --workers 1 --no-peer --n "$N" --nb "$NB" | gf)")
  p2+=("$(OPENBLAS_NUM_THREADS=2 "$work/potrf_peer" "$N" 3 | awk '{print $3}')")
  p1+=("$(OPENBLAS_NUM_THREADS=1 "$work/potrf_peer" "$N" 3 | awk '{print $3}')")
  awk -v r="$r" -v a="${r2[-1]}" -v s="${sc[-1]}" -v b="${r1[-1]}" -v c="${one[-1]}" -v d="${p2[-1]}" -v e="${p1[-1]}" 'BEGIN {
    printf "  round %d: 2 ranks %6.2f  pdpotrf %6.2f  1 process %6.2f  1 worker %6.2f  dpotrf 2 threads %6.2f  1 thread %6.2f   2 ranks / pdpotrf %.2f  2 ranks / 1 process %.2f  1 process / dpotrf %.2f\n", r, a, s, b, c, d, e, a / s, a / b, b / d }'
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ratios() { local -n x=$1 y=$2; local out=(); for i in "${!x[@]}"; do out+=("$(awk -v a="${x[$i]}" -v b="${y[$i]}" 'BEGIN {print a / b}')"); done; med "${out[@]}"; }
echo "== medians: 2 ranks $(med "${r2[@]}"), pdpotrf 2 ranks $(med "${sc[@]}"), 1 process $(med "${r1[@]}"), 1 worker $(med "${one[@]}"), dpotrf 2 threads $(med "${p2[@]}"), 1 thread $(med "${p1[@]}") GFLOP/s"
echo "== median of the rounds' ratios: 2 ranks / pdpotrf $(ratios r2 sc); 2 ranks / 1 process $(ratios r2 r1); 1 process / dpotrf (2 threads) $(ratios r1 p2); 1 worker / dpotrf (1 thread) $(ratios one p1)"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
