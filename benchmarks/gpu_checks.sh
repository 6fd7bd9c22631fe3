#!/bin/bash
# The GPU checks still open (BENCHMARKS.md "Length buckets", "GPU path"), sized for a short lease.
#
#   bash benchmarks/gpu_checks.sh prepare   # here, once: the dataset and the wheels the GPU
#                                           # machine lacks, in .gpu/ and .whl/ (git-ignored)
#   bash benchmarks/gpu_checks.sh run       # there (carry .gpu and .whl); results in $OUT
#
# The GPU machine has torch, h5py, numpy, pyyaml and rich but not pydantic, platformdirs or
# orjson (carried as wheels), and no ../shared/data (the seven real files are preprocessed here:
# 17 MB). Every training run is --speed-only (no after-training fits: they cost ≈ 35 CPU-s a run
# at 27 k rows, more than the GPU epochs), so a run takes ≈ 25 s; the whole run ≈ 6 minutes.
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
case "${1:-}" in
prepare)
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || printf '/.gpu/\n/.whl/\n' >>.git/info/exclude
    rm -rf .gpu/data
    .venv/bin/python -c "import sys; sys.path.insert(0, 'benchmarks')
from pathlib import Path
from bench_length_buckets import preprocess
preprocess(Path('.gpu/data'), False)" || exit 1
    pins=$(.venv/bin/python -m pip freeze | grep -iE '^(pydantic|pydantic[-_]core|annotated[-_]types|typing[-_]inspection|typing[-_]extensions|platformdirs|orjson)==')
    # shellcheck disable=SC2086
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl $pins || exit 1
    du -sh .gpu .whl
    ;;
run)
    # a dry run here: DEVICE=cpu ROWS=3000 PY=.venv/bin/python bash benchmarks/gpu_checks.sh run
    OUT=${OUT:-/tmp/gpu-checks} DEVICE=${DEVICE:-cuda} ROWS=${ROWS:-100000} PY=${PY:-python3}
    mkdir -p "$OUT"
    export PYTHONUNBUFFERED=1
    if [ "$DEVICE" = cuda ]; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl || exit 1
        export PYTHONPATH=/tmp/site
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    fi
    bench() { # NAME SECONDS SCRIPT ARGS...: one benchmark, its output kept in $OUT/NAME.log
        local name=$1 limit=$2
        shift 2
        timeout "$limit" $PY "$@" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log"
    }
    lb=(benchmarks/bench_length_buckets.py --data .gpu/data --device "$DEVICE" --max-train-samples
        "$ROWS" --speed-only --repeat 2)
    bench buckets_b256 150 "${lb[@]}" --epochs 3
    bench buckets_b2048 150 "${lb[@]}" --epochs 6 --batch-size 2048
    bench rank_malloc 120 benchmarks/bench_rank_malloc.py --data .gpu/data --device "$DEVICE" \
        --max-train-samples "$ROWS" --speed-only --repeat 1 --epochs 2
    ;;
*)
    echo "usage: bash benchmarks/gpu_checks.sh prepare|run" >&2
    exit 2
    ;;
esac
