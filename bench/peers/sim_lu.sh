#!/usr/bin/env bash
# Showcase: tiled LU on 1 CPU worker + 1 emulated device, dmda against ws in the
# same run, with both traces' Gantt charts and the transfer volume of each.
#   bash bench/peers/sim_lu.sh [N] [NB] [SIM_SPEC] [OUT_DIR]
# defaults: 4096 384 "1:speed=0.25,latency=20us,bandwidth=10GB" ./sim-lu-out
# (a emulated device can never run a body faster than the host thread that runs
# it, so a slower device is the case where placement matters)
set -euo pipefail
N=${1:-4096}
NB=${2:-384}
SIM=${3:-1:speed=0.25,latency=20us,bandwidth=10GB}
OUT=${4:-sim-lu-out}
cd "$(dirname "$0")/../.."
cargo build --release -q
mkdir -p "$OUT"
declare -A gf
for sched in dmda ws; do
  echo "== tessera lu --n $N --nb $NB --workers 1 --emu $SIM --sched $sched"
  ./target/release/tessera lu --n "$N" --nb "$NB" --workers 1 --emu "$SIM" --sched "$sched" \
      --trace "$OUT/$sched.json" | tee "$OUT/$sched.txt" | grep -E "^TS|PASSED|FAILED|^node"
  gf[$sched]=$(awk '/^TS/ {print $7}' "$OUT/$sched.txt")
  ./target/release/tessera trace gantt "$OUT/$sched.json" -o "$OUT/$sched.png" >/dev/null
  ./target/release/tessera trace summary "$OUT/$sched.json" | grep -E "makespan|transfers|^ +[0-9]+ +[0-9.]+ [KMG]iB" || true
done
echo
awk -v d="${gf[dmda]}" -v w="${gf[ws]}" 'BEGIN { printf "dmda %.2f GFLOP/s, ws %.2f GFLOP/s: dmda/ws = %.2f\n", d, w, d / w }'
echo "Gantt charts: $OUT/dmda.png $OUT/ws.png"
