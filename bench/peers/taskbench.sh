#!/usr/bin/env bash
# Task Bench side by side: METG50 (minimum effective task granularity at 50 %
# efficiency, the Task Bench paper's figure) of `tessera taskbench` against
# Task Bench's own MPI (nonblock), OpenMP and StarPU / StarPU-MPI drivers, all
# measured in this one run on this machine.
#  Graphs (rows): stencil_1d at -width $cores -steps 10000; nearest -radix 5 at
#    -width 4*$cores -steps 2000 (over-decomposed); kernel compute_bound;
#    Tessera's symbolic front-end and StarPU with -field 2 (two output
#    buffers per point, reused in turn), as the SC20 paper's scripts run
#    PaRSEC, StarPU and Legion (experiments/*/metg_{parsec,starpu,legion}.sh);
#    MPI's driver ignores it; Tessera's STF front-end and OpenMP keep Task
#    Bench's default (a buffer per timestep), each system at its best: with
#    -field 2 the STF front-end ran 1.02x slower at -iter 512 (30 alternated
#    rounds), and OpenMP's tasks 2.5x slower even at -iter 2^14 (libgomp's
#    `depend` on the reused buffers), where the paper's script passes it.
#  Systems (columns): tessera (1 process, --workers $cores), tessera-mpi
#    (mpirun -np 2, --workers $cores/2), both with tasks submitted one by one
#    (STF, as StarPU's driver); tessera-sym and tessera-sym-mpi the same with
#    --frontend symbolic (tasks described by dependence functions, as
#    PaRSEC's PTG driver); tessera-light (1 process) with --frontend light
#    (the same description, each task a call of its body over buffers the
#    program keeps: Taskflow's and OpenMP's way, engine `light.rs`), with
#    -field as the symbolic front-end; tessera-light-mpi the same on 2 ranks; mpi (mpi/nonblock, 2 ranks), openmp
#    ($cores threads), starpu (1 process, $cores CPU workers), starpu-mpi (2 ranks).
#  Sweep: -iter 2^16, 2^15, ... 2^0; each point ROUNDS runs per system, systems
#    alternated within each round (the order rotated from round to round), best
#    (smallest) elapsed kept; a system stops
#    after two consecutive points under 50 % of its own best FLOP/s so far.
#    Granularity = elapsed x cores / tasks; efficiency = FLOP/s / the best
#    FLOP/s of any system on that graph in this run (one peak for all, as Task
#    Bench's scripts/chart_metg.py takes one per machine; until stop 59 it was
#    each system's own best, which rated a system with a low peak better: the
#    notes still print that figure); METG50 = smallest granularity with
#    efficiency >= 50 %.
#  StarPU-MPI is ~1000x coarser here (METG ~4.4 ms idle, PLATFORM.md; tens of
#    ms while other work loads the 2 cores), so its sweep is capped: it
#    starts at 2^STARPU_MPI_ITER_MAX (default 2^22, tasks of ~60 ms), runs
#    STARPU_MPI_TASKS tasks per graph (default 400: steps = tasks / width), and
#    above ITER_MAX runs alone (no other system to alternate with).
#   TASKBENCH_DIR=/path/to/task-bench bash bench/peers/taskbench.sh
#   QUICK=1 SYSTEMS="mpi openmp starpu" TASKBENCH_DIR=... bash bench/peers/taskbench.sh
# Knobs: ROUNDS (3), STEPS (both graphs' steps), QUICK=1 (steps and STARPU_MPI_TASKS
#   /10, 2 rounds), SYSTEMS (subset of the names above), GRAPHS ("stencil_1d nearest"),
#   ITER_MAX/ITER_MIN (16/0, powers of two), STARPU_MPI_ITER_MAX, STARPU_MPI_TASKS,
#   RUN_TIMEOUT (120 s per run), TB_ARGS (extra Task Bench flags for every run),
#   FIELD (the symbolic front-end's and StarPU's buffers per point, 2; empty:
#   Task Bench's default, a buffer per timestep, as every sweep until stop 78
#   ran them),
#   TASKBENCH_BUILD (build cache, default ~/.cache/tessera-taskbench),
#   NO_CARGO=1 (use ./target/release/tessera as it is, do not build it),
#   TESSERA_BIN (a tessera binary to run instead, not built: a machine with no
#   Rust toolchain, e.g. bench/results/h200-stop57/r4),
#   TESSERA_BASE_BIN (another tessera binary, e.g. a build of main before a change:
#   systems base-tessera, base-tessera-sym, base-tessera-mpi, base-tessera-sym-mpi
#   run it, alternated with the others in every round, for a same-run comparison).
# Task Bench source: TASKBENCH_DIR must hold an unpacked copy of the public
#   repository https://github.com/StanfordLegion/task-bench (git clone it, or
#   download and unpack its archive); it is only read, builds go to the cache.
# Needs (installed with apt-get when missing, as root): build-essential libopenmpi-dev
#   openmpi-bin libstarpu-dev (StarPU 1.3 with StarPU-MPI); cargo for tessera;
#   timeout (coreutils); libclang-dev for tessera's mpi feature (as mpi.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
cores=$(nproc)
ranks=2
rank_cores=$(( cores / ranks > 0 ? cores / ranks : 1 ))
QUICK=${QUICK:-}
[ -n "${TESSERA_BIN:-}" ] && NO_CARGO=1
ROUNDS=${ROUNDS:-$([ -n "$QUICK" ] && echo 2 || echo 3)}
div=$([ -n "$QUICK" ] && echo 10 || echo 1)
STENCIL_STEPS=${STEPS:-$(( 10000 / div ))}
NEAREST_STEPS=${STEPS:-$(( 2000 / div ))}
ITER_MAX=${ITER_MAX:-16}
ITER_MIN=${ITER_MIN:-0}
STARPU_MPI_ITER_MAX=${STARPU_MPI_ITER_MAX:-22}
STARPU_MPI_TASKS=${STARPU_MPI_TASKS:-$(( 400 / div ))}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
SYSTEMS=${SYSTEMS:-"tessera tessera-sym tessera-mpi tessera-sym-mpi mpi openmp starpu starpu-mpi"}
GRAPHS=${GRAPHS:-"stencil_1d nearest"}
TB_ARGS=${TB_ARGS:-}
FIELD=${FIELD-2}
read -r -a systems <<< "$SYSTEMS"
read -r -a graphs <<< "$GRAPHS"
for s in "${systems[@]}"; do
  case $s in
    base-tessera|base-tessera-sym|base-tessera-mpi|base-tessera-sym-mpi)
      [ -x "${TESSERA_BASE_BIN:-}" ] || { echo "system '$s' needs TESSERA_BASE_BIN, an executable tessera binary" >&2; exit 2; } ;;
    tessera|tessera-sym|tessera-light|tessera-mpi|tessera-sym-mpi|tessera-light-mpi|mpi|openmp|starpu|starpu-mpi) ;;
    *) echo "unknown system '$s' (tessera tessera-sym tessera-light tessera-mpi tessera-sym-mpi tessera-light-mpi mpi openmp starpu starpu-mpi)" >&2; exit 2 ;;
  esac
