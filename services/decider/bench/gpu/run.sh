#!/usr/bin/env bash
# The llama-server benchmark on a GPU machine, from what pack.sh put in services/decider/dist/gpu/:
#
#   build   unpack Node, the decider and llama.cpp; build llama-server with CUDA for the H100 (sm_90)
#   models  write random-weight GGUFs of the Qwen2.5 1.5B and 7B shapes (bench/gpu/shaped-model.ts)
#   bench   for each model: bench:llama-server on --parallel 4 and 16 with 1, 16 and 100 questions,
#           floor against the decider's chat path against the packed decider (and its calls sent directly),
#           with -fa off and --cache-ram 0; a table per model in $OUT, each row in $OUT/<model>.log as it is
#           measured, and every server's and decider's log in $OUT (the throughput block, 8 clients against
#           one, only with BENCH_THROUGHPUT=1)
#   short   one call's worth: build, then the 1.5B model (written while llama-server builds), then its bench
#           with one request per row and way after the warm-up (SHAPES and BENCH_REQUESTS still apply)
#
# Usage: bash services/decider/bench/gpu/run.sh [build] [models] [bench] | short   (no step: all three)
# Each step skips what an earlier call on the same machine already did. Results and logs go to $OUT.
#
# The reduced form, on a CPU (proves the script before a GPU run): GPU_RUN_CPU=1 SHAPES=small
#   BENCH_PARALLEL=4 BENCH_QUESTIONS=1,16 BENCH_REQUESTS=1 [LLAMA_SERVER_BIN=<a built llama-server>] run.sh
# (with LLAMA_SERVER_BIN set, the build step only unpacks; without it, it builds for the CPU: ~10 min on 2 cores);
# or the short call on the 1.5B file (5-9 min on 2 cores): GPU_RUN_CPU=1 BENCH_PARALLEL=4 BENCH_QUESTIONS=16
#   LLAMA_BENCH_FLAGS="--cache-ram 0 -t 2" LLAMA_SERVER_BIN=<a built llama-server> run.sh short
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
decider=$(cd "$here/../.." && pwd)
carried="$decider/dist/gpu"
work=${GPU_WORK:-/tmp/localdecider-gpu}
out=${OUT:-$work/out}
cpu=${GPU_RUN_CPU:-0}
shapes=${SHAPES:-qwen2.5-1.5b qwen2.5-7b}
if [ "$cpu" = 1 ]; then default_flags="--cache-ram 0"; else default_flags="-fa off --cache-ram 0 -ngl 999"; fi
flags=${LLAMA_BENCH_FLAGS:-$default_flags}
mkdir -p "$work" "$out"

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/run.log"; }

unpack() {
  if [ ! -x "$work/node" ]; then
    xz -dc "$carried/node.xz" >"$work/node.tmp" && chmod +x "$work/node.tmp" && mv "$work/node.tmp" "$work/node"
  fi
  if [ ! -d "$work/decider" ]; then xz -dc "$carried/decider.tar.xz" | tar -C "$work" -xf -; fi
  log "node $("$work/node" --version), decider unpacked"
}

server_bin() {
  if [ -n "${LLAMA_SERVER_BIN:-}" ]; then echo "$LLAMA_SERVER_BIN"; else echo "$work/llama.cpp/build/bin/llama-server"; fi
}

build() {
  unpack
  if [ -n "${LLAMA_SERVER_BIN:-}" ]; then
    log "using LLAMA_SERVER_BIN=$LLAMA_SERVER_BIN, nothing to build"
    return
  fi
  if [ -x "$(server_bin)" ]; then
    log "llama-server already built"
    return
  fi
  if [ ! -d "$work/llama.cpp" ]; then xz -dc "$carried/llama.cpp.tar.xz" | tar -C "$work" -xf -; fi
  local backend=()
  if [ "$cpu" != 1 ]; then
    # The H100 only; NCCL absent there. FA kernels (most of the CUDA build) are left out: the bench runs -fa off.
    backend=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF "-DGGML_CUDA_FA=${GGML_CUDA_FA:-OFF}")
  fi
  log "configuring llama.cpp (${backend[*]:-CPU})"
  # No UI: neither built (npm) nor fetched (the machine has no network; the fetch would only fail).
  cmake -S "$work/llama.cpp" -B "$work/llama.cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF "${backend[@]}" >"$out/cmake.log" 2>&1 ||
    { tail -40 "$out/cmake.log"; exit 1; }
  log "building llama-server on $(nproc) cores"
  cmake --build "$work/llama.cpp/build" --target llama-server -j "$(nproc)" >"$out/build.log" 2>&1 ||
    { tail -60 "$out/build.log"; exit 1; }
  log "built $(server_bin)"
}

models() {
  unpack
  mkdir -p "$work/models"
  for shape in $shapes; do
    if [ ! -f "$work/models/$shape.gguf" ]; then
      "$work/node" "$work/decider/dist/.bench/bench/gpu/shaped-model.js" "$shape" "$work/models/$shape.gguf.tmp" |
        tee -a "$out/run.log"
      mv "$work/models/$shape.gguf.tmp" "$work/models/$shape.gguf"
    fi
  done
  df -h "$work" | tail -1 | tee -a "$out/run.log"
}

bench() {
  unpack
  if [ "$cpu" != 1 ]; then nvidia-smi >"$out/gpu.txt" 2>&1 || true; fi
  "$(server_bin)" --version >"$out/server-version.txt" 2>&1 || true
  for shape in $shapes; do
    log "bench $shape (flags: $flags)"
    # The bench prints each row to stderr as it is measured, the whole table to stdout at the end.
    (cd "$work/decider" &&
      LLAMA_SERVER_BIN="$(server_bin)" LLAMA_BENCH_MODEL="$work/models/$shape.gguf" LLAMA_BENCH_FLAGS="$flags" \
        BENCH_PARALLEL="${BENCH_PARALLEL:-4,16}" BENCH_QUESTIONS="${BENCH_QUESTIONS:-1,16,100}" \
        BENCH_REQUESTS="${BENCH_REQUESTS:-3}" BENCH_READY_S=300 BENCH_LOG_DIR="$out" \
        BENCH_THROUGHPUT="${BENCH_THROUGHPUT:-0}" \
        "$work/node" dist/.bench/bench/llama-server.bench.js >"$out/$shape.md" 2>"$out/$shape.log") ||
      { log "bench $shape failed"; tail -30 "$out/$shape.log"; exit 1; }
    cat "$out/$shape.md"
  done
  log "done"
}

short() {
  shapes=${SHAPES:-qwen2.5-1.5b}
  export BENCH_REQUESTS=${BENCH_REQUESTS:-1}
  unpack
  # The model writer is disk-bound, the build CPU-bound: the model is written while llama-server builds.
  models >"$out/models.log" 2>&1 &
  local writer=$!
  build
  wait "$writer" || { log "writing the models failed"; cat "$out/models.log"; exit 1; }
  cat "$out/models.log"
  bench
}

steps=("$@")
if [ ${#steps[@]} -eq 0 ]; then steps=(build models bench); fi
for step in "${steps[@]}"; do
  case "$step" in
    build | models | bench | short) "$step" ;;
    *)
      echo "unknown step $step (build, models, bench, short)" >&2
      exit 2
      ;;
  esac
done
