#!/usr/bin/env bash
# Stop 58, run 2: dmda's estimate of an unmeasured task with no flops hint
# (the tile LU's row interchanges): 10 µs on a CPU worker whatever its data
# (tessera-head, e0f6d84) against its data streamed at 10 GB/s
# (tessera-swap). Alternated, page cache dropped before each run:
#  1. GPU-only tile LU (one CPU worker), traced: where the swaps ran;
#  2. CPU + GPU tile LU (16 host cores), Cashmere's case in gpu.sh;
#  3. bench/peers/gpu.sh with tessera-swap, time permitting.
set -u
O=/tmp/r58b
rm -rf "$O"; mkdir -p "$O"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/summary.txt"; }
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 -name 'lib*.so*' \( -name 'libcublas*' -o -name 'libcusolver*' -o -name 'libnvrtc*' \) -printf '%h\n' 2>/dev/null | grep -v stubs | sort -u); do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  done
done
export LD_LIBRARY_PATH
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; }
one() { # binary tag extra-args...
  local b=$1 tag=$2; shift 2
  drop
  timeout -k 3 45 ".gpu/tessera-$b" lu --n 22528 --nb 2048 --gpus all --update tiles "$@" > "$O/$tag.txt" 2>&1
  log "$tag rc=$?: $(awk '/^TS/ {print $7 " GFLOP/s " $6 " s"}' "$O/$tag.txt") $(grep -oE 'PASSED|FAILED' "$O/$tag.txt")"
}
for r in 1 2; do
  for b in head swap; do
    one $b "gpu-$b-r$r" --workers 1 --trace "$O/gpu-$b-r$r.json"
    ".gpu/tessera-$b" trace summary "$O/gpu-$b-r$r.json" > "$O/gpu-$b-r$r-summary.txt" 2>&1
    python3 - "$O/gpu-$b-r$r.json" >> "$O/summary.txt" <<'PY'
import json, sys, collections
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and "codelet" in e.get("args", {})]
c = collections.defaultdict(lambda: [0, 0.0])
for e in ev:
    k = (e["args"]["codelet"], e["args"]["worker"]); c[k][0] += 1; c[k][1] += e["dur"] / 1e3
print("    " + "; ".join(f"{k[0]} on worker {k[1]}: {v[0]} tasks {v[1]:.1f} ms" for k, v in sorted(c.items())))
PY
    gzip -f "$O/gpu-$b-r$r.json"
  done
done
tar czf "${OUT:-/tmp}/r58b.tgz" -C /tmp r58b
for r in 1 2; do
  for b in head swap; do one $b "both-$b-r$r"; done
done
tar czf "${OUT:-/tmp}/r58b.tgz" -C /tmp r58b
timeout -k 3 ${GPUSH_BUDGET:-150} bash bench/peers/gpu.sh "$PWD/.gpu/tessera-swap" "$O/gpush" > "$O/gpu.sh.txt" 2>&1
log "gpu.sh rc=$?"
grep -E "^ *(FAIL)|^TS|PASSED|FAILED|% of|CPU-only|SpMV matrix|rror|panick" "$O/gpu.sh.txt" | tee -a "$O/summary.txt"
tar czf "${OUT:-/tmp}/r58b.tgz" -C /tmp r58b
cp "$O/summary.txt" "${OUT:-/tmp}/summary.txt"
log done