done
has() { local x; for x in "${systems[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }
# Whether any Tessera system, any on 1 process, any under mpirun is in the run.
has_tessera() { has tessera || has tessera-sym || has tessera-light || has tessera-mpi || has tessera-sym-mpi || has tessera-light-mpi; }
has_tessera_mpi() { has tessera-mpi || has tessera-sym-mpi || has tessera-light-mpi; }
need_peers=""
for s in mpi openmp starpu starpu-mpi; do has "$s" && need_peers=1; done
need_mpi=""
for s in tessera-mpi tessera-sym-mpi tessera-light-mpi base-tessera-mpi base-tessera-sym-mpi mpi starpu-mpi; do has "$s" && need_mpi=1; done

# ---- 1. packages -----------------------------------------------------------
missing=()
command -v g++ > /dev/null || missing+=(build-essential)
command -v make > /dev/null || missing+=(build-essential)
# OpenMP alone needs no MPI; StarPU's driver calls MPI_Init (StarPU-MPI).
if [ -n "$need_mpi" ] || has starpu; then
  { command -v mpicxx && command -v mpirun; } > /dev/null || missing+=(libopenmpi-dev openmpi-bin)
  dpkg -s libopenmpi-dev > /dev/null 2>&1 || missing+=(libopenmpi-dev)
fi
if has_tessera && [ -z "${NO_CARGO:-}" ]; then
  dpkg -s libclang-dev > /dev/null 2>&1 || missing+=(libclang-dev)   # tessera's mpi feature (bindgen)
fi
if has starpu || has starpu-mpi; then dpkg -s libstarpu-dev > /dev/null 2>&1 || missing+=(libstarpu-dev); fi
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "missing packages: ${missing[*]} (apt-get install them, or run as root)" >&2; exit 1; }
  echo "== apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- 2. Task Bench, built once into a cache keyed by its source ------------
