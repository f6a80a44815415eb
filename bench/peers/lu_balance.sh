#!/usr/bin/env bash
# The distributed LU on ranks of unequal speed: `--balance speed` (tile
# columns dealt in proportion to each rank's measured GEMM rate) against
# `--balance cyclic` (HPL's block-cyclic dealing) and against HPL itself
# (Debian's hpcc, which deals cyclically), 2 ranks, 1x2, one worker each,
# alternated round by round.
#   slow   a busy loop shares rank 1's core for the whole run (rank 1 at about
#          half speed: a node slower than its peer);
#   even   nothing else runs (ranks of equal speed, up to this VM's noise).
#   bash bench/peers/lu_balance.sh [N] [NB] [HPL_NB]   (defaults: 8192 448 256)
#   ROUNDS=5 NO_HPL=1 bash bench/peers/lu_balance.sh
# Needs: apt-get install libopenmpi-dev openmpi-bin libclang-dev hpcc
set -euo pipefail
N=${1:-8192}
NB=${2:-448}
HPL_NB=${3:-256}
ROUNDS=${ROUNDS:-3}
NO_HPL=${NO_HPL:-}
cd "$(dirname "$0")/../.."
export OPENBLAS_CORETYPE=${PEER_OPENBLAS_CORETYPE:-SkylakeX}
work=$(mktemp -d)
hog=""
trap '[ -n "$hog" ] && kill "$hog" 2>/dev/null; rm -rf "$work"' EXIT
# Rank r bound to core r, so the busy loop on CPU 1 slows rank 1 only.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to core --map-by core --mca btl self,vader -np 2)
# shellcheck source=hpcc.sh
source bench/peers/hpcc.sh
cargo build --release -q --features mpi
if [ -z "$NO_HPL" ] && ! command -v hpcc >/dev/null; then
  echo "== hpcc not installed (apt-get install hpcc): HPL skipped"; NO_HPL=1
fi

tessera() { # balance -> GFLOP/s (and the dealing line on stderr)
  "${MPIRUN[@]}" ./target/release/tessera lu --n "$N" --nb "$NB" --grid 1x2 --workers 1 --balance "$1" > "$work/out.txt" 2>&1
  grep '^balance' "$work/out.txt" | sed 's/^/      /' >&2 || true
  awk '/^TS/ {printf "%.2f", $7}' "$work/out.txt"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

for mode in slow even; do
  echo "== $mode: $ROUNDS rounds (N=$N NB=$NB, HPL NB=$HPL_NB)"
  cs=(); ss=(); hs=()
  for r in $(seq "$ROUNDS"); do
    if [ "$mode" = slow ]; then taskset -c 1 sh -c 'while :; do :; done' & hog=$!; fi
    c=$(tessera cyclic); s=$(tessera speed)
    h=nan; if [ -z "$NO_HPL" ]; then h=$(hpl_gflops "$work" "$N" "$HPL_NB" 1 2); h=${h:-nan}; fi
    if [ -n "$hog" ]; then kill "$hog"; wait "$hog" 2>/dev/null || true; hog=""; fi
    cs+=("$c"); ss+=("$s"); hs+=("$h")
    awk -v r="$r" -v c="$c" -v s="$s" -v h="$h" 'BEGIN {
      printf "  round %d: cyclic %7.2f  speed %7.2f  HPL %7.2f   | speed/cyclic %.3f  speed/HPL %.3f\n", r, c, s, h, s / c, s / h }'
  done
  c=$(median "${cs[@]}"); s=$(median "${ss[@]}"); h=$(median "${hs[@]}")
  awk -v m="$mode" -v c="$c" -v s="$s" -v h="$h" 'BEGIN {
    printf "== %s, medians: cyclic %.2f  speed %.2f  HPL %.2f GFLOP/s   speed/cyclic = %.3f  speed/HPL = %.3f\n\n", m, c, s, h, s / c, s / h }'
done
