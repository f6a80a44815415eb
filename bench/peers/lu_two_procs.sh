#!/usr/bin/env bash
# Diagnostic for the distributed LU's per-core kernel speed (issue 13): is a
# kernel slower because two processes run side by side, or because of MPI?
# Alternates, round by round, on the same N and NB:
#   one     one process, 2 workers (what the 2-rank run is compared with);
#   pair    two independent single-process LUs at once, one worker each,
#           pinned to CPU 0 and CPU 1 (two processes, no MPI);
#   mpi     mpirun -np 2 tessera lu --grid 1x2, one worker per rank.
# Each run is traced; prints the GEMM rate per core and the mean panel time
# from `tessera trace summary`, per round and as medians.
#   bash bench/peers/lu_two_procs.sh [N] [NB]      (defaults: 8192 448)
#   ROUNDS=5 bash bench/peers/lu_two_procs.sh
# Needs: apt-get install libopenmpi-dev openmpi-bin libclang-dev
set -euo pipefail
N=${1:-8192}
NB=${2:-448}
ROUNDS=${ROUNDS:-4}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2)
cargo build --release -q --features mpi
bin=./target/release/tessera

# "GEMM GFLOP/s per core, panel mean in ms" of a trace.
rates() {
  "$bin" trace summary "$1" | awk '
    $1 == "gemm"  { g = $NF }
    $1 == "panel" { p = ($6 == "s") ? $5 * 1000 : ($6 == "ms") ? $5 : $5 / 1000 }
    END { printf "%s %s", g, p }'
}

for r in $(seq "$ROUNDS"); do
  "$bin" lu --n "$N" --nb "$NB" --workers 2 --trace "$work/one.json" >/dev/null
  read -r g1 p1 <<<"$(rates "$work/one.json")"

  taskset -c 0 "$bin" lu --n "$N" --nb "$NB" --workers 1 --trace "$work/p0.json" >/dev/null &
  pid=$!
  taskset -c 1 "$bin" lu --n "$N" --nb "$NB" --workers 1 --trace "$work/p1.json" >/dev/null
  wait "$pid"
  read -r ga pa <<<"$(rates "$work/p0.json")"
  read -r gb pb <<<"$(rates "$work/p1.json")"

  "${MPIRUN[@]}" "$bin" lu --n "$N" --nb "$NB" --grid 1x2 --workers 1 --trace "$work/d.json" >/dev/null 2>&1
  "$bin" trace merge --output "$work/dm.json" "$work/d.rank0.json" "$work/d.rank1.json" >/dev/null
  read -r gd pd <<<"$(rates "$work/dm.json")"

  printf 'round %d  GEMM GFLOP/s per core: one %6.2f  pair %6.2f %6.2f  mpi %6.2f   panel ms: one %6.1f  pair %6.1f %6.1f  mpi %6.1f\n' \
    "$r" "$g1" "$ga" "$gb" "$gd" "$p1" "$pa" "$pb" "$pd" | tee -a "$work/rounds"
done
med() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
col() { awk -v c="$1" '{print $c}' "$work/rounds" | med; }
# Fields of a round line: GEMM one 8, pair 10-11, mpi 13; panel one 17, pair 19-20, mpi 22.
printf '\n== medians of %d rounds (N=%d NB=%d)\n' "$ROUNDS" "$N" "$NB"
printf 'GEMM GFLOP/s per core: one process %s, pair %s and %s, 2 ranks %s\n' \
  "$(col 8)" "$(col 10)" "$(col 11)" "$(col 13)"
printf 'panel mean, ms:        one process %s, pair %s and %s, 2 ranks %s\n' \
  "$(col 17)" "$(col 19)" "$(col 20)" "$(col 22)"