tb=""
if [ -n "$need_peers" ]; then
  if [ -z "${TASKBENCH_DIR:-}" ] || [ ! -f "${TASKBENCH_DIR:-}/core/core.cc" ]; then
    cat >&2 << 'EOF'
TASKBENCH_DIR is unset or does not hold Task Bench's source (core/core.cc).
Get the public repository StanfordLegion/task-bench, e.g.
  git clone https://github.com/StanfordLegion/task-bench /path/to/task-bench
(or download https://github.com/StanfordLegion/task-bench/archive/refs/heads/master.tar.gz
 and unpack it), then run: TASKBENCH_DIR=/path/to/task-bench bash bench/peers/taskbench.sh
To run Tessera alone: SYSTEMS="tessera tessera-mpi" bash bench/peers/taskbench.sh
EOF
    exit 1
  fi
  # keyed by the sources, the compiler and the CPU's flags (openmp builds with -march=native)
  key=$(cd "$TASKBENCH_DIR" && find core mpi openmp starpu -maxdepth 1 -type f -print0 | sort -z \
        | xargs -0 cat | cat - <(g++ --version | head -1; grep -m1 '^flags' /proc/cpuinfo) | sha1sum | cut -c1-12)
  tb=${TASKBENCH_BUILD:-$HOME/.cache/tessera-taskbench}/$key
  mkdir -p "$tb"
  if [ ! -f "$tb/.copied" ]; then
    for d in core mpi openmp starpu; do rm -rf "${tb:?}/$d"; cp -r "$TASKBENCH_DIR/$d" "$tb/$d"; done
    touch "$tb/.copied"
  fi
  if [ ! -f "$tb/core/libcore_s.a" ]; then
    echo "== building Task Bench core in $tb"
    make -C "$tb/core" -j"$cores" > "$tb/core.log" 2>&1 || { tail -20 "$tb/core.log"; exit 1; }
  fi
  if has mpi && [ ! -x "$tb/mpi/nonblock" ]; then
    echo "== building Task Bench mpi/nonblock"
    make -C "$tb/mpi" nonblock > "$tb/mpi.log" 2>&1 || { tail -20 "$tb/mpi.log"; exit 1; }
  fi
  if has openmp && [ ! -x "$tb/openmp/main" ]; then
    echo "== building Task Bench openmp"
    make -C "$tb/openmp" main > "$tb/openmp.log" 2>&1 || { tail -20 "$tb/openmp.log"; exit 1; }
  fi
  if { has starpu || has starpu-mpi; } && [ ! -x "$tb/starpu/main" ]; then
    echo "== building Task Bench starpu (StarPU 1.3 + StarPU-MPI, Debian's libstarpu-dev)"
    # starpu/Makefile wants STARPU_DIR/include/starpu/1.3 and STARPU_DIR/lib/libstarpu{,mpi}-1.3.so.
    sd=$tb/starpu-dir
    rm -rf "$sd"; mkdir -p "$sd/include" "$sd/lib"
    first() { dpkg -L libstarpu-dev 2> /dev/null | awk -v e="$1" 'substr($0, length($0) - length(e) + 1) == e && !p {p = $0} END {print p}'; }
    inc=$(first /include/starpu/1.3)
    ln -s "$(dirname "${inc:-/usr/include/starpu/1.3}")" "$sd/include/starpu"
    for l in libstarpu-1.3.so libstarpumpi-1.3.so; do
      p=$(first "/$l")
      [ -n "$p" ] || p=$(ldconfig -p | awk -v l="$l" '$1 == l && !p {p = $NF} END {print p}')
      [ -n "$p" ] || { echo "cannot find $l (dpkg -L libstarpu-dev, ldconfig -p)" >&2; exit 1; }
      ln -s "$p" "$sd/lib/$l"
    done
    make -C "$tb/starpu" main STARPU_DIR="$sd" > "$tb/starpu.log" 2>&1 || { tail -20 "$tb/starpu.log"; exit 1; }
  fi
