//! A large control plane for benchmarks: one hour (by default) of 3 apiservers
//! and 3 etcd members at 15 s, each apiserver exposing a real 1.35 `/metrics`
//! whose per-resource label space is multiplied (a cluster with many more
//! resources, as CRD-heavy clusters have), written as a gzip capture directory.
//!
//! Built on the scenario generator: the enlarged capture becomes the base of a
//! spec whose background traffic moves every series of the request, etcd-request,
//! watch and size families (so counters and histograms grow monotonically and
//! rates are real), with an etcd disk fault on `etcd-0` two thirds of the way in.
//! Output is a pure function of the options and the base captures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::gen::{GenOptions, Scenario};
use super::{io_err, parse_spec, ScenarioError};
use cptriage::source::capture::write::CaptureWriter;

/// The real apiserver capture the apiservers start from.
pub const APISERVER_BASE: &str = "apiserver_nri_v1.35.0.prom";
/// The real etcd capture the members start from.
pub const ETCD_BASE: &str = "etcd_nri_v3.6.6_k8s1.35.prom";

/// What to generate.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Directory holding [`APISERVER_BASE`] and [`ETCD_BASE`].
    pub realdata: PathBuf,
    /// Copies of every per-resource series (1 = the capture as it is).
    pub resources: usize,
    /// Length of the capture in seconds (a multiple of `interval_s`).
    pub duration_s: u64,
    /// Seconds between snapshots.
    pub interval_s: u64,
    pub apiservers: usize,
    pub etcd_members: usize,
    /// Worker threads (the files do not depend on it).
    pub threads: usize,
    /// Gzip level 0–9 (1 = fastest).
    pub gzip_level: u32,
}

impl Default for ScaleOptions {
    fn default() -> Self {
        ScaleOptions {
            realdata: crate::realdata_dir(),
            resources: 8,
            duration_s: 3600,
            interval_s: 15,
            apiservers: 3,
            etcd_members: 3,
            threads: 2,
            gzip_level: 1,
        }
    }
}

/// What a generation wrote.
#[derive(Clone, Debug, Default)]
pub struct ScaleSummary {
    pub files: usize,
    /// Bytes on disk (gzip).
    pub compressed_bytes: u64,
    /// Bytes of exposition text before compression.
    pub raw_bytes: u64,
    /// Size of one apiserver snapshot (the enlarged base).
    pub apiserver_snapshot_bytes: u64,
}

/// Finds the value of label `name` in a sample line: `(start, end)` byte offsets
/// of the value between its quotes.
fn label_value(line: &str, name: &str) -> Option<(usize, usize)> {
    let open = line.find('{')?;
    let bytes = line.as_bytes();
    let mut i = open + 1;
    while i < bytes.len() && bytes[i] != b'}' {
        let eq = i + line[i..].find("=\"")?;
        let key = &line[i..eq];
        let vstart = eq + 2;
        let mut j = vstart;
        while j < bytes.len() && bytes[j] != b'"' {
            j += if bytes[j] == b'\\' { 2 } else { 1 };
        }
        if j >= bytes.len() {
            return None;
        }
        if key == name {
            return Some((vstart, j));
        }
        i = j + 1;
        if i < bytes.len() && bytes[i] == b',' {
            i += 1;
        }
    }
    None
}

/// The metric family a comment line (`# HELP x …`, `# TYPE x …`) introduces.
fn comment_family(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("# HELP ")
        .or_else(|| line.strip_prefix("# TYPE "))?;
    rest.split(' ').next()
}

/// Multiplies the per-resource label space of an exposition: after each family,
/// its series with a non-empty `resource` label are repeated `copies - 1` times
/// with the resource renamed `NAME-sK` (K = 1…). Series keep their values, each
/// histogram's lines stay together, and every other line is kept as it was.
pub fn scale_exposition(text: &str, copies: usize) -> String {
    let mut out = String::with_capacity(text.len() * copies.max(1));
    let mut family: Option<&str> = None;
    let mut repeat: Vec<&str> = Vec::new();
    let flush = |out: &mut String, repeat: &mut Vec<&str>| {
        for k in 1..copies {
            for line in repeat.iter() {
                if let Some((s, e)) = label_value(line, "resource") {
                    let _ = writeln!(out, "{}{}-s{k}{}", &line[..s], &line[s..e], &line[e..]);
                }
            }
        }
        repeat.clear();
    };
    for line in text.lines() {
        if let Some(f) = comment_family(line) {
            if family != Some(f) {
                flush(&mut out, &mut repeat);
                family = Some(f);
            }
        } else if !line.starts_with('#') && label_value(line, "resource").is_some_and(|(s, e)| e > s) {
            repeat.push(line);
        }
        out.push_str(line);
        out.push('\n');
    }
    flush(&mut out, &mut repeat);
    out
}

