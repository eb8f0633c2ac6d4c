#!/bin/bash
# Two checkouts' fleet figures side by side, interleaved: for each round, the baseline's
# `python -m bench fleet ARGS` then the candidate's, each saved to OUT/{base,new}-ROUND.
# Usage: bash bench/pair.sh BASE_CHECKOUT NEW_CHECKOUT ROUNDS OUT [fleet args...]
# (each checkout needs .venv and .services: a worktree with links to the main checkout's).
set -euo pipefail
base=$1 new=$2 rounds=$3 out=$4
shift 4
set -a; . "$new/.services/env"; set +a
for ((r = 1; r <= rounds; r++)); do
  for side in base new; do
    dir=$base; [ "$side" = new ] && dir=$new
    mkdir -p "$out/$side-$r"
    (cd "$dir" && .venv/bin/python -m bench fleet "$@" --save-to "$out/$side-$r") \
      > "$out/$side-$r.log" 2>&1
    echo "$side $r done $(date -u +%T)"
  done
done