fi

# ---- 3. Tessera ------------------------------------------------------------
bin=${TESSERA_BIN:-./target/release/tessera}
tessera_na=""
workers_flag=""
sym_na=""
light_na=""
if has_tessera; then
  if [ -z "${NO_CARGO:-}" ]; then
    cargo build --release -q -p tessera-bench --features mpi || tessera_na="n/a (cargo build failed)"
  fi
  if [ -z "$tessera_na" ]; then
    if ! "$bin" taskbench --help > "$work/tessera-help.txt" 2>&1; then
      tessera_na="n/a (tessera taskbench not built)"
    else
      grep -q -- "--workers" "$work/tessera-help.txt" && workers_flag=1
      grep -q -- "--frontend" "$work/tessera-help.txt" || sym_na="n/a (this tessera has no --frontend)"
      grep -q -- "light" "$work/tessera-help.txt" || light_na="n/a (this tessera has no --frontend light)"
    fi
  fi
fi

mpi=(mpirun --oversubscribe --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
tessera_mpi_na=$tessera_na
if has_tessera_mpi && [ -z "$tessera_na" ]; then
  probe=$(timeout 60 "${mpi[@]}" -np "$ranks" "$bin" taskbench -type trivial -width "$ranks" -steps 1 -kernel empty 2>&1 || true)
  if grep -q "built without MPI" <<< "$probe"; then tessera_mpi_na="n/a (tessera built without --features mpi)"; fi
fi
export STARPU_SILENT=1 STARPU_NCUDA=0 STARPU_NOPENCL=0
export STARPU_HOME="$work/starpu-home"   # no calibration files left behind

# The command line of system $1 for Task Bench flags "${@:2}".
cmd_of() {
  local s=$1; shift
  case $s in
    # The same command line with the base binary (seen by the call below).
    base-*)      local bin=$TESSERA_BASE_BIN; cmd_of "${s#base-}" "$@" ;;
    tessera)     if [ -n "$workers_flag" ]; then echo "$bin taskbench --workers $cores $*"; else echo "$bin taskbench $*"; fi ;;
    tessera-mpi) if [ -n "$workers_flag" ]; then echo "${mpi[*]} -np $ranks $bin taskbench --workers $rank_cores $*"
                 else echo "${mpi[*]} -np $ranks $bin taskbench $*"; fi ;;
    tessera-sym) echo "$bin taskbench --frontend symbolic --workers $cores $*" ;;
    tessera-light) echo "$bin taskbench --frontend light --workers $cores $*" ;;
    tessera-light-mpi) echo "${mpi[*]} -np $ranks $bin taskbench --frontend light --workers $rank_cores $*" ;;
    tessera-sym-mpi) echo "${mpi[*]} -np $ranks $bin taskbench --frontend symbolic --workers $rank_cores $*" ;;
    mpi)         echo "${mpi[*]} -np $ranks $tb/mpi/nonblock $*" ;;
    openmp)      echo "env OMP_NUM_THREADS=$cores $tb/openmp/main $* -worker $cores" ;;
    # As Task Bench's experiments/*/metg_starpu.sh: -core N -p 1 -S (-S is a no-op in main.cc).
    # The starpu binary always calls MPI_Init (StarPU-MPI); started bare, OpenMPI's
    # singleton init hangs here now and then, so it runs under mpirun -np 1,
    # unbound (mpirun would pin the one rank to one core).
    starpu)      echo "${mpi[*]} -np 1 --bind-to none -x STARPU_NCPU=$cores $tb/starpu/main $* -core $cores -p 1 -S" ;;
    starpu-mpi)  echo "${mpi[*]} -np $ranks -x STARPU_NCPU=$rank_cores $tb/starpu/main $* -core $rank_cores -p 1 -S" ;;
  esac
}

