#!/bin/sh
# Keeps the committed corpus small (a few hundred files, well under 5 MB in all):
# restricts fuzz/corpus/<target> to its MAX smallest inputs and merges them again,
# so only inputs that still add coverage stay. Usage: fuzz/shrink.sh [MAX] [TARGET...]
set -eu
max=${1:-300}
[ $# -gt 0 ] && shift
targets=${*:-expfmt capture rules kubeconfig}
bin=fuzz/target/x86_64-unknown-linux-gnu/release
for t in $targets; do
    rm -rf fuzz/shrink-sub fuzz/shrink-min && mkdir -p fuzz/shrink-sub fuzz/shrink-min
    ls -S -r fuzz/corpus/$t | head -n "$max" | while read -r f; do cp "fuzz/corpus/$t/$f" fuzz/shrink-sub/; done
    # The seeds (slices of real captures) stay: they hold the realistic shapes.
    [ -d fuzz/seeds/$t ] && cp fuzz/seeds/$t/* fuzz/shrink-sub/
    $bin/$t -merge=1 -rss_limit_mb=2048 -timeout=20 fuzz/shrink-min fuzz/shrink-sub > fuzz/artifacts/$t.shrink.log 2>&1
    rm -rf fuzz/corpus/$t fuzz/shrink-sub && mv fuzz/shrink-min fuzz/corpus/$t
    echo "$t: $(ls fuzz/corpus/$t | wc -l) files, $(du -sk fuzz/corpus/$t | cut -f1) KiB"
done
