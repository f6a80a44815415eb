#!/usr/bin/env bash
# Stop 57, run 4: Task Bench on the 16-core host of the H200 node (no GPU
# used): tessera (STF and symbolic, 16 workers) against Task Bench's OpenMP
# driver (16 threads), built there from the same source, by
# bench/peers/taskbench.sh itself. No MPI on that machine.
set -u
O=/tmp/r57d
rm -rf "$O"; mkdir -p "$O"
{ nproc; grep -m1 "model name" /proc/cpuinfo; command -v g++ make; g++ --version | head -1; } > "$O/host.txt" 2>&1
cat "$O/host.txt"
S="tessera tessera-sym openmp"
command -v g++ > /dev/null && command -v make > /dev/null || S="tessera tessera-sym"
TESSERA_BIN=$PWD/.gpu/tessera-fix SYSTEMS="$S" ROUNDS=${ROUNDS:-2} RUN_TIMEOUT=60 \
  TASKBENCH_DIR=$PWD/.gpu/tbsrc TASKBENCH_BUILD=/tmp/tbbuild \
  timeout -k 5 ${BUDGET:-330} bash bench/peers/taskbench.sh > "$O/taskbench.txt" 2>&1
echo "rc=$?" >> "$O/taskbench.txt"
tar czf "${OUT:-/tmp}/r57d.tgz" -C /tmp r57d
sed -n '/METG50 in us/,$p' "$O/taskbench.txt"
tail -3 "$O/taskbench.txt"