width_of() { case $1 in stencil_1d) echo "$cores" ;; nearest) echo $(( 4 * cores )) ;; *) echo "unknown graph $1" >&2; exit 2 ;; esac; }
steps_of() {  # graph system
  if [ "$2" = starpu-mpi ]; then
    local st=$(( STARPU_MPI_TASKS / $(width_of "$1") )); echo $(( st > 1 ? st : 1 ))
  else case $1 in stencil_1d) echo "$STENCIL_STEPS" ;; nearest) echo "$NEAREST_STEPS" ;; esac; fi
}
flags_of() {  # graph system iter
  local radix=""; [ "$1" = nearest ] && radix="-radix 5"
  local field=""
  case $2 in tessera-sym*|base-tessera-sym*|tessera-light*|starpu*) field=${FIELD:+-field $FIELD} ;; esac
  echo "-type $1 $radix -width $(width_of "$1") -steps $(steps_of "$1" "$2") -kernel compute_bound -iter $3 $field $TB_ARGS"
}
itermax_of() { if [ "$1" = starpu-mpi ]; then echo "$STARPU_MPI_ITER_MAX"; else echo "$ITER_MAX"; fi; }

# One run: appends "graph system k round ok elapsed flops tasks" to runs.tsv.
run_one() {
  local g=$1 s=$2 k=$3 r=$4 c rc=0 e f t
  c=$(cmd_of "$s" $(flags_of "$g" "$s" $(( 1 << k ))))
  # shellcheck disable=SC2086
  timeout -k 10 "$RUN_TIMEOUT" $c > "$work/out.txt" 2>&1 < /dev/null || rc=$?
  e=$(awk '/^Elapsed Time/ {print $3; exit}' "$work/out.txt")
  f=$(awk '/^FLOP\/s/ {print $2; exit}' "$work/out.txt")
  t=$(awk '/^Total Tasks/ {print $3; exit}' "$work/out.txt")
  last_timed_out=""
  if [ "$rc" = 0 ] && [ -n "$e" ] && [ -n "$f" ] && [ -n "$t" ] && awk -v e="$e" 'BEGIN {exit !(e > 0)}'; then
    echo "$g $s $k $r 1 $e $f $t" >> "$work/runs.tsv"
  else
    echo "$g $s $k $r 0 - - -" >> "$work/runs.tsv"
    local why="exit status $rc"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then why="timed out after ${RUN_TIMEOUT} s"; last_timed_out=1; fi
    echo "  FAILED $s $g iter 2^$k round $r ($why): $c"
    grep -v -e '^----' -e 'Primary job' -e 'non-zero exit code' -e 'mpirun noticed' "$work/out.txt" | tail -n 4 | sed 's/^/    | /' || true
  fi
}

