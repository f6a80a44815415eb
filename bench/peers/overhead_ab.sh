#!/usr/bin/env bash
# Regression check: per-task runtime overhead of two tessera binaries (an
# older build and this one), alternated round by round so both see the same
# machine load; prints each case's median per binary and the ratio new/old.
#   bash bench/peers/overhead_ab.sh OLD_BINARY [NEW_BINARY] [ROUNDS]
# The new binary is measured with both task APIs: --api dynamic (the same
# TaskBuilder calls as the old binary) and --api typed (the default).
# Extra `tessera overhead` options for both binaries go in OVERHEAD_ARGS,
# e.g. OVERHEAD_ARGS="--workers 1" (the submitting thread then has a core of
# its own instead of sharing one with a worker).
# The `independent` case is sensitive to the allocator, not only to the
# engine: a task node is allocated by the submitter and, most often, freed by
# a worker, and glibc serialises both on its main arena lock. To separate the
# two, run both binaries under another allocator in the same run, e.g.
#   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 bash bench/peers/overhead_ab.sh OLD
# (apt-get install libjemalloc2). Instruction counts, which do not depend on
# the load: valgrind --tool=callgrind BINARY overhead --independent 200000 --chain 1 --reps 1 --no-starpu
set -euo pipefail
extra=${OVERHEAD_ARGS:-}
old=${1:?usage: overhead_ab.sh OLD_BINARY [NEW_BINARY] [ROUNDS]}
new=${2:-target/release/tessera}
rounds=${3:-5}
tmp=$(mktemp -d)
for r in $(seq "$rounds"); do
  # shellcheck disable=SC2086 # $extra holds several options
  "$old" overhead --reps 3 --no-starpu $extra >"$tmp/old.$r"
  # shellcheck disable=SC2086
  "$new" overhead --reps 3 --no-starpu --api dynamic $extra >"$tmp/dyn.$r"
  # shellcheck disable=SC2086
  "$new" overhead --reps 3 --no-starpu --api typed $extra >"$tmp/typed.$r"
done
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-12s %10s %12s %10s %12s %10s\n' case old_ns new_dyn_ns ratio new_typed_ns ratio
for c in independent chain random4; do
  o=$(cat "$tmp"/old.* | awk -v c=$c '$1==c {print $4}' | med)
  d=$(cat "$tmp"/dyn.* | awk -v c=$c '$1==c {print $4}' | med)
  t=$(cat "$tmp"/typed.* | awk -v c=$c '$1==c {print $4}' | med)
  printf '%-12s %10s %12s %10.2f %12s %10.2f\n' "$c" "$o" "$d" "$(echo "$d/$o" | bc -l)" "$t" "$(echo "$t/$o" | bc -l)"
done
rm -rf "$tmp"
