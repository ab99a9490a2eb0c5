#!/bin/sh
# Runs fuzz targets one after the other (default: all four, 300 s each), then
# merges what they found into the committed, minimised corpus fuzz/corpus/<target>.
# Usage (from the repository root): fuzz/run.sh [SECONDS] [TARGET...]
# Build first: (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -a)
set -eu
secs=${1:-300}
[ $# -gt 0 ] && shift
targets=${*:-expfmt capture rules kubeconfig}
bin=fuzz/target/x86_64-unknown-linux-gnu/release
for t in $targets; do
    mkdir -p fuzz/corpus-raw/$t fuzz/corpus/$t fuzz/artifacts/$t
    [ -d fuzz/seeds/$t ] && cp -n fuzz/seeds/$t/* fuzz/corpus-raw/$t/ 2>/dev/null || true
    cp -n fuzz/corpus/$t/* fuzz/corpus-raw/$t/ 2>/dev/null || true
    echo "== $t: ${secs}s"
    $bin/$t fuzz/corpus-raw/$t -max_total_time=$secs -rss_limit_mb=2048 -timeout=20 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix=fuzz/artifacts/$t/ \
        2>&1 | tail -n 40 > fuzz/artifacts/$t.log || echo "$t: fuzzer stopped (see fuzz/artifacts/$t.log)"
    grep -E "stat::|SUMMARY|panicked|Test unit written" fuzz/artifacts/$t.log || true
    # Minimise: keep only inputs that add coverage (what `cargo fuzz cmin` does).
    rm -rf fuzz/corpus-min && mkdir -p fuzz/corpus-min
    $bin/$t -merge=1 -rss_limit_mb=2048 -timeout=20 fuzz/corpus-min fuzz/corpus-raw/$t > fuzz/artifacts/$t.merge.log 2>&1
    rm -rf fuzz/corpus/$t && mv fuzz/corpus-min fuzz/corpus/$t
    echo "$t: $(ls fuzz/corpus/$t | wc -l) corpus files, $(du -sk fuzz/corpus/$t | cut -f1) KiB"
done
