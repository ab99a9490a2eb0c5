//! Fuzz target `capture`: see `cptriage_testkit::fuzzing::capture` and docs/robustness.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cptriage_testkit::fuzzing::capture(data);
});
