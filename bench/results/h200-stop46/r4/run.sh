#!/usr/bin/env bash
# Stop 46, run 4: the final code (805e387's tree) through bench/peers/gpu.sh,
# whose Cashmere step now runs tile tasks; its LU step is the resident LU.
set -u
O=/tmp/r4
mkdir -p "$O"
timeout -k 3 ${BUDGET:-170} bash bench/peers/gpu.sh "$PWD/.gpu/tessera-new" "$O/gpush" > "$O/gpu.sh.txt" 2>&1
echo "rc=$?" >> "$O/gpu.sh.txt"
tar czf "${OUT:-/tmp}/r4.tgz" -C /tmp r4
grep -E "^TS|PASSED|FAILED|% of|CPU-only|SpMV matrix|rc=|rror" "$O/gpu.sh.txt"
