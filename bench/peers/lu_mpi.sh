#!/usr/bin/env bash
# Showcase: the distributed LU (`mpirun -np 2 tessera lu --grid 1x2`, one
# worker per rank, the default `--balance work` dealing, and HPL's cyclic
# dealing beside it) against HPL (Debian's hpcc, the same 2 ranks, the best
# NB of a small sweep) and against single-process `tessera lu` (2 workers),
# in one run, alternated round by round; prints each round's ratios and
# medians, each rank's bytes sent beside the communication model, and
# OpenBLAS dgemm on both cores (N=4096) as the physical ceiling of any LU
# here (needs libopenblas-dev; skipped without it).
#   bash bench/peers/lu_mpi.sh [N] [NB] [HPL_NBS]    (defaults: 8192 448 "192 256 384")
#   ROUNDS=5 GRID=2x1 bash bench/peers/lu_mpi.sh ...
# Needs: apt-get install libopenmpi-dev openmpi-bin libclang-dev hpcc (and libopenblas-dev)
set -euo pipefail
N=${1:-8192}
NB=${2:-448}
HPL_NBS=${3:-"192 256 384"}
ROUNDS=${ROUNDS:-3}
GRID=${GRID:-1x2}
cd "$(dirname "$0")/../.."
export OPENBLAS_CORETYPE=${PEER_OPENBLAS_CORETYPE:-SkylakeX}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2)

cargo build --release -q --features mpi
command -v hpcc >/dev/null || { echo "hpcc not installed (apt-get install hpcc)"; exit 1; }
blas=""
if gcc -O2 -o "$work/blas_peer" bench/peers/blas_peer.c -lopenblas 2>/dev/null; then blas=1; fi

# shellcheck source=hpcc.sh
source bench/peers/hpcc.sh
hpl_run() { hpl_gflops "$work" "$N" "$1" 1 2; }

echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
best_nb=""; best=0
for nb in $HPL_NBS; do
  g=$(hpl_run "$nb"); echo "  HPL NB=$nb: ${g:-failed} GFLOP/s"
  if [ -n "$g" ] && awk -v a="$g" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$g; best_nb=$nb; fi
done
echo "== HPL NB sweep: best NB=$best_nb"

ds=(); cs=(); ss=(); hs=(); gs=()
for r in $(seq "$ROUNDS"); do
  "${MPIRUN[@]}" ./target/release/tessera lu --n "$N" --nb "$NB" --grid "$GRID" --workers 1 > "$work/dist.txt" 2>&1
  d=$(awk '/^TS/ {printf "%.2f", $7}' "$work/dist.txt")
  grep -E "^(rank|balance)" "$work/dist.txt" | sed 's/^/    /'
  c=$("${MPIRUN[@]}" ./target/release/tessera lu --n "$N" --nb "$NB" --grid "$GRID" --workers 1 --balance cyclic 2>&1 | awk '/^TS/ {printf "%.2f", $7}')
  s=$(./target/release/tessera lu --n "$N" --nb "$NB" --workers 2 | awk '/^TS/ {printf "%.2f", $7}')
  h=$(hpl_run "$best_nb")
  g=nan
  if [ -n "$blas" ]; then g=$(OPENBLAS_NUM_THREADS=2 "$work/blas_peer" 4096 2 | awk '/^dgemm/ {print $3}'); fi
  ds+=("$d"); cs+=("$c"); ss+=("$s"); hs+=("${h:-nan}"); gs+=("$g")
  awk -v r="$r" -v d="$d" -v c="$c" -v s="$s" -v h="$h" -v g="$g" 'BEGIN {
    printf "  round %d: tessera %s %7.2f (cyclic %7.2f)  single-process %7.2f  HPL %7.2f  dgemm %7.2f   | /HPL %.3f  /single %.3f  /cyclic %.3f\n", r, "'"$GRID"'", d, c, s, h, g, d / h, d / s, d / c
  }'
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
d=$(median "${ds[@]}"); c=$(median "${cs[@]}"); s=$(median "${ss[@]}"); h=$(median "${hs[@]}"); g=$(median "${gs[@]}")
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== same-run ratios, medians of $ROUNDS rounds (N=$N, tessera NB=$NB, HPL NB=$best_nb)"
awk -v d="$d" -v c="$c" -v s="$s" -v h="$h" -v g="$g" 'BEGIN {
  printf "tessera lu, 2 ranks (%s)   %8.2f GFLOP/s   (--balance work, the default)\n", "'"$GRID"'", d
  printf "  with --balance cyclic     %8.2f GFLOP/s   work/cyclic        = %.3f\n", c, d / c
  printf "tessera lu, 1 process     %8.2f GFLOP/s   distributed/single = %.3f\n", s, d / s
  printf "HPL (hpcc), 2 ranks       %8.2f GFLOP/s   tessera/HPL        = %.3f\n", h, d / h
  if (g == g + 0 && g > 0) {
    printf "OpenBLAS dgemm, 2 threads %8.2f GFLOP/s   (the ceiling: HPL at %.3f of it, tessera at %.3f; 1.1x HPL would be %.3f)\n", g, h / g, d / g, 1.1 * h / g
  }
}'
