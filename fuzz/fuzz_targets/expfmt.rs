//! Fuzz target `expfmt`: see `cptriage::fuzzing::expfmt` and docs/robustness.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cptriage::fuzzing::expfmt(data);
});