/// The scenario spec of the capture, with the bases at the given paths.
pub fn spec_text(opts: &ScaleOptions, apiserver_base: &Path, etcd_base: &Path) -> String {
    let mut s = String::new();
    let minutes = opts.duration_s / 60;
    let fault = opts.duration_s * 2 / 3 / opts.interval_s.max(1) * opts.interval_s.max(1);
    let _ = writeln!(
        s,
        "name: scale-{}x{}-{minutes}m\n\
         description: large control plane benchmark input (resources x{})\n\
         start: 2026-01-01T00:00:00Z\n\
         interval: {}s\n\
         duration: {}s\n\
         gzip: true\n\
         targets:",
        opts.apiservers, opts.etcd_members, opts.resources, opts.interval_s, opts.duration_s
    );
    for i in 0..opts.apiservers {
        let _ = writeln!(
            s,
            "  - {{name: apiserver-{i}, role: apiserver, base: \"{}\"}}",
            apiserver_base.display()
        );
    }
    for i in 0..opts.etcd_members {
        let _ = writeln!(
            s,
            "  - {{name: etcd-{i}, role: etcd, base: \"{}\"}}",
            etcd_base.display()
        );
    }
    // Background traffic, spread over every series of each family in proportion
    // to its captured value, so every per-resource series keeps moving.
    s.push_str(
        "background:
  - {target: apiserver-*, counter: apiserver_request_total, rate: 400}
  - {target: apiserver-*, histogram: apiserver_request_duration_seconds, rate: 400, observe: 0.03}
  - {target: apiserver-*, histogram: apiserver_request_sli_duration_seconds, rate: 400, observe: 0.02}
  - {target: apiserver-*, histogram: apiserver_response_sizes, rate: 300, observe: 3000}
  - {target: apiserver-*, histogram: apiserver_request_body_size_bytes, rate: 50, observe: 2000}
  - {target: apiserver-*, histogram: etcd_request_duration_seconds, rate: 300, observe: 0.004}
  - {target: apiserver-*, counter: etcd_requests_total, rate: 300}
  - {target: apiserver-*, histogram: apiserver_watch_cache_read_wait_seconds, rate: 100, observe: 0.001}
  - {target: apiserver-*, counter: apiserver_watch_events_total, rate: 200}
  - {target: apiserver-*, histogram: apiserver_watch_events_sizes, rate: 200, observe: 1500}
  - {target: apiserver-*, counter: authentication_attempts, match: {result: success}, rate: 400}
  - {target: apiserver-*, counter: authorization_attempts_total, match: {result: allowed}, rate: 400}
  - {target: apiserver-*, counter: apiserver_flowcontrol_dispatched_requests_total, rate: 400}
  - {target: etcd-*, histogram: etcd_disk_wal_fsync_duration_seconds, rate: 20, observe: 0.004}
  - {target: etcd-*, histogram: etcd_disk_backend_commit_duration_seconds, rate: 10, observe: 0.008}
  - {target: etcd-*, counter: grpc_server_handled_total, match: {grpc_code: OK, grpc_method: Range}, rate: 100}
  - {target: etcd-*, counter: grpc_server_handled_total, match: {grpc_code: OK, grpc_method: Txn}, rate: 30}
  - {target: etcd-*, gauge: etcd_debugging_mvcc_current_revision, rate: 30}
",
    );
    for i in 1..opts.etcd_members {
        let _ = writeln!(
            s,
            "  - {{target: etcd-{i}, gauge: etcd_server_is_leader, value: 0}}"
        );
    }
    // The fault: etcd-0's disk slows down; apiservers see slow lease updates.
    let _ = write!(
        s,
        "effects:
  - {{at: {fault}s, target: etcd-0, histogram: etcd_disk_wal_fsync_duration_seconds, rate: 20, observe: 0.8, replace_background: true}}
  - {{at: {fault}s, target: etcd-0, histogram: etcd_disk_backend_commit_duration_seconds, rate: 10, observe: 0.5, replace_background: true}}
  - {{at: {fault}s, target: apiserver-*, histogram: etcd_request_duration_seconds, match: {{operation: update, resource: leases}}, rate: 4, observe: 1.5}}
expect:
  status: degraded
  axis: etcd
  sub_axis: disk
  root_cause_onset: {fault}s
  instances: [etcd-0]
"
    );
    s
}

