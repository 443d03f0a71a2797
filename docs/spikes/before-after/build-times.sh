#!/usr/bin/env bash
# Build times of two checkouts in interleaved rounds: a clean `cargo build`,
# then `cargo test --no-run` on top, then each again after touching one file
# of the web pages. Each checkout builds into a target directory of its own,
# emptied before each clean build.
#
#   bash docs/spikes/before-after/build-times.sh BASELINE_DIR BASELINE_WEB_FILE CURRENT_DIR CURRENT_WEB_FILE [ROUNDS]
#
# e.g. `... /tmp/base src/web/browse.rs . crates/web/src/browse.rs 2`.
# Prints `build=<baseline|current> round=.. step=.. seconds=..` per step
# and the median per build and step.
set -euo pipefail
base_dir=$(cd "$1" && pwd) base_file=$2 cur_dir=$(cd "$3" && pwd) cur_file=$4 rounds=${5:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { # build dir target name round cargo-args...
  local build=$1 dir=$2 target=$3 name=$4 round=$5
  shift 5
  local start end
  start=$(date +%s.%N)
  (cd "$dir" && CARGO_TARGET_DIR=$target cargo "$@" --quiet >/dev/null 2>"$work/err") ||
    { cat "$work/err" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v b="$build" -v r="$round" -v n="$name" -v s="$start" -v e="$end" \
    'BEGIN { printf "build=%s round=%s step=%s seconds=%.1f\n", b, r, n, e - s }' |
    tee -a "$work/results"
}

one() { # build dir file round
  local build=$1 dir=$2 file=$3 round=$4 target=$work/target-$1
  rm -rf "$target"
  step "$build" "$dir" "$target" clean_build "$round" build
  step "$build" "$dir" "$target" test_no_run "$round" test --no-run
  touch "$dir/$file"
  step "$build" "$dir" "$target" touch_build "$round" build
  touch "$dir/$file"
  step "$build" "$dir" "$target" touch_test "$round" test --no-run
}

for round in $(seq 0 $((rounds - 1))); do
  if [ $((round % 2)) -eq 0 ]; then
    one baseline "$base_dir" "$base_file" "$round"
    one current "$cur_dir" "$cur_file" "$round"
  else
    one current "$cur_dir" "$cur_file" "$round"
    one baseline "$base_dir" "$base_file" "$round"
  fi
done

for build in baseline current; do
  for name in clean_build test_no_run touch_build touch_test; do
    grep "build=$build .*step=$name " "$work/results" | sed 's/.*seconds=//' | sort -n |
      awk -v b="$build" -v s="$name" '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "median build=%s step=%s seconds=%.1f runs=%d\n", b, s, m, NR}'
  done
done
