#!/usr/bin/env bash
# Showcase: Tessera's CG beside PETSc's (KSPCG through petsc4py, PETSc 3.18 from Debian) on
# the same matrix, in one process and on 2 ranks, rounds alternated, printing same-run
# ratios (PETSc time / Tessera time: above 1 means Tessera is faster):
#  - 1 process: tessera with 2 workers vs PETSc with 2 ranks (the same two cores), and
#    PETSc with 1 rank;
#  - 2 ranks: mpirun -np 2 tessera (1 worker each) vs PETSc with 2 ranks;
#  - whole CG iteration, and the SpMV inside it (PETSc: MatMult timed alone, as many times),
#    and Tessera's SpMV inside CG against its plain `tessera spmv` rate;
#  - huge pages: the tessera binary advises its large blocks into transparent huge pages
#    (bench/src/huge_pages.rs); Debian's PETSc does not. So each round also runs PETSc with
#    2 ranks under glibc's GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (the same advice, from
#    malloc) and Tessera's 1 process with TESSERA_HUGE_PAGES=0, and prints both ratios.
#  - column indices: Tessera's row blocks hold 16-bit column gaps where each row rises by at
#    most 65,535 columns at a time (the stencils do, up to 256^3), 10 bytes per nonzero instead
#    of PETSc AIJ's 12;
#    each round also runs Tessera with --no-compact (u32 indices, as AIJ) and prints its ratios.
#  - the ratios are of medians over the rounds; the last line gives each round's own ratio
#    (min, median, max), since this VM's speed drifts between rounds.
# Both solve A x = 1 from x = 0 with the same preconditioner, stopping on the
# unpreconditioned residual (rtol) or after ITERS iterations; the nonzero counts of both are
# checked to agree, and the iteration counts are printed side by side.
#   bash bench/peers/cg.sh [SPEC|FILE.mtx] [ITERS] [ROUNDS] [PC] [RTOL] [CG]
#   (defaults: stencil27:150 50 3 none 0 standard; PC none or jacobi; RTOL 0 runs every
#   iteration; CG standard or pipelined, Tessera's --cg: PETSc runs KSPCG either way)
# Installs (apt, once) python3-petsc4py python3-mpi4py python3-scipy; builds with
# --features mpi (needs libopenmpi-dev openmpi-bin libclang-dev).
set -euo pipefail
SPEC=${1:-stencil27:150}
ITERS=${2:-50}
ROUNDS=${3:-3}
PC=${4:-none}
RTOL=${5:-0}
CG=${6:-standard}
cd "$(dirname "$0")/../.."
here=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pkgs=(python3-petsc4py python3-mpi4py python3-scipy)
if ! dpkg -s "${pkgs[@]}" > /dev/null 2>&1; then
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get install -y "${pkgs[@]}"
fi
# petsc4py finds PETSc through PETSC_DIR: the .../petscdir/petsc3.18/x86_64-linux-gnu-real
# folder the real-scalar package lists.
PETSC_DIR=$(dpkg -L python3-petsc4py-real3.18 2> /dev/null | grep -E '/petscdir/[^/]+/[^/]+-real$' | head -n 1 || true)
[ -n "$PETSC_DIR" ] || PETSC_DIR=$(ls -d /usr/lib/petscdir/*/*-real 2> /dev/null | head -n 1)
export PETSC_DIR
echo "== PETSC_DIR=$PETSC_DIR"
# The system Python, where apt installs petsc4py (a pyenv or venv python3 would not see it).
py=/usr/bin/python3
[ -x "$py" ] || py=python3

cargo build --release -q -p tessera-bench --features mpi
bin=$here/target/release/tessera
mpi=(mpirun --oversubscribe --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
case $SPEC in
  *.mtx) tsrc=(--matrix "$SPEC") ;;
  *) tsrc=(--gen "$SPEC") ;;
esac
targs=(spmv "${tsrc[@]}" --solver cg --cg "$CG" --pc "$PC" --max-iters "$ITERS" --no-faer --stream-mi 16)
[ "$RTOL" = 0 ] || targs+=(--rtol "$RTOL")
# RTOL 0 runs every iteration. Tessera refuses a tolerance below 10 x the machine epsilon
# (issue 42: none is reachable), so it gets 1e-14, which ITERS iterations do not reach on
# the stencils (the iteration counts are printed side by side below); PETSc gets 1e-300.
[ "$RTOL" = 0 ] && targs+=(--rtol 1e-14)
petsc_rtol=$RTOL; [ "$RTOL" = 0 ] && petsc_rtol=1e-300

# "iteration: X ms = SpMV Y ms ..." -> X Y ; "petsc: ..." -> iteration_ms matmult_ms
tessera_ms() { awk '/^iteration:/ {print $2, $6; exit}' "$1"; }
petsc_field() { awk -v f="$2" '/^petsc:/ {for (i = 1; i <= NF; i++) if ($i == f) {print $(i + 1); exit}}' "$1"; }
tessera_nnz() { awk '/^matrix / {for (i = 1; i <= NF; i++) if ($i ~ /^nonzeros/) {print $(i - 1); exit}}' "$1"; }
tessera_iters() { awk '/^cg: stopped after/ {print $4; exit}' "$1"; }

echo "== load: $(uptime)"
echo "== CG on $SPEC, --pc $PC, at most $ITERS iterations, rtol $RTOL, $ROUNDS alternated rounds"
declare -A sum
for r in $(seq 1 "$ROUNDS"); do
  "$bin" "${targs[@]}" --workers 2 > "$work/t1.txt"
  "$bin" spmv "${tsrc[@]}" --iters "$ITERS" --workers 2 --no-faer --stream-mi 16 > "$work/plain.txt"
  awk '/^effective / {print $2; exit}' "$work/plain.txt" >> "$work/plain.all"
  awk '/^effective: SpMV/ {print $3; exit}' "$work/t1.txt" >> "$work/incg.all"
  "${mpi[@]}" -np 2 "$bin" "${targs[@]}" --workers 1 > "$work/t2.txt"
  "$py" bench/peers/cg.py "$SPEC" "$ITERS" "$petsc_rtol" "$PC" > "$work/p1.txt"
  "${mpi[@]}" -np 2 "$py" bench/peers/cg.py "$SPEC" "$ITERS" "$petsc_rtol" "$PC" > "$work/p2.txt"
  TESSERA_HUGE_PAGES=0 "$bin" "${targs[@]}" --workers 2 > "$work/t1n.txt"
  "${mpi[@]}" -x GLIBC_TUNABLES=glibc.malloc.hugetlb=1 -np 2 "$py" bench/peers/cg.py "$SPEC" "$ITERS" "$petsc_rtol" "$PC" > "$work/p2h.txt"
  "$bin" "${targs[@]}" --workers 2 --no-compact > "$work/t1u.txt"
  "${mpi[@]}" -np 2 "$bin" "${targs[@]}" --workers 1 --no-compact > "$work/t2u.txt"
  read -r t1 t1s <<< "$(tessera_ms "$work/t1.txt")"
  read -r t2 t2s <<< "$(tessera_ms "$work/t2.txt")"
  p1=$(petsc_field "$work/p1.txt" iteration_ms); p1s=$(petsc_field "$work/p1.txt" matmult_ms)
  p2=$(petsc_field "$work/p2.txt" iteration_ms); p2s=$(petsc_field "$work/p2.txt" matmult_ms)
  read -r t1n _ <<< "$(tessera_ms "$work/t1n.txt")"
  p2h=$(petsc_field "$work/p2h.txt" iteration_ms)
  read -r t1u _ <<< "$(tessera_ms "$work/t1u.txt")"
  read -r t2u _ <<< "$(tessera_ms "$work/t2u.txt")"
  for f in t1 t1s t2 t2s p1 p1s p2 p2s t1n p2h t1u t2u; do echo "${!f}" >> "$work/$f.all"; done
  echo "  round $r: tessera 1 proc ${t1} ms (SpMV ${t1s}), 2 ranks ${t2} ms (SpMV ${t2s}); petsc 1 rank ${p1} ms (MatMult ${p1s}), 2 ranks ${p2} ms (MatMult ${p2s})"
  echo "           huge pages swapped: tessera 1 proc without ${t1n} ms; petsc 2 ranks with ${p2h} ms"
  echo "           u32 column indices (--no-compact): tessera 1 proc ${t1u} ms, 2 ranks ${t2u} ms"
done

# The same matrix and the same iteration counts on both sides.
tn=$(tessera_nnz "$work/t1.txt"); pn=$(petsc_field "$work/p2.txt" nnz)
ti=$(tessera_iters "$work/t1.txt"); pi=$(petsc_field "$work/p2.txt" iterations)
echo "== nonzeros: tessera $tn, petsc $pn; iterations: tessera $ti, petsc $pi (reason $(petsc_field "$work/p2.txt" reason))"
if [ "$tn" != "$pn" ]; then
  echo "cg.sh: the two matrices differ ($tn vs $pn nonzeros): the ratios would compare different work" >&2
  exit 1
fi
grep -E "^(iteration|effective|cg: stopped|cg: true|STREAM)" "$work/t1.txt" | sed 's/^/  tessera 1 proc: /'
grep -E "^(iteration|effective|cg: stopped|cg: true|STREAM)" "$work/t2.txt" | sed 's/^/  tessera 2 ranks: /'

median() { sort -g "$1" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for f in t1 t1s t2 t2s p1 p1s p2 p2s t1n p2h t1u t2u plain incg; do declare "$f=$(median "$work/$f.all")"; done
echo
echo "== same-run ratios, medians of $ROUNDS rounds (PETSc time / Tessera time; load: $(uptime | sed 's/.*load average: //'))"
awk -v plain="$plain" -v incg="$incg" 'BEGIN {
  printf "SpMV inside CG %.1f GB/s = %.0f %% of plain tessera spmv %.1f GB/s, same rounds (goal >= 90 %%)\n", incg, 100 * incg / plain, plain
}'
awk -v t1="$t1" -v t1s="$t1s" -v t2="$t2" -v t2s="$t2s" -v p1="$p1" -v p1s="$p1s" -v p2="$p2" -v p2s="$p2s" -v t1n="$t1n" -v p2h="$p2h" -v t1u="$t1u" -v t2u="$t2u" 'BEGIN {
  printf "| setup | Tessera | PETSc | PETSc / Tessera |\n|---|---|---|---|\n"
  printf "| 1 process (2 workers) vs PETSc 2 ranks, whole iteration | %.2f ms | %.2f ms | %.2f (goal >= 1.0) |\n", t1, p2, p2 / t1
  printf "| 1 process (2 workers) vs PETSc 1 rank, whole iteration | %.2f ms | %.2f ms | %.2f |\n", t1, p1, p1 / t1
  printf "| 1 process, SpMV inside CG vs MatMult (1 rank) | %.2f ms | %.2f ms | %.2f |\n", t1s, p1s, p1s / t1s
  printf "| 2 ranks, whole iteration | %.2f ms | %.2f ms | %.2f (goal >= 1.0) |\n", t2, p2, p2 / t2
  printf "| 2 ranks, SpMV part vs MatMult | %.2f ms | %.2f ms | %.2f |\n", t2s, p2s, p2s / t2s
  printf "| huge pages on both sides: 1 process vs PETSc 2 ranks (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) | %.2f ms | %.2f ms | %.2f |\n", t1, p2h, p2h / t1
  printf "| huge pages on both sides: 2 ranks vs PETSc 2 ranks (the same) | %.2f ms | %.2f ms | %.2f |\n", t2, p2h, p2h / t2
  printf "| huge pages on neither: 1 process (TESSERA_HUGE_PAGES=0) vs PETSc 2 ranks | %.2f ms | %.2f ms | %.2f |\n", t1n, p2, p2 / t1n
  printf "| u32 column indices as PETSc AIJ (--no-compact): 1 process vs PETSc 2 ranks | %.2f ms | %.2f ms | %.2f |\n", t1u, p2, p2 / t1u
  printf "| u32 column indices as PETSc AIJ (--no-compact): 2 ranks vs PETSc 2 ranks | %.2f ms | %.2f ms | %.2f |\n", t2u, p2, p2 / t2u
}'
# The VM's speed drifts between rounds: each round's own ratio, for the spread behind the
# medians above.
spread() {
  paste "$work/$1.all" "$work/$2.all" | awk '{print $1 / $2}' | sort -g \
    | awk '{a[NR] = $1} END {printf "min %.2f, median %.2f, max %.2f", a[1], a[int((NR + 1) / 2)], a[NR]}'
}
echo "per-round ratios (PETSc 2 ranks / Tessera, $ROUNDS rounds): 1 process $(spread p2 t1); 2 ranks $(spread p2 t2)"
