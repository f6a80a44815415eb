# Sourced by the peer scripts: HPL from Debian's hpcc.
#   hpl_gflops WORKDIR N NB P Q   -> prints HPL's GFLOP/s (nothing if it failed)
# Runs `hpcc` (the whole HPC Challenge suite, of which HPL is the first part)
# under "${MPIRUN[@]}" (set by the caller, with -np P·Q) in WORKDIR, with one
# thread per rank, from the example input with N, NB, P and Q replaced.
hpl_gflops() {
  local work=$1 n=$2 nb=$3 p=$4 q=$5
  sed -e "s/^1000 .*Ns/$n         Ns/" -e "s/^80 .*NBs/$nb           NBs/" \
      -e "s/^2 .*Ps$/$p            Ps/" -e "s/^2 .*Qs$/$q            Qs/" \
      /usr/share/doc/hpcc/examples/_hpccinf.txt > "$work/hpccinf.txt"
  rm -f "$work/hpccoutf.txt"
  (cd "$work" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "${MPIRUN[@]}" hpcc >/dev/null 2>&1) || true
  awk -F= '/^HPL_Tflops=/ {printf "%.2f", $2 * 1000}' "$work/hpccoutf.txt" 2>/dev/null || true
}
