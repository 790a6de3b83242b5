#!/usr/bin/env bash
# Runs one fuzz target for SECONDS (default 300) on one core; the corpus grows in Tests/Fuzz/out/corpus/TARGET and
# crash/timeout/OOM inputs land in Tests/Fuzz/out/crashes/TARGET/. Builds the target and the seeds if missing.
# Usage: Tests/Fuzz/run.sh TARGET [SECONDS] [extra libFuzzer flags...]
#        Tests/Fuzz/run.sh TARGET 0 path/to/crash-input      (replay one input)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:?usage: run.sh TARGET [SECONDS] [libFuzzer flags]}
seconds=${2:-300}
shift $(( $# >= 2 ? 2 : 1 ))
F=Tests/Fuzz
bin=$F/out/bin/fuzz-$target
[ -x "$bin" ] || $F/build.sh "$target"
[ -d $F/out/seeds/$target ] || python3 $F/make_seeds.py
case $target in
    http) max_len=4096; dict=http ;;
    v2) max_len=8192; dict=json ;;
    grpc) max_len=8192; dict= ;;
    multipart|classify) max_len=8192; dict=multipart ;;
    onnx) max_len=65536; dict=onnx ;;
    engine) max_len=16384; dict=onnx ;;
    imaging) max_len=65536; dict= ;;
    *) echo "unknown target $target" >&2; exit 2 ;;
esac
mkdir -p $F/out/corpus/$target $F/out/crashes/$target
# Swift's backtracer would catch the crash signal and hang; leaks are not crashes (caches live for the process).
export SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 OPENBLAS_NUM_THREADS=1
flags=(-max_len=$max_len -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=2048 -detect_leaks=0 -print_final_stats=1
       -artifact_prefix=$F/out/crashes/$target/)
[ -n "$dict" ] && flags+=(-dict=$F/dict/$dict.dict)
if [ "$seconds" = 0 ]; then
    exec "$bin" "${flags[@]}" "$@"
fi
exec "$bin" "${flags[@]}" -max_total_time="$seconds" "$@" $F/out/corpus/$target $F/out/seeds/$target
