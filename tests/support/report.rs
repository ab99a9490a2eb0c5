//! Reading cptriage's JSON report in tests: the report of a finished command,
//! and a signal's evidence in it.

/// The JSON report a cptriage command printed, or a panic that shows its exit
/// code, stdout and stderr.
pub(crate) fn json_of(out: &std::process::Output, what: &str) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The evidence of `signal` anywhere in the report's axes, if any.
pub(crate) fn find_evidence<'a>(v: &'a serde_json::Value, signal: &str) -> Option<&'a serde_json::Value> {
    v["axes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["evidence"].as_array().into_iter().flatten())
        .find(|e| e["signal"] == signal)
}

/// The evidence of `signal`, which the report must hold.
pub(crate) fn evidence<'a>(v: &'a serde_json::Value, signal: &str) -> &'a serde_json::Value {
    find_evidence(v, signal).unwrap_or_else(|| panic!("no evidence of {signal}"))
}
