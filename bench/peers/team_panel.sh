#!/usr/bin/env bash
# The LU's panel as a team task on this machine, against the one-core panel
# (issue 26's "real multi-core check"): `tessera lu --workers 2` with
# `--panel-team 2` and `--panel-team 1`, alternated round by round, each run
# traced; prints each round's GFLOP/s and the panel's mean time per step
# (from `tessera trace summary`), then the medians and the ratios.
#   bash bench/peers/team_panel.sh [N] [NB] [ROUNDS]
set -euo pipefail
n=${1:-8192}
nb=${2:-448}
rounds=${3:-3}
bin=${TESSERA:-target/release/tessera}
[ -x "$bin" ] || cargo build --release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-5s %10s %14s\n' round team gflops panel_ms
for r in $(seq "$rounds"); do
  for team in 1 2; do
    "$bin" lu --n "$n" --nb "$nb" --workers 2 --panel-team "$team" --trace "$tmp/t.json" >"$tmp/out"
    grep -q PASSED "$tmp/out" || { cat "$tmp/out"; exit 1; }
    g=$(awk '/^WR|^SIM|^T\/V/ {next} $2 == '"$n"' {print $7; exit}' "$tmp/out")
    p=$("$bin" trace summary "$tmp/t.json" | awk '$1 == "panel" {print $5, $6; exit}')
    printf '%-6s %-5s %10s %14s\n' "$r" "$team" "$g" "$p"
    echo "$team $g $p" >>"$tmp/all"
  done
done
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for team in 1 2; do
  echo "team $team: median $(awk -v t=$team '$1==t {print $2}' "$tmp/all" | med) GFLOP/s"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
