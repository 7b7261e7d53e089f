#!/usr/bin/env bash
# Builds the plan fuzzer with clang under ASan+UBSan and runs it on a seed corpus made of
# the engine's test plans (valid and malformed) and the inputs in engine/fuzz/regressions.
#
# Usage: engine/fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR]    (defaults: 60, build/engine-fuzz)
# Extra libFuzzer flags can be passed in EMBER_FUZZ_FLAGS.
set -euo pipefail

seconds="${1:-60}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${2:-${repo}/build/engine-fuzz}"
# Absolute, because the fuzzer runs from inside the build folder.
mkdir -p "${build}" && build="$(cd "${build}" && pwd)"
jobs="${EMBER_FUZZ_BUILD_JOBS:-2}"

cmake -S "${repo}/engine" -B "${build}" -DCMAKE_C_COMPILER=clang \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_FUZZ=ON -DEMBER_ENGINE_TESTS=OFF \
  -DEMBER_SANITIZE=address,undefined >/dev/null
cmake --build "${build}" --target ember_plan_fuzzer -j "${jobs}"

seeds="${build}/seeds"
corpus="${build}/corpus"
rm -rf "${seeds}"
python3 "${repo}/engine/tests/make_test_plans.py" "${repo}/python/ember/plan_writer.py" \
  "${seeds}/data" >/dev/null
mkdir -p "${seeds}/plans" "${corpus}"
cp "${seeds}"/data/valid/*.plan "${seeds}"/data/malformed/*.plan "${seeds}/plans/"
# Inputs the fuzzer once found a problem with, so that every run tries them again.
cp "${repo}"/engine/fuzz/regressions/*.plan "${seeds}/plans/"

# allocator_may_return_null: a huge allocation is an error the engine returns, not a crash.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
cd "${build}"
# shellcheck disable=SC2086
"${build}/fuzz/ember_plan_fuzzer" "${corpus}" "${seeds}/plans" \
  -max_total_time="${seconds}" -max_len=16384 -timeout=25 -rss_limit_mb=2048 \
  -print_final_stats=1 ${EMBER_FUZZ_FLAGS:-}
