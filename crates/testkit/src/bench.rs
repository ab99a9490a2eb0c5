//! What the benchmark commands share (`bench-fleet`, `bench-serve`):
//! scenarios stretched to a benchmark's length, and one timed run of
//! cptriage with its peak RSS.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use cptriage::rules::load::RuleSet;
use cptriage::source::ingest::Keep;
use cptriage::source::Dataset;
use cptriage::timefmt::{format_duration, parse_duration};

use crate::{repo_root, scenario};

/// A scenario generated for a benchmark, with its expected verdict.
pub struct Generated {
    pub ds: Dataset,
    pub status: String,
    /// `axis` or `axis/sub`.
    pub axis: Option<String>,
}

/// Scenario `name` stretched to `duration` ms, with three apiservers, its
/// effects moved `shift` ms later; starting at `start` (unix ms) instead of
/// the spec's own start when given.
pub fn stretched(
    name: &str,
    duration: i64,
    shift: i64,
    start: Option<i64>,
    rules: &RuleSet,
) -> anyhow::Result<Generated> {
    let dir = repo_root().join("testdata/scenarios");
    let path = dir.join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let mut v: serde_yaml::Value = serde_yaml::from_str(&text)?;
    let m = v.as_mapping_mut().context("spec is a mapping")?;
    m.insert("duration".into(), format_duration(duration).into());
    if let Some(start) = start {
        m.insert("start".into(), rfc3339(start).into());
    }
    if let Some(serde_yaml::Value::Sequence(targets)) = m.get_mut("targets") {
        let api = targets
            .iter()
            .find(|t| t["name"].as_str() == Some("apiserver-0"))
            .cloned()
            .context("apiserver-0")?;
        for i in 1..3 {
            let mut t = api.clone();
            t["name"] = format!("apiserver-{i}").into();
            targets.push(t);
        }
    }
    if let Some(serde_yaml::Value::Sequence(effects)) = m.get_mut("effects") {
        for e in effects.iter_mut() {
            for k in ["at", "until"] {
                if let Some(d) = e[k].as_str() {
                    let t = parse_duration(d).map_err(|e| anyhow::anyhow!("{name}: {k}: {e}"))?;
                    e[k] = format_duration(t + shift).into();
                }
            }
        }
    }
    if let Some(exp) = m.get_mut("expect") {
        if let Some(d) = exp["root_cause_onset"].as_str() {
            let t = parse_duration(d).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            exp["root_cause_onset"] = format_duration(t + shift).into();
        }
    }
    let spec = scenario::parse_spec(&serde_yaml::to_string(&v)?, name, Some(&dir))?;
    let exp = spec.spec.expect.clone().context("expect block")?;
    let ds = scenario::dataset(spec, name, &Keep::Names(rules.referenced_metrics()))?;
    Ok(Generated {
        ds,
        status: exp.status.clone(),
        axis: exp.axis.as_ref().map(|a| match &exp.sub_axis {
            Some(s) => format!("{a}/{s}"),
            None => a.clone(),
        }),
    })
}

/// One run of cptriage: wall time, peak RSS (MiB), exit code, stdout, stderr.
pub struct Run {
    pub wall: Duration,
    pub rss_mib: f64,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

pub fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

pub fn run(bin: &Path, args: &[String]) -> anyhow::Result<Run> {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let pid = child.id();
    let mut out = child.stdout.take().context("stdout")?;
    let mut err = child.stderr.take().context("stderr")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let ereader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let mut peak = 0;
    let status = loop {
        if let Some(k) = vm_hwm_kib(pid) {
            peak = peak.max(k);
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Run {
        wall: t.elapsed(),
        rss_mib: peak as f64 / 1024.0,
        code: status.code(),
        stdout: reader.join().unwrap_or_default(),
        stderr: ereader.join().unwrap_or_default(),
    })
}

/// `ms` as RFC 3339, whole seconds, UTC.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// The role selectors of data the generators wrote (`role` label on every
/// series), as cptriage's flags: `--apiserver-selector …` and the others.
pub const ROLE_SELECTORS: [&str; 6] = [
    "--apiserver-selector",
    r#"{role="apiserver"}"#,
    "--etcd-selector",
    r#"{role="etcd"}"#,
    "--controller-selector",
    r#"{role="controller"}"#,
];

/// The cptriage binary a benchmark runs: `explicit`, or `cptriage` beside
/// the benchmark; fails when it or the Prometheus binaries are missing.
pub fn cptriage_binary(explicit: Option<&Path>) -> anyhow::Result<std::path::PathBuf> {
    if !crate::promrun::available() {
        anyhow::bail!("needs /usr/bin/prometheus and /usr/bin/promtool (Debian package prometheus)");
    }
    let bin = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("cptriage"),
    };
    if !bin.exists() {
        anyhow::bail!("{}: not found (cargo build --release)", bin.display());
    }
    Ok(bin)
}

/// Status and root cause (`axis` or `axis/sub`) of a `cptriage/verdict/v1` document.
pub fn verdict(v: &serde_json::Value) -> (String, Option<String>) {
    let rc = &v["root_cause"];
    (
        v["status"].as_str().unwrap_or_default().to_string(),
        rc["axis"].as_str().map(|a| match rc["sub_axis"].as_str() {
            Some(s) => format!("{a}/{s}"),
            None => a.to_string(),
        }),
    )
}