/// Writes the capture into `out`, which must not exist or be empty. Each
/// snapshot is streamed through gzip into its file; memory holds one rendered
/// snapshot per thread. The enlarged base is written to a scratch directory
/// beside `out` and removed afterwards.
pub fn generate(opts: &ScaleOptions, out: &Path) -> Result<ScaleSummary, ScenarioError> {
    super::refuse_non_empty(out)?;
    if opts.resources == 0 || opts.interval_s == 0 || !opts.duration_s.is_multiple_of(opts.interval_s) {
        return Err(ScenarioError::Output {
            path: out.display().to_string(),
            message: "resources and interval must be positive, duration a multiple of interval".into(),
        });
    }
    let dirs = GenOptions {
        base_dirs: vec![opts.realdata.clone()],
    };
    let find = |name: &str| {
        super::gen::BaseCache::resolve(name, None, &dirs).map_err(|message| ScenarioError::Output {
            path: opts.realdata.display().to_string(),
            message,
        })
    };
    let api_src = find(APISERVER_BASE)?;
    let etcd_src = find(ETCD_BASE)?;
    let raw = cptriage::source::ingest::read_maybe_gzip(&api_src).map_err(|e| ScenarioError::Output {
        path: api_src.display().to_string(),
        message: e.to_string(),
    })?;
    let text = String::from_utf8(raw).map_err(|_| ScenarioError::Output {
        path: api_src.display().to_string(),
        message: "not UTF-8 text".into(),
    })?;
    let scaled = scale_exposition(&text, opts.resources);
    let scratch = {
        let mut name = out.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".base");
        out.with_file_name(name)
    };
    std::fs::create_dir_all(&scratch).map_err(io_err(&scratch))?;
    let result = (|| {
        let api_base =
            std::path::absolute(scratch.join(format!("scaled-x{}-{APISERVER_BASE}", opts.resources)))
                .map_err(io_err(&scratch))?;
        std::fs::write(&api_base, &scaled).map_err(io_err(&api_base))?;
        let etcd_base = std::path::absolute(&etcd_src).map_err(io_err(&etcd_src))?;
        let spec = parse_spec(&spec_text(opts, &api_base, &etcd_base), "scale spec", None)?;
        let mut summary = write_capture(spec, opts, out)?;
        summary.apiserver_snapshot_bytes = scaled.len() as u64;
        Ok(summary)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn write_capture(
    spec: super::Validated,
    opts: &ScaleOptions,
    out: &Path,
) -> Result<ScaleSummary, ScenarioError> {
    let gen_opts = GenOptions {
        base_dirs: vec![opts.realdata.clone()],
    };
    let mut sc = Scenario::build(spec, &gen_opts)?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let writer = CaptureWriter::new(out, Some(flate2::Compression::new(opts.gzip_level.min(9))));
    writer.create_targets(sc.targets.iter().map(|t| t.name.as_str()))?;
    let names: Vec<String> = sc.targets.iter().map(|t| t.name.clone()).collect();
    let files = AtomicUsize::new(0);
    let compressed = AtomicU64::new(0);
    let raw = AtomicU64::new(0);
    sc.run(opts.threads, |s| {
        let len = writer.write_snapshot(&names[s.target], s.time, s.bytes)?;
        files.fetch_add(1, Ordering::Relaxed);
        compressed.fetch_add(len, Ordering::Relaxed);
        raw.fetch_add(s.bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    })?;
    sc.write_manifest(out)?;
    Ok(ScaleSummary {
        files: files.into_inner(),
        compressed_bytes: compressed.into_inner(),
        raw_bytes: raw.into_inner(),
        apiserver_snapshot_bytes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_value_finds_quoted_values() {
        let l = r#"x{a="1",resource="pods",le="0.5"} 3"#;
        let (s, e) = label_value(l, "resource").unwrap();
        assert_eq!(&l[s..e], "pods");
        // An escaped quote inside an earlier value does not end it.
        let l = r#"x{a="q\",resource=\"}",resource="",b="2"} 1"#;
        let (s, e) = label_value(l, "resource").unwrap();
        assert_eq!((s, &l[s - 10..e + 1]), (e, r#"resource="""#));
        assert_eq!(label_value(l, "b").map(|(s, e)| &l[s..e]), Some("2"));
        assert_eq!(label_value("x 1", "resource"), None);
    }

    #[test]
    fn scale_repeats_resource_series_after_their_family() {
        let text = "# HELP a A\n# TYPE a counter\na{resource=\"pods\"} 1\na{resource=\"\"} 2\n\
                    # HELP b B\n# TYPE b gauge\nb 3\n";
        let got = scale_exposition(text, 3);
        assert_eq!(
            got,
            "# HELP a A\n# TYPE a counter\na{resource=\"pods\"} 1\na{resource=\"\"} 2\n\
             a{resource=\"pods-s1\"} 1\na{resource=\"pods-s2\"} 1\n\
             # HELP b B\n# TYPE b gauge\nb 3\n"
        );
        assert_eq!(scale_exposition(text, 1), text);
    }
}
