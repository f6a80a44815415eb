#!/usr/bin/env bash
# Regression check at fixed granularities: two tessera binaries (an older
# build and this one) run the same Task Bench cases, alternated run by run
# with the order flipped every round, so both see the same machine load.
# Prints, per case, each binary's median and best elapsed time, the ratio
# of the medians (new/old), and in how many rounds the new binary was the
# faster of the pair (a sign test: on a noisy VM a ratio of 0.95 with 11 of
# 20 rounds faster is not a finding; 18 of 20 is).
#   bash bench/peers/taskbench_ab.sh OLD_BINARY [NEW_BINARY] [ROUNDS]
# Cases (CASES selects some by name): the one-process runs with 2 workers,
# both front-ends, empty tasks and `compute_bound` near METG50 (`-iter
# 512`); `nearest` over-decomposed; both again with two buffers per point
# reused (`-field 2`, as the METG sweep runs them); two independent chains (`no_comm`,
# where two workers should take half the time of one); and, when the binaries have MPI
# (`--features mpi`) and mpirun is here, the same stencils on 2 ranks of 1
# worker. Build both with `cargo build --release -p tessera-bench --features
# mpi` and copy the old one aside first.
# NEW_ARGS: Task Bench flags the new binary's runs get on top of the case's
# (NEW_ARGS="-field 2": a configuration against the old one).
# METG50 itself comes from the sweep (bench/peers/taskbench.sh, with
# TESSERA_BASE_BIN for the old binary); on a 2-core VM a sweep's METG50
# moves by up to 2x from run to run, so this script's medians at a fixed
# point are the finer measure of a change.
set -euo pipefail
old=${1:?usage: taskbench_ab.sh OLD_BINARY [NEW_BINARY] [ROUNDS]}
new=${2:-target/release/tessera}
rounds=${3:-10}
for b in "$old" "$new"; do
  [ -x "$b" ] || { echo "taskbench_ab.sh: $b is not an executable" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
stencil="-width 2 -type stencil_1d"
nearest="-steps 2000 -width 8 -radix 5 -type nearest"
# name | ranks | tessera options | Task Bench options
all_cases=(
  "sym-stencil-empty|1|--frontend symbolic --workers 2|-steps 20000 $stencil -kernel empty"
  "sym-stencil-512|1|--frontend symbolic --workers 2|-steps 10000 $stencil -kernel compute_bound -iter 512"
  "stf-stencil-empty|1|--workers 2|-steps 20000 $stencil -kernel empty"
  "stf-stencil-512|1|--workers 2|-steps 10000 $stencil -kernel compute_bound -iter 512"
  "sym-nearest-empty|1|--frontend symbolic --workers 2|$nearest -kernel empty"
  "sym-stencil-512-f2|1|--frontend symbolic --workers 2|-steps 10000 $stencil -field 2 -kernel compute_bound -iter 512"
  "sym-nearest-512-f2|1|--frontend symbolic --workers 2|$nearest -field 2 -kernel compute_bound -iter 512"
  "sym-nocomm-empty|1|--frontend symbolic --workers 2|-steps 20000 -width 2 -type no_comm -kernel empty"
  "sym1w-stencil-empty|1|--frontend symbolic --workers 1|-steps 20000 $stencil -kernel empty"
  "2r-sym-stencil-empty|2|--frontend symbolic --workers 1|-steps 20000 $stencil -kernel empty"
  "2r-sym-stencil-1024|2|--frontend symbolic --workers 1|-steps 10000 $stencil -kernel compute_bound -iter 1024"
  "2r-stf-stencil-empty|2|--workers 1|-steps 20000 $stencil -kernel empty"
  "2r-sym-stencil-1024-f2|2|--frontend symbolic --workers 1|-steps 10000 $stencil -field 2 -kernel compute_bound -iter 1024"
)
# A build without MPI refuses to run under mpirun: the probe tells.
mpi=no
if command -v mpirun >/dev/null; then
  mpi=yes
  for b in "$old" "$new"; do
    mpirun --oversubscribe --mca btl self,vader -np 2 "$b" taskbench --workers 1 -steps 2 -width 2 >/dev/null 2>&1 || mpi=no
  done
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One run: prints its elapsed seconds (Task Bench's line), or fails loudly.
run() {
  local bin=$1 ranks=$2 opts=$3 args=$4 out
  # shellcheck disable=SC2086 # the options are word lists
  if [ "$ranks" = 1 ]; then
    out=$("$bin" taskbench $opts $args 2>&1)
  else
    out=$(mpirun --oversubscribe --mca btl self,vader -np "$ranks" "$bin" taskbench $opts $args 2>&1)
  fi
  echo "$out" | awk '/^Elapsed Time/ {print $3; found=1; exit} END {if (!found) exit 1}' || {
    echo "taskbench_ab.sh: no elapsed time from $bin taskbench $opts $args:" >&2
    echo "$out" | tail -5 >&2
    exit 1
  }
}
cases=()
for c in "${all_cases[@]}"; do
  IFS='|' read -r name ranks _ _ <<<"$c"
  if [ -n "${CASES:-}" ] && [[ " $CASES " != *" $name "* ]]; then continue; fi
  if [ "$ranks" != 1 ] && [ "$mpi" = no ]; then
    echo "(skipping $name: no mpirun, or a binary built without MPI)"
    continue
  fi
  cases+=("$c")
done
echo "== taskbench A/B: old $old, new $new${NEW_ARGS:+ (with $NEW_ARGS)}, $rounds rounds, order flipped each round; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name ranks opts args <<<"$c"
    if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for who in $order; do
      bin=$old
      extra=""
      if [ "$who" = new ]; then bin=$new; extra=${NEW_ARGS:-}; fi
      echo "$(run "$bin" "$ranks" "$opts" "$args $extra")" >>"$tmp/$name.$who"
    done
  done
done
printf '%-22s %11s %11s %11s %11s %7s %9s\n' case old_median new_median old_best new_best ratio new_faster
for c in "${cases[@]}"; do
  IFS='|' read -r name _ _ _ <<<"$c"
  paste "$tmp/$name.old" "$tmp/$name.new" | awk -v name="$name" '
    { o[NR] = $1; n[NR] = $2; if ($2 < $1) faster++ }
    function median(a, k,   i, j, t, b) {
      for (i = 1; i <= k; i++) b[i] = a[i]
      for (i = 2; i <= k; i++) for (j = i; j > 1 && b[j-1] > b[j]; j--) { t = b[j]; b[j] = b[j-1]; b[j-1] = t }
      return (b[int((k+1)/2)] + b[int(k/2)+1]) / 2
    }
    function best(a, k,   i, m) { m = a[1]; for (i = 2; i <= k; i++) if (a[i] < m) m = a[i]; return m }
    END {
      mo = median(o, NR); mn = median(n, NR)
      printf "%-22s %11.4f %11.4f %11.4f %11.4f %7.3f %6d/%-2d\n", name, mo, mn, best(o, NR), best(n, NR), mn / mo, faster, NR
    }'
done
echo "(seconds per run; ratio = new median / old median; new_faster = rounds in which new beat old)"
