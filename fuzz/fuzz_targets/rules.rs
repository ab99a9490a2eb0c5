//! Fuzz target `rules`: see `cptriage_testkit::fuzzing::rules` and docs/robustness.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cptriage_testkit::fuzzing::rules(data);
});