: > "$work/runs.tsv"; : > "$work/points.tsv"
echo "== load at start: $(uptime)"
echo "== Task Bench METG sweep, compute_bound, $cores cores (nproc), $ROUNDS rounds per point (systems alternated, best kept)"
echo "   systems: ${systems[*]}"
fields_said=${FIELD:-"a buffer per timestep (Task Bench's default)"}
echo "   output buffers per point (Tessera symbolic, StarPU): $fields_said"
if has tessera && [ -n "$tessera_na" ]; then echo "   tessera: $tessera_na"; fi
if has tessera-mpi && [ -n "$tessera_mpi_na" ]; then echo "   tessera-mpi: $tessera_mpi_na"; fi
if has tessera-sym && [ -n "$tessera_na$sym_na" ]; then echo "   tessera-sym: ${tessera_na:-$sym_na}"; fi
if has tessera-light && [ -n "$tessera_na$sym_na$light_na" ]; then echo "   tessera-light: ${tessera_na:-${sym_na:-$light_na}}"; fi
if has tessera-light-mpi && [ -n "$tessera_mpi_na$sym_na$light_na" ]; then echo "   tessera-light-mpi: ${tessera_mpi_na:-${sym_na:-$light_na}}"; fi
if has tessera-sym-mpi && [ -n "$tessera_mpi_na$sym_na" ]; then echo "   tessera-sym-mpi: ${tessera_mpi_na:-$sym_na}"; fi
for g in "${graphs[@]}"; do
  echo "== $g: width $(width_of "$g"), steps $(steps_of "$g" mpi)$(has starpu-mpi && echo " (starpu-mpi: $(steps_of "$g" starpu-mpi) steps from iter 2^$STARPU_MPI_ITER_MAX, capped)")"
  declare -A active=() below=() bestf=()
  kmax=$ITER_MIN
  for s in "${systems[@]}"; do
    if [ "$s" = tessera ] && [ -n "$tessera_na" ]; then continue; fi
    if [ "$s" = tessera-mpi ] && [ -n "$tessera_mpi_na" ]; then continue; fi
    if [ "$s" = tessera-sym ] && [ -n "$tessera_na$sym_na" ]; then continue; fi
    if [ "$s" = tessera-light ] && [ -n "$tessera_na$sym_na$light_na" ]; then continue; fi
    if [ "$s" = tessera-light-mpi ] && [ -n "$tessera_mpi_na$sym_na$light_na" ]; then continue; fi
    if [ "$s" = tessera-sym-mpi ] && [ -n "$tessera_mpi_na$sym_na" ]; then continue; fi
    active[$s]=1; below[$s]=0; bestf[$s]=0
    m=$(itermax_of "$s"); [ "$m" -gt "$kmax" ] && kmax=$m
  done
  for (( k = kmax; k >= ITER_MIN; k-- )); do
    part=()
    for s in "${systems[@]}"; do
      [ -n "${active[$s]:-}" ] && [ "$k" -le "$(itermax_of "$s")" ] && part+=("$s")
    done
    if [ ${#part[@]} -eq 0 ]; then
      # None runs at this iter: stop only when no system is left to start lower down.
      [ ${#active[@]} -eq 0 ] && break
      continue
    fi
    declare -A hung=()   # a run that timed out is not retried at this point
    for r in $(seq "$ROUNDS"); do
      # Rotated each round, so that no system always runs first or right
      # after the same one: on the 2-core VM the same binary in both slots
      # of a fixed pair read 7 % apart (`tessera overhead`'s chain, medians
      # of 11).
      for (( i = 0; i < ${#part[@]}; i++ )); do
        s=${part[$(( (i + r - 1) % ${#part[@]} ))]}
        [ -n "${hung[$s]:-}" ] && continue
        run_one "$g" "$s" "$k" "$r"
        [ -n "$last_timed_out" ] && hung[$s]=1
      done
    done
    unset hung
    for s in "${part[@]}"; do
      # Best run of this point; efficiency against the best FLOP/s seen so far.
      line=$(awk -v g="$g" -v s="$s" -v k="$k" -v c="$cores" -v bf="${bestf[$s]}" '
        $1 == g && $2 == s && $3 == k { n++; if ($5 == 1) { ok++; if (!best || $6 < best) { best = $6; f = $7; t = $8 } } }
        END {
          if (!ok) { printf "0 - - %d %d", ok, n; exit }
          if (f > bf) bf = f
          printf "1 %s %.6g %d %d %.6g %.6e %.4f %.6g", f, bf, ok, n, best, t, f / bf, best * c / t * 1e6
        }' "$work/runs.tsv")
      read -r ok f bf nok n best t eff gran <<< "$line"
      if [ "$ok" = 1 ]; then
        bestf[$s]=$bf
        echo "$g $s $k 1 $gran $f $best $t" >> "$work/points.tsv"
        awk -v s="$s" -v k="$k" -v b="$best" -v gr="$gran" -v f="$f" -v e="$eff" -v ok="$nok" -v n="$n" 'BEGIN {
          printf "  %-15s iter 2^%-2d best %10.4f s  granularity %11.3f us  FLOP/s %.3e  eff %5.1f %%%s\n",
                 s, k, b, gr, f, 100 * e, (ok < n ? sprintf("  (%d of %d runs ok)", ok, n) : "") }'
        if awk -v e="$eff" 'BEGIN {exit !(e < 0.5)}'; then below[$s]=$(( below[$s] + 1 )); else below[$s]=0; fi
      else
        echo "$g $s $k 0 - - - -" >> "$work/points.tsv"
        echo "  $(printf '%-15s' "$s") iter 2^$k FAILED (all $n runs)"
        below[$s]=$(( below[$s] + 1 ))
      fi
      if [ "${below[$s]}" -ge 2 ]; then
        unset "active[$s]"
        echo "  $(printf '%-15s' "$s") stops: 2 consecutive points under 50 % (or failed)"
      fi
    done
  done
  unset active below bestf
done
echo "== load at end: $(uptime)"

# ---- table -------------------------------------------------------------------
echo
echo "== METG50 in us (granularity = elapsed x $cores cores / tasks; efficiency = FLOP/s / the best FLOP/s of any system on the graph in this run)"
echo "   tessera: 1 process x $cores workers; tessera-mpi: $ranks ranks x $rank_cores (both STF); tessera-sym(-mpi): the same, --frontend symbolic;"
echo "   tessera-light(-mpi): 1 process x $cores workers (or $ranks ranks x $rank_cores), --frontend light;"
echo "   mpi: Task Bench mpi/nonblock, $ranks ranks;"
echo "   openmp: $cores threads; starpu: 1 process, $cores CPU workers (lws); starpu-mpi: $ranks ranks x $rank_cores"
awk -v systems="${systems[*]}" -v graphs="${graphs[*]}" -v na_t="$tessera_na" -v na_tm="$tessera_mpi_na" \
    -v na_ts="${tessera_na:-$sym_na}" -v na_tl="${tessera_na:-${sym_na:-$light_na}}" \
    -v na_tlm="${tessera_mpi_na:-${sym_na:-$light_na}}" -v na_tsm="${tessera_mpi_na:-$sym_na}" -v smpi_k="$STARPU_MPI_ITER_MAX" '
  function fmt(x) { return x >= 1000 ? sprintf("%.0f", x) : sprintf("%.3g", x) }
  # The point of `key` with the smallest granularity at >= 50 % of `peak`
  # (0: none).
  function metg(key, peak,    p, m) {
    m = 0
    for (p = 1; p <= n[key]; p++)
      if (ok[key, p] && f[key, p] / peak >= 0.5 && (!m || gr[key, p] < gr[key, m])) m = p
    return m
  }
  { key = $1 SUBSEP $2; n[key]++; k[key, n[key]] = $3; ok[key, n[key]] = $4; gr[key, n[key]] = $5; f[key, n[key]] = $6
    if ($4 == 1 && $6 > ref[key]) ref[key] = $6
    if ($4 == 1 && $6 > gref[$1]) gref[$1] = $6 }
  END {
    ns = split(systems, S, " "); ng = split(graphs, G, " ")
    printf "%-12s", "graph"; for (j = 1; j <= ns; j++) printf " %-20s", S[j]; printf "\n"
    for (i = 1; i <= ng; i++) {
      g = G[i]; printf "%-12s", g
      for (j = 1; j <= ns; j++) {
        s = S[j]; key = g SUBSEP s; cell = ""
        if ((s == "tessera" && na_t != "") || (s == "tessera-mpi" && na_tm != "") \
            || (s == "tessera-sym" && na_ts != "") || (s == "tessera-light" && na_tl != "") \
            || (s == "tessera-light-mpi" && na_tlm != "") \
            || (s == "tessera-sym-mpi" && na_tsm != "")) cell = "n/a"
        else if (!n[key]) cell = "no data"
        else if (!ref[key]) { cell = "failed"; note[key] = g " " s ": every run failed (see the FAILED lines above)" }
        else {
          # points are in sweep order (iter descending)
          # Efficiency against the best FLOP/s of any system on this graph
          # in this run: one peak for all, as the Task Bench scripts take one
          # per machine (scripts/chart_metg.py, --peak-compute-bandwidth).
          m = metg(key, gref[g])
          nf = 0; for (p = 1; p <= n[key]; p++) if (!ok[key, p]) nf++
          # still >= 50 % at the sweep end: the true METG50 may be smaller
          low = (f[key, n[key]] / gref[g] >= 0.5 && ok[key, n[key]]) ? "<=" : ""
          cell = !m ? "none >= 50 %" : low fmt(gr[key, m]) (nf ? sprintf(" (%d pt failed)", nf) : "")
          # Task Bench scripts/chart_metg.py: interpolate toward the next (finer) point
          if (m && m < n[key] && ok[key, m + 1] && gr[key, m + 1] < gr[key, m]) {
            e1 = f[key, m] / gref[g]; e2 = f[key, m + 1] / gref[g]
            ip[key] = gr[key, m + 1] + (0.5 - e2) * (gr[key, m] - gr[key, m + 1]) / (e1 - e2)
          }
          # Against the best of the system itself (the table until stop 59).
          own = metg(key, ref[key])
          note[key] = sprintf("%s %s: best %.3e FLOP/s (%.0f %% of the best system on %s), swept 2^%d..2^%d%s; against its own best: %s us",
                              g, s, ref[key], 100 * ref[key] / gref[g], g, k[key, 1], k[key, n[key]],
                              (key in ip) ? ", METG50 interpolated as Task Bench does: " fmt(ip[key]) " us" : "",
                              own ? fmt(gr[key, own]) : "none")
        }
        printf " %-20s", cell
      }
      printf "\n"
    }
    printf "\n"
    for (i = 1; i <= ng; i++) for (j = 1; j <= ns; j++) if ((G[i] SUBSEP S[j]) in note) print "  " note[G[i] SUBSEP S[j]]
    if (index(" " systems " ", " tessera ") && na_t != "") print "  tessera: " na_t
    if (index(" " systems " ", " tessera-mpi ") && na_tm != "") print "  tessera-mpi: " na_tm
    if (index(" " systems " ", " tessera-sym ") && na_ts != "") print "  tessera-sym: " na_ts
    if (index(" " systems " ", " tessera-light ") && na_tl != "") print "  tessera-light: " na_tl
    if (index(" " systems " ", " tessera-light-mpi ") && na_tlm != "") print "  tessera-light-mpi: " na_tlm
    if (index(" " systems " ", " tessera-sym-mpi ") && na_tsm != "") print "  tessera-sym-mpi: " na_tsm
    if (index(" " systems " ", " starpu-mpi ")) printf "  starpu-mpi: capped sweep (from 2^%d, fewer tasks, run alone above the others'"'"' start)\n", smpi_k
    print "  <=X: still >= 50 % at the finest point swept, so METG50 is at most X"
  }' "$work/points.tsv"
