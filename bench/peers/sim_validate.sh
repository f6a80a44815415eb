#!/usr/bin/env bash
# Validation of simulated time on this machine (issue 14), all in one run:
# calibrate, then predict and really run, alternated ROUNDS times,
#   tessera lu --n N at 2 and 1 workers, and at 2 with the panel a team of 2
#   (calibrate times team panels too: issue 26),
#   tessera spmv --gen SPEC (2 workers),
#   mpirun -np 2 tessera lu --n N --grid 1x2 --workers 1 (with the mpi feature),
# and print predicted, measured (median) and the error of each.
# The 2-rank platform is the calibrated one with 2 ranks on the node and the
# network figures `tessera overhead-mpi` measures between 2 ranks here.
#   bash bench/peers/sim_validate.sh [N] [SPEC] [ROUNDS]   (defaults: 8192 stencil27:150 3)
#   SKIP_CALIBRATE=1 ... reuses bench/platforms/this-machine.toml
set -euo pipefail
N=${1:-8192}
SPEC=${2:-stencil27:150}
ROUNDS=${3:-3}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=""
if command -v mpirun >/dev/null && pkg-config --exists ompi 2>/dev/null; then
  mpi=1
  cargo build --release -q --features mpi
else
  cargo build --release -q
fi
bin=$PWD/target/release/tessera
MPIRUN=(mpirun --oversubscribe --mca btl self,vader -np 2)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
plat=bench/platforms/this-machine.toml

echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${SKIP_CALIBRATE:-}" ] || "$bin" calibrate --out "$plat" --n "$N" --spmv "$SPEC" | tail -3

if [ -n "$mpi" ]; then
  "${MPIRUN[@]}" "$bin" overhead-mpi --rounds 1 2>/dev/null > "$work/edges.txt"
  lat=$(awk '/^ *8 B: MPI one-way/ {for (i = 1; i <= NF; i++) if ($i == "chain:") {print $(i + 1); exit}}' "$work/edges.txt")
  gbs=$(awk '/^ *1 MiB: MPI bandwidth/ {print $5; exit}' "$work/edges.txt")
  sed -e 's/^ranks_per_node = .*/ranks_per_node = 2/' \
      -e "s#^perf_models = \"\\(.*\\)\"#perf_models = \"$PWD/bench/platforms/\\1\"#" "$plat" > "$work/two-ranks.toml"
  printf '\n[network]\nlatency_us = %s   # one remote edge between 2 ranks here (tessera overhead-mpi)\ngbs = %s   # MPI bandwidth at 1 MiB between 2 ranks here\n' \
      "$lat" "$gbs" >> "$work/two-ranks.toml"
  echo "== 2-rank platform: this machine, network latency $lat us, $gbs GB/s (measured by overhead-mpi)"
fi

lu_time() { awk '/^(TS|SIM)/ {print $6; exit}'; }
spmv_time() { awk '/^spmv: / {for (i = 1; i <= NF; i++) if ($i == "in") {print $(i + 1); exit}}'; }

p_lu2=$("$bin" lu --n "$N" --workers 2 --simulate "$plat" | lu_time)
p_lu1=$("$bin" lu --n "$N" --workers 1 --simulate "$plat" | lu_time)
p_team=$("$bin" lu --n "$N" --workers 2 --panel-team 2 --simulate "$plat" | lu_time)
p_spmv=$("$bin" spmv --gen "$SPEC" --workers 2 --simulate "$plat" | spmv_time)
[ -n "$mpi" ] && p_mpi=$("$bin" lu --n "$N" --grid 1x2 --workers 1 --simulate "$work/two-ranks.toml" | lu_time)

m_lu2=(); m_lu1=(); m_team=(); m_spmv=(); m_mpi=()
for r in $(seq "$ROUNDS"); do
  m_lu2+=("$("$bin" lu --n "$N" --workers 2 | lu_time)")
  m_lu1+=("$("$bin" lu --n "$N" --workers 1 | lu_time)")
  m_team+=("$("$bin" lu --n "$N" --workers 2 --panel-team 2 | lu_time)")
  m_spmv+=("$("$bin" spmv --gen "$SPEC" --workers 2 --no-faer 2>/dev/null | spmv_time)")
  [ -n "$mpi" ] && m_mpi+=("$("${MPIRUN[@]}" "$bin" lu --n "$N" --grid 1x2 --workers 1 2>/dev/null | lu_time)")
  echo "  round $r: lu w2 ${m_lu2[-1]} s  lu w1 ${m_lu1[-1]} s  lu team2 ${m_team[-1]} s  spmv ${m_spmv[-1]} s${mpi:+  lu 2 ranks ${m_mpi[-1]} s}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== predicted (simulated) against measured (median of $ROUNDS), seconds"
printf '%-44s %10s %10s %8s\n' run predicted measured error
row() { awk -v n="$1" -v p="$2" -v m="$3" 'BEGIN { printf "%-44s %10.3f %10.3f %+7.1f%%\n", n, p, m, 100 * (p - m) / m }'; }
row "lu --n $N --workers 2" "$p_lu2" "$(median "${m_lu2[@]}")"
row "lu --n $N --workers 1" "$p_lu1" "$(median "${m_lu1[@]}")"
row "lu --n $N --workers 2 --panel-team 2" "$p_team" "$(median "${m_team[@]}")"
row "spmv --gen $SPEC (SpMV time)" "$p_spmv" "$(median "${m_spmv[@]}")"
[ -n "$mpi" ] && row "mpirun -np 2 lu --n $N --grid 1x2 --workers 1" "$p_mpi" "$(median "${m_mpi[@]}")"
exit 0
