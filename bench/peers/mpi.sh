#!/usr/bin/env bash
# Regression check of the distributed layer on this machine, all in one run,
# printing same-run ratios:
#  1. SpMV bandwidth: `mpirun -np 2 tessera spmv --gen SPEC --workers 1` against
#     the single-process run with 2 workers, alternated ROUNDS times (medians);
#     goal: >= 90 %. The halo bytes per iteration the transports carried are
#     printed beside what the partition predicts.
#  2. Remote edges: `mpirun -np 2 tessera overhead-mpi` (8 B and 1 MiB payloads)
#     beside plain MPI ping-pong / bandwidth measured in the same processes;
#     goals: per-edge cost <= 3x MPI latency, 1 MiB stream >= 80 % of MPI bandwidth.
#   bash bench/peers/mpi.sh [SPEC] [ITERS] [ROUNDS]   (defaults: stencil27:150 50 3)
# Needs: apt-get install libopenmpi-dev openmpi-bin libclang-dev (builds with --features mpi).
set -euo pipefail
SPEC=${1:-stencil27:150}
ITERS=${2:-50}
ROUNDS=${3:-3}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release -q -p tessera-bench --features mpi
bin=./target/release/tessera
mpi=(mpirun --oversubscribe --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)

echo "== load: $(uptime)"
echo "== SpMV $SPEC, $ITERS iterations: 1 process x 2 workers vs mpirun -np 2 x 1 worker, alternated $ROUNDS times"
singles=(); dists=()
for r in $(seq 1 "$ROUNDS"); do
  "$bin" spmv --gen "$SPEC" --iters "$ITERS" --workers 2 --no-faer --stream-mi 16 > "$work/single.txt"
  s=$(awk '/^effective/ {print $2; exit}' "$work/single.txt")
  "${mpi[@]}" -np 2 "$bin" spmv --gen "$SPEC" --iters "$ITERS" --workers 1 > "$work/dist.txt"
  d=$(awk '/^distributed spmv/ {for (i = 1; i <= NF; i++) if ($i == "effective") {print $(i + 1); exit}}' "$work/dist.txt")
  singles+=("$s"); dists+=("$d")
  echo "  round $r: single-process $s GB/s   2 ranks $d GB/s   ($(cut -d, -f1 <<< "$(uptime | sed 's/.*load average: //')") load)"
done
grep -E "^rank |^distributed spmv|^check" "$work/dist.txt" | sed 's/^/  last: /'
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
single=$(median "${singles[@]}")
dist=$(median "${dists[@]}")

echo "== remote edges vs plain MPI (mpirun -np 2 tessera overhead-mpi)"
"${mpi[@]}" -np 2 "$bin" overhead-mpi --rounds "$ROUNDS" 2> /dev/null | tee "$work/edges.txt"

echo
echo "== same-run ratios (load: $(uptime | sed 's/.*load average: //'))"
awk -v s="$single" -v d="$dist" 'BEGIN {
  printf "SpMV effective bandwidth: 2 ranks x 1 worker %.1f GB/s / 1 process x 2 workers %.1f GB/s = %.0f %% (goal >= 90 %%)\n", d, s, 100 * d / s
}'
awk '
  /chain:/ { for (i = 1; i <= NF; i++) if ($i == "=") r = $(i + 1); sub(/x$/, "", r)
             printf "%s remote edge (chain) = %s x MPI one-way latency (goal <= 3x)\n", $1 " " $2, r }
  /stream:/ { for (i = 1; i <= NF; i++) if ($i == "=") r = $(i + 1)
              printf "%s stream = %s %% of MPI bandwidth%s\n", $1 " " $2, r, ($2 == "MiB:" ? " (goal >= 80 %)" : "") }
' "$work/edges.txt"
