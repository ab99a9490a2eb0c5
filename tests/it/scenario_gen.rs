//! The scenario generator, checked from the outside: every shipped spec is
//! generated into a temporary directory and the files are read back and compared
//! with the real base captures and with each other, with a parser of its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use cptriage_testkit::scenario::spec::glob_match;
use cptriage_testkit::scenario::{self, GenOptions, Manifest, PromDuration};

const SCENARIOS: &str = "testdata/scenarios";

// ---------------------------------------------------------------------------
// A small, independent reader for the generated files.

/// Key (everything before the value) and value of a sample line.
fn split_sample(line: &str) -> Option<(&str, f64)> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (k, v) = line.rsplit_once(' ')?;
    let v = match v {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    Some((k, v))
}

/// Metric name and labels of a sample key.
fn parse_key(key: &str) -> (String, Vec<(String, String)>) {
    let Some((name, rest)) = key.split_once('{') else {
        return (key.to_string(), Vec::new());
    };
    let body = rest.strip_suffix('}').unwrap_or(rest);
    let mut labels = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        let mut n = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            n.push(c);
        }
        if n.is_empty() {
            break;
        }
        assert_eq!(chars.next(), Some('"'), "label {n} in {key}");
        let mut v = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => v.push('\n'),
                    Some(o) => v.push(o),
                    None => break,
                },
                '"' => break,
                c => v.push(c),
            }
        }
        labels.push((n.trim_start_matches(',').to_string(), v));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    (name.to_string(), labels)
}

#[derive(Debug)]
enum Change {
    Value { key: String, old: f64, new: f64 },
    Inserted { line: String },
}

fn line_at(b: &[u8], start: usize) -> (&str, usize) {
    let end = b[start..]
        .iter()
        .position(|&c| c == b'\n')
        .map(|p| start + p)
        .unwrap_or(b.len());
    let next = (end + 1).min(b.len());
    (std::str::from_utf8(&b[start..end]).expect("utf-8 line"), next)
}

fn key_of_line(line: &str) -> &str {
    split_sample(line).map(|(k, _)| k).unwrap_or(line)
}

/// Line-level differences from `prev` to `cur`: value changes of the same
/// series, and lines present only in `cur`. Panics if `cur` lost a line.
fn diff(prev: &[u8], cur: &[u8]) -> Vec<Change> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    loop {
        // `i` and `j` are at line starts here.
        let (i0, j0) = (i, j);
        // Skip the common run quickly: slice equality is a memcmp, so narrow
        // down with shrinking chunks instead of comparing byte by byte.
        let mut d = 0usize;
        let n = (prev.len() - i).min(cur.len() - j);
        for chunk in [4096usize, 256, 16, 1] {
            while d + chunk <= n && prev[i + d..i + d + chunk] == cur[j + d..j + d + chunk] {
                d += chunk;
            }
        }
        if i + d == prev.len() && j + d == cur.len() {
            return out;
        }
        // Back up to the start of the line where they differ.
        let p = i + d;
        let ls = prev[i0..p]
            .iter()
            .rposition(|&c| c == b'\n')
            .map(|x| i0 + x + 1)
            .unwrap_or(i0);
        i = ls;
        j = j0 + (ls - i0);
        if i >= prev.len() {
            let (l, nj) = line_at(cur, j);
            out.push(Change::Inserted { line: l.to_string() });
            j = nj;
            continue;
        }
        assert!(
            j < cur.len(),
            "a line of the previous snapshot disappeared at byte {i}"
        );
        let (lp, ni) = line_at(prev, i);
        let (lc, nj) = line_at(cur, j);
        if key_of_line(lp) == key_of_line(lc) {
            let (k, old) =
                split_sample(lp).unwrap_or_else(|| panic!("comment line changed: {lp:?} -> {lc:?}"));
            let (_, new) = split_sample(lc).unwrap_or_else(|| panic!("bad line {lc:?}"));
            out.push(Change::Value {
                key: k.to_string(),
                old,
                new,
            });
            i = ni;
        } else {
            out.push(Change::Inserted { line: lc.to_string() });
        }
        j = nj;
    }
}

// ---------------------------------------------------------------------------
// What a spec says, read with serde_yaml directly (not through the library).

#[derive(Default)]
struct SpecFacts {
    start_ms: i64,
    interval_ms: i64,
    duration_ms: i64,
    gzip: bool,
    targets: Vec<(String, String, String)>,
    /// (target glob, family, is_histogram)
    families: Vec<(String, String, bool)>,
    restarts: Vec<(String, i64)>,
    downs: Vec<(String, i64, Option<i64>)>,
}

fn dur(v: &serde_yaml::Value) -> i64 {
    PromDuration::parse(v.as_str().expect("duration string"))
        .expect("duration")
        .0
}

fn facts(path: &Path) -> SpecFacts {
    let text = std::fs::read_to_string(path).expect("spec");
    let y: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let start = chrono::DateTime::parse_from_rfc3339(y["start"].as_str().expect("start")).expect("rfc3339");
    let mut f = SpecFacts {
        start_ms: start.timestamp_millis(),
        interval_ms: dur(&y["interval"]),
        duration_ms: dur(&y["duration"]),
        gzip: y["gzip"].as_bool().unwrap_or(false),
        ..Default::default()
    };
    for t in y["targets"].as_sequence().expect("targets") {
        let s = |k: &str| t[k].as_str().expect("target field").to_string();
        f.targets.push((s("name"), s("role"), s("base")));
    }
    for section in ["background", "effects"] {
        for m in y[section].as_sequence().cloned().unwrap_or_default() {
            let target = m["target"].as_str().expect("target").to_string();
            for (k, hist) in [("counter", false), ("gauge", false), ("histogram", true)] {
                if let Some(n) = m[k].as_str() {
                    f.families.push((target.clone(), n.to_string(), hist));
                }
            }
            if m["restart"].as_bool() == Some(true) {
                f.restarts.push((target.clone(), dur(&m["at"])));
            }
            if m["down"].as_bool() == Some(true) {
                f.downs
                    .push((target.clone(), dur(&m["at"]), m.get("until").map(dur)));
            }
        }
    }
    f
}

fn base_path(name: &str) -> PathBuf {
    let p = Path::new("testdata/realdata").join(format!("{name}.gz"));
    if p.is_file() {
        return p;
    }
    panic!("base {name} not found");
}

fn read_maybe_gz(p: &Path) -> Vec<u8> {
    let raw = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    if p.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .expect("gunzip");
        out
    } else {
        raw
    }
}

/// The metric name of a sample key (`name` or `name{...}`).
fn name_of(key: &str) -> &str {
    key.split_once('{').map(|(n, _)| n).unwrap_or(key)
}

/// The family a sample name belongs to: `x` for `x_bucket`/`x_sum`/`x_count`
/// when `x` is a histogram or summary (by its TYPE) or a family the spec names.
fn family_of<'a>(name: &'a str, named: &BTreeSet<String>, types: &HashMap<String, String>) -> &'a str {
    for suf in ["_bucket", "_sum", "_count"] {
        if let Some(f) = name.strip_suffix(suf) {
            let grouped = types.get(f).is_some_and(|t| t == "histogram" || t == "summary");
            if grouped || named.contains(f) {
                return f;
            }
        }
    }
    name
}

#[derive(Default)]
struct Group {
    buckets: BTreeMap<u64, f64>, // le (bits of a non-negative f64, ordered) -> value
    count: Option<f64>,
}

/// Applies one sample of a watched histogram family to its group table.
/// Go writes `le` last, so a bucket key is `name_bucket{<group labels>,le="x"}`.
fn apply_hist(groups: &mut HashMap<String, Group>, key: &str, v: f64) {
    let name = name_of(key);
    let labels = key.get(name.len() + 1..key.len().saturating_sub(1)).unwrap_or("");
    let (group, le) = match labels.rfind("le=\"") {
        Some(p) if name.ends_with("_bucket") => {
            let g = labels[..p].trim_end_matches(',');
            let le = labels[p + 4..].trim_end_matches('"');
            (g, Some(le))
        }
        _ => (labels, None),
    };
    if !groups.contains_key(group) {
        groups.insert(group.to_string(), Group::default());
    }
    let Some(g) = groups.get_mut(group) else { return };
    match le {
        Some(le) => {
            let x: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("numeric le")
            };
            assert!(x >= 0.0, "negative le in {key}");
            g.buckets.insert(x.to_bits(), v);
        }
        None if name.ends_with("_count") => g.count = Some(v),
        None => {}
    }
}

fn check_groups(groups: &HashMap<String, Group>, ctx: &str) {
    for (k, g) in groups {
        let mut last = f64::NEG_INFINITY;
        for &v in g.buckets.values() {
            assert!(
                v >= last,
                "{ctx}: buckets of {{{k}}} not cumulative: {:?}",
                g.buckets.values()
            );
            last = v;
        }
        let inf = g.buckets.get(&f64::INFINITY.to_bits()).copied();
        assert_eq!(inf, g.count, "{ctx}: +Inf bucket != _count for {{{k}}}");
    }
}

/// A temporary directory, in memory (`/dev/shm`) when the machine has it: the
/// shipped scenarios write about 100 MB each.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

/// Generates one shipped spec into a temp dir and checks everything the files
/// must satisfy. Returns the number of snapshots checked.
fn check_spec(name: &str) -> usize {
    let path = Path::new(SCENARIOS).join(format!("{name}.yaml"));
    let f = facts(&path);
    let tmp = scratch_dir();
    let out = tmp.path().join("capture");
    let spec = scenario::load_spec(&path).unwrap_or_else(|e| panic!("{e}"));
    scenario::generate(spec, &GenOptions::default(), &out, 2).unwrap_or_else(|e| panic!("{e}"));

    // Manifest.
    let m: Manifest =
        serde_yaml::from_str(&std::fs::read_to_string(out.join("manifest.yaml")).expect("manifest"))
            .expect("manifest parses");
    assert_eq!(m.format, "cptriage/capture/v1");
    assert_eq!(m.tool, Some(format!("cptriage {}", env!("CARGO_PKG_VERSION"))));
    let interval = m.interval.clone().expect("interval");
    assert_eq!(PromDuration::parse(&interval).expect("interval").0, f.interval_ms);
    let created_text = m.created.clone().expect("created");
    let created = chrono::DateTime::parse_from_rfc3339(&created_text).expect("created is RFC 3339");
    assert!(created_text.ends_with('Z'), "created is UTC: {created_text}");
    assert_eq!(created.timestamp_millis(), f.start_ms + f.duration_ms);
    let names: Vec<(&str, &str)> = m
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t.role.as_str()))
        .collect();
    let want: Vec<(&str, &str)> = f
        .targets
        .iter()
        .map(|(n, r, _)| (n.as_str(), r.as_str()))
        .collect();
    assert_eq!(names, want);

    let mut checked = 0;
    for (ti, (tname, _role, base)) in f.targets.iter().enumerate() {
        let base_bytes = read_maybe_gz(&base_path(base));
        let base_text = String::from_utf8_lossy(&base_bytes);
        // Version as the capture itself says.
        let version = base_text.lines().find_map(|l| {
            let (k, _) = split_sample(l)?;
            let (n, labels) = parse_key(k);
            let want = match n.as_str() {
                "kubernetes_build_info" => "git_version",
                "etcd_server_version" => "server_version",
                _ => return None,
            };
            labels.into_iter().find(|(ln, _)| ln == want).map(|(_, v)| v)
        });
        assert_eq!(m.targets[ti].version, version, "{name}/{tname}: version");

        let named: BTreeSet<String> = f
            .families
            .iter()
            .filter(|(g, _, _)| glob_match(g, tname))
            .map(|(_, n, _)| n.clone())
            .collect();
        let hist: BTreeSet<String> = f
            .families
            .iter()
            .filter(|(g, _, h)| *h && glob_match(g, tname))
            .map(|(_, n, _)| n.clone())
            .collect();
        let restarts: Vec<i64> = f
            .restarts
            .iter()
            .filter(|(g, _)| glob_match(g, tname))
            .map(|r| r.1)
            .collect();
        let mut allowed = named.clone();
        if !restarts.is_empty() {
            allowed.insert("process_start_time_seconds".into());
        }

        // File names: one per step, minus the steps the target is down.
        let ext = if f.gzip { "prom.gz" } else { "prom" };
        let steps = f.duration_ms / f.interval_ms;
        let mut expected = Vec::new();
        for k in 0..=steps {
            let off = k * f.interval_ms;
            let down = f
                .downs
                .iter()
                .any(|(g, a, u)| glob_match(g, tname) && off >= *a && u.is_none_or(|u| off < u));
            if !down {
                expected.push((f.start_ms + off, format!("{}.{ext}", f.start_ms + off)));
            }
        }
        let mut files: Vec<String> = std::fs::read_dir(out.join(tname))
            .expect("target dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let want_files: Vec<String> = expected.iter().map(|(_, n)| n.clone()).collect();
        assert_eq!(files, want_files, "{name}/{tname}: file names");

        // Types of the families, from the base and from created TYPE lines.
        let mut types: HashMap<String, String> = base_text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())))
            .collect();
        let mut hgroups: HashMap<String, HashMap<String, Group>> = HashMap::new();
        for l in base_text.lines() {
            if let Some((k, v)) = split_sample(l) {
                let fam = family_of(name_of(k), &hist, &types);
                if hist.contains(fam) {
                    apply_hist(hgroups.entry(fam.to_string()).or_default(), k, v);
                }
            }
        }
        let mut changed_families: BTreeSet<String> = BTreeSet::new();
        let mut prev = base_bytes.clone();
        let mut prev_t = f.start_ms - f.interval_ms;
        for (t, fname) in &expected {
            let cur = read_maybe_gz(&out.join(tname).join(fname));
            let ctx = format!("{name}/{tname}/{fname}");
            let restarted = restarts
                .iter()
                .any(|r| f.start_ms + r > prev_t && f.start_ms + r <= *t);
            for ch in diff(&prev, &cur) {
                match ch {
                    Change::Value { key, old, new } => {
                        let n = name_of(&key);
                        let fam = family_of(n, &allowed, &types).to_string();
                        let ty = types.get(&fam).map(String::as_str).unwrap_or("untyped");
                        let counter_like =
                            ty == "counter" || ty == "histogram" || (ty == "summary" && n != fam);
                        if counter_like && new < old {
                            assert!(
                                restarted,
                                "{ctx}: counter `{key}` went down {old} -> {new} without a restart"
                            );
                        }
                        if !allowed.contains(&fam) {
                            // Only a restart may touch other series: their counters drop to 0.
                            assert!(
                                restarted && counter_like && new == 0.0,
                                "{ctx}: `{key}` changed ({old} -> {new}) but the spec never names `{fam}`"
                            );
                            continue;
                        }
                        if hist.contains(&fam) {
                            apply_hist(hgroups.entry(fam.clone()).or_default(), &key, new);
                        }
                        if n != "process_start_time_seconds" {
                            changed_families.insert(fam);
                        }
                    }
                    Change::Inserted { line } => {
                        if let Some(rest) = line
                            .strip_prefix("# TYPE ")
                            .or_else(|| line.strip_prefix("# HELP "))
                        {
                            let fam = rest.split(' ').next().unwrap_or("");
                            assert!(
                                named.contains(fam),
                                "{ctx}: new family header for unnamed `{fam}`"
                            );
                            if let Some((a, b)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' '))
                            {
                                types.insert(a.to_string(), b.to_string());
                            }
                            continue;
                        }
                        let (k, v) = split_sample(&line)
                            .unwrap_or_else(|| panic!("{ctx}: bad inserted line {line:?}"));
                        let n = name_of(k);
                        let fam = family_of(n, &named, &types).to_string();
                        assert!(
                            named.contains(&fam),
                            "{ctx}: series `{k}` created but the spec never names `{fam}`"
                        );
                        if hist.contains(&fam) {
                            apply_hist(hgroups.entry(fam.clone()).or_default(), k, v);
                        }
                        changed_families.insert(fam);
                    }
                }
            }
            for (fam, groups) in &hgroups {
                check_groups(groups, &format!("{ctx} `{fam}`"));
            }
            if restarted {
                // The restart moved the process start time to the restart instant.
                let text = String::from_utf8_lossy(&cur);
                let pst = text
                    .lines()
                    .find_map(|l| l.strip_prefix("process_start_time_seconds "))
                    .and_then(|v| v.parse::<f64>().ok());
                let at = restarts
                    .iter()
                    .find(|r| f.start_ms + *r > prev_t)
                    .copied()
                    .unwrap_or(0);
                assert_eq!(
                    pst,
                    Some((f.start_ms + at) as f64 / 1000.0),
                    "{ctx}: process start moves"
                );
            }
            prev = cur;
            prev_t = *t;
            checked += 1;
        }
        // Every named family did something on this target.
        for fam in &named {
            assert!(
                changed_families.contains(fam),
                "{name}/{tname}: `{fam}` never changed"
            );
        }
    }
    checked
}

macro_rules! scenario_tests {
    ($($fn:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $fn() {
                assert!(check_spec($name) > 0);
            }
        )*

        /// Every shipped spec has a test above.
        #[test]
        fn every_shipped_spec_is_checked() {
            let mut have: Vec<String> = std::fs::read_dir(SCENARIOS)
                .expect("scenarios dir")
                .filter_map(|e| {
                    let p = e.ok()?.path();
                    if p.extension()? != "yaml" {
                        return None;
                    }
                    Some(p.file_stem()?.to_string_lossy().into_owned())
                })
                .collect();
            have.sort();
            let mut listed = vec![$($name.to_string()),*];
            listed.sort();
            assert_eq!(have, listed);
        }
    };
}

scenario_tests! {
    healthy => "healthy",
    auth_401_storm => "auth-401-storm",
    auth_403_denied => "auth-403-denied",
    admission_webhook_timeouts => "admission-webhook-timeouts",
    apf_queue_full => "apf-queue-full",
    etcd_raft_leader_loss => "etcd-raft-leader-loss",
    etcd_raft_member_down => "etcd-raft-member-down",
    etcd_disk_slow_one_member => "etcd-disk-slow-one-member",
    etcd_quota_nospace => "etcd-quota-nospace",
    etcd_compaction_watch_410 => "etcd-compaction-watch-410",
    watch_cache_terminated_watchers => "watch-cache-terminated-watchers",
    storage_409_storm => "storage-409-storm",
    storage_transformation_errors => "storage-transformation-errors",
    joint_5xx_only => "joint-5xx-only",
    bitter_zone_etcd_first => "bitter-zone-etcd-first",
    bitter_zone_apf_only => "bitter-zone-apf-only",
    etcd_leader_heartbeats_late => "etcd-leader-heartbeats-late",
    write_timeouts_504 => "write-timeouts-504",
    stale_reads_cache_fallback => "stale-reads-cache-fallback",
    conflict_rollback_retries => "conflict-rollback-retries",
    duplicate_events_watch_reconnects => "duplicate-events-watch-reconnects",
    node_status_lease_errors => "node-status-lease-errors",
    etcd_leader_heartbeats_late_3_6 => "etcd-leader-heartbeats-late-3.6",
    etcd_raft_elections_noisy_leader_3_4 => "etcd-raft-elections-noisy-leader-3.4",
    list_storm => "list-storm",
    list_busy_healthy_client => "list-busy-healthy-client",
    consistent_reads_wait_etcd_lag => "consistent-reads-wait-etcd-lag",
    apiserver_restart_relists => "apiserver-restart-relists",
    apiserver_rolling_restart_planned => "apiserver-rolling-restart-planned",
    admission_webhooks_add_up => "admission-webhooks-add-up",
    admission_webhooks_sum_under_deadline => "admission-webhooks-sum-under-deadline",
    replica_kms_diverges => "replica-kms-diverges",
    replica_kms_blip_all => "replica-kms-blip-all",
}

// ---------------------------------------------------------------------------
// Exact semantics on a tiny hand-written base.

const TINY_BASE: &str = "\
# HELP a_total [ALPHA] A counter.
# TYPE a_total counter
a_total{code=\"200\",verb=\"GET\"} 1
a_total{code=\"200\",verb=\"LIST\"} 3
a_total{code=\"500\",verb=\"GET\"} 0
# HELP g A gauge.
# TYPE g gauge
g 5
# HELP h A histogram.
# TYPE h histogram
h_bucket{le=\"1\"} 0
h_bucket{le=\"5\"} 0
h_bucket{le=\"1e+06\"} 0
h_bucket{le=\"+Inf\"} 0
h_sum 0
h_count 0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
# HELP z_total Last family.
# TYPE z_total counter
z_total 7
";

/// Writes `spec` (and the tiny base) into a fresh directory and generates it.
fn gen_tiny(spec: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("base.prom"), TINY_BASE).expect("base");
    let sp = tmp.path().join("spec.yaml");
    std::fs::write(&sp, spec).expect("spec");
    let out = tmp.path().join("out");
    let v = scenario::load_spec(&sp).unwrap_or_else(|e| panic!("{e}"));
    scenario::generate(v, &GenOptions { base_dirs: vec![] }, &out, 2).unwrap_or_else(|e| panic!("{e}"));
    (tmp, out)
}

fn snapshot(out: &Path, target: &str, offset_s: i64) -> String {
    let p = out
        .join(target)
        .join(format!("{}.prom", 1_767_225_600_000i64 + offset_s * 1000));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const TINY_SPEC: &str = "\
name: tiny
start: 2026-01-01T00:00:00Z
interval: 15s
duration: 1m
targets:
  - {name: t-a, role: apiserver, base: base.prom}
  - {name: t-b, role: etcd, base: base.prom}
background:
  - {target: '*', counter: a_total, match: {code: \"200\"}, rate: 4}
effects:
  - {at: 30s, target: t-a, histogram: h, add: 10, observe: 5}
  - {at: 15s, until: 45s, target: t-a, gauge: g, value: 9}
  - {at: 30s, target: t-a, counter: a_total, rate: 2, create: {code: \"429\", verb: LIST}}
  - {at: 15s, target: t-a, counter: b_total, add: 3, create: {x: \"1\"}, help: \"B.\"}
  - {at: 45s, target: t-a, restart: true}
  - {at: 15s, until: 45s, target: t-b, down: true}
";

#[test]
fn tiny_scenario_exact_values() {
    let (_tmp, out) = gen_tiny(TINY_SPEC);
    // Step 0 only differs from the base where something is set at t=0: nothing here.
    assert_eq!(snapshot(&out, "t-a", 0), TINY_BASE);
    // t=30s: counters split 1:3 by captured value (rate 4/s -> +15/+45 per step),
    // the created series sits in label order at 0, the new family is placed by
    // name, the gauge is set, and 10 observations of 5 land in le=5, le=1e+06
    // (numerically larger, though it sorts before "5" as text) and +Inf.
    let want_30s = TINY_BASE
        .replace(
            "a_total{code=\"200\",verb=\"GET\"} 1\n",
            "a_total{code=\"200\",verb=\"GET\"} 31\n",
        )
        .replace(
            "a_total{code=\"200\",verb=\"LIST\"} 3\n",
            "a_total{code=\"200\",verb=\"LIST\"} 93\na_total{code=\"429\",verb=\"LIST\"} 0\n",
        )
        .replace(
            "# HELP g A gauge.\n",
            "# HELP b_total B.\n# TYPE b_total counter\nb_total{x=\"1\"} 3\n# HELP g A gauge.\n",
        )
        .replace("g 5\n", "g 9\n")
        .replace("h_bucket{le=\"5\"} 0", "h_bucket{le=\"5\"} 10")
        .replace("h_bucket{le=\"1e+06\"} 0", "h_bucket{le=\"1e+06\"} 10")
        .replace("h_bucket{le=\"+Inf\"} 0", "h_bucket{le=\"+Inf\"} 10")
        .replace("h_sum 0", "h_sum 50")
        .replace("h_count 0", "h_count 10");
    assert_eq!(snapshot(&out, "t-a", 30), want_30s);
    // t=45s: the restart zeroed every counter (then this step's traffic was
    // added), moved the process start time, and the gauge got its value back.
    let s45 = snapshot(&out, "t-a", 45);
    for line in [
        "a_total{code=\"200\",verb=\"GET\"} 15",
        "a_total{code=\"200\",verb=\"LIST\"} 45",
        "a_total{code=\"429\",verb=\"LIST\"} 30",
        "a_total{code=\"500\",verb=\"GET\"} 0",
        "b_total{x=\"1\"} 0",
        "g 5",
        "h_bucket{le=\"+Inf\"} 0",
        "h_count 0",
        "process_start_time_seconds 1.767225645e+09",
        "z_total 0",
    ] {
        assert!(s45.lines().any(|l| l == line), "missing `{line}` in:\n{s45}");
    }
    let s60 = snapshot(&out, "t-a", 60);
    assert!(s60.contains("a_total{code=\"200\",verb=\"GET\"} 30\n"), "{s60}");
    assert!(s60.contains("a_total{code=\"429\",verb=\"LIST\"} 60\n"), "{s60}");
    // t-b is down from 15s to 45s: no files then; its counters went on growing.
    let mut files: Vec<String> = std::fs::read_dir(out.join("t-b"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["1767225600000.prom", "1767225645000.prom", "1767225660000.prom"]
    );
    assert!(snapshot(&out, "t-b", 45).contains("a_total{code=\"200\",verb=\"GET\"} 46\n"));
}

#[test]
fn replace_background_pauses_the_background_only_while_the_effect_runs() {
    let spec = "\
name: replace
start: 2026-01-01T00:00:00Z
interval: 15s
duration: 45s
targets: [{name: t, role: etcd, base: base.prom}]
background:
  - {target: t, histogram: h, rate: 2, observe: 1}
effects:
  - {at: 15s, until: 30s, target: t, histogram: h, rate: 1, observe: 5, replace_background: true}
";
    let (_tmp, out) = gen_tiny(spec);
    let hist = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("h_"))
            .map(str::to_string)
            .collect()
    };
    let expect = |b1: u32, b5: u32, sum: u32| {
        vec![
            format!("h_bucket{{le=\"1\"}} {b1}"),
            format!("h_bucket{{le=\"5\"}} {b5}"),
            format!("h_bucket{{le=\"1e+06\"}} {b5}"),
            format!("h_bucket{{le=\"+Inf\"}} {b5}"),
            format!("h_sum {sum}"),
            format!("h_count {b5}"),
        ]
    };
    assert_eq!(hist(&snapshot(&out, "t", 15)), expect(30, 30, 30));
    assert_eq!(hist(&snapshot(&out, "t", 30)), expect(30, 45, 105));
    assert_eq!(hist(&snapshot(&out, "t", 45)), expect(60, 75, 135));
}

#[test]
fn generation_is_deterministic_and_independent_of_threads() {
    let path = Path::new(SCENARIOS).join("etcd-raft-member-down.yaml");
    let tmp = scratch_dir();
    let mut dirs = Vec::new();
    for (i, threads) in [1usize, 2].into_iter().enumerate() {
        let out = tmp.path().join(format!("run{i}"));
        let spec = scenario::load_spec(&path).unwrap_or_else(|e| panic!("{e}"));
        scenario::generate(spec, &GenOptions::default(), &out, threads).unwrap_or_else(|e| panic!("{e}"));
        dirs.push(out);
    }
    let list = |d: &Path| -> Vec<PathBuf> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(d).expect("dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                for f in std::fs::read_dir(&p).expect("dir") {
                    v.push(
                        f.expect("entry")
                            .path()
                            .strip_prefix(d)
                            .expect("prefix")
                            .to_path_buf(),
                    );
                }
            } else {
                v.push(p.strip_prefix(d).expect("prefix").to_path_buf());
            }
        }
        v.sort();
        v
    };
    let (a, b) = (list(&dirs[0]), list(&dirs[1]));
    assert_eq!(a, b);
    assert!(a.len() > 100);
    for rel in &a {
        let x = std::fs::read(dirs[0].join(rel)).expect("read");
        let y = std::fs::read(dirs[1].join(rel)).expect("read");
        assert!(x == y, "{} differs between runs", rel.display());
    }
}

/// The demo capture committed for the README is exactly what its spec generates.
/// Regenerate it with:
/// `cargo run --bin gen-scenario -- testdata/scenarios/bitter-zone-etcd-first.yaml --out testdata/captures/bitter-zone-etcd-first --force`
#[test]
fn committed_demo_capture_is_up_to_date() {
    let committed = Path::new("testdata/captures/bitter-zone-etcd-first");
    let tmp = scratch_dir();
    let out = tmp.path().join("capture");
    let spec = scenario::load_spec(&Path::new(SCENARIOS).join("bitter-zone-etcd-first.yaml")).expect("spec");
    scenario::generate(spec, &GenOptions::default(), &out, 2).expect("generate");
    let mut total = 0u64;
    for entry in std::fs::read_dir(&out).expect("out") {
        let p = entry.expect("entry").path();
        let rel = p.strip_prefix(&out).expect("prefix");
        let files: Vec<PathBuf> = if p.is_dir() {
            std::fs::read_dir(&p)
                .expect("dir")
                .map(|e| e.expect("entry").path())
                .collect()
        } else {
            vec![p.clone()]
        };
        for f in files {
            let rel_f = f.strip_prefix(&out).expect("prefix");
            let want = std::fs::read(&f).expect("generated");
            let have = std::fs::read(committed.join(rel_f))
                .unwrap_or_else(|e| panic!("{}: {e} (regenerate the demo capture)", rel_f.display()));
            total += have.len() as u64;
            assert!(
                want == have,
                "{} is stale (regenerate the demo capture)",
                rel_f.display()
            );
        }
        let _ = rel;
    }
    let committed_files = std::fs::read_dir(committed).expect("committed").count();
    let generated_files = std::fs::read_dir(&out).expect("out").count();
    assert_eq!(
        committed_files, generated_files,
        "extra files in the committed capture"
    );
    assert!(total < 3_500_000, "demo capture grew to {total} bytes");
}

// ---------------------------------------------------------------------------
// Bad specs: clear messages that point at the file and line.

#[test]
fn bad_specs_name_file_line_and_construct() {
    let head = "name: bad\nstart: 2026-01-01T00:00:00Z\ninterval: 15s\nduration: 1m\ntargets:\n  - {name: t, role: apiserver, base: base.prom}\n";
    let cases: &[(&str, usize, &str)] = &[
        ("colour: blue\n", 7, "unknown field `colour`"),
        (
            "effects:\n  - {target: t, counter: a_total, rate: 1}\n",
            8,
            "effects[0]: effects need `at`",
        ),
        (
            "effects:\n  - {at: 5x, target: t, counter: a_total, rate: 1}\n",
            8,
            "invalid duration `5x`",
        ),
        (
            "background:\n  - {target: t, counter: a_total, rate: 1}\n  - {target: t, counter: g, rate: 1}\n",
            9,
            "background[1] on target `t`: `g` is a gauge in base",
        ),
        (
            "background:\n  - {target: t, counter: nope_total, rate: 1}\n",
            8,
            "`nope_total` is not in base",
        ),
        (
            "background:\n  - {target: t, counter: a_total, match: {verbb: GET}, rate: 1}\n",
            8,
            "`match` label `verbb` is not a label of `a_total`",
        ),
        (
            "background:\n  - {target: t, counter: a_total, match: {code: \"999\"}, rate: 1}\n",
            8,
            "no series of `a_total` match {code=\"999\"}",
        ),
        (
            "background:\n  - {target: etcd-*, counter: a_total, rate: 1}\n",
            8,
            "target `etcd-*` matches no target",
        ),
        (
            "background:\n  - {target: t, counter: a_total, rate: 1, add: 2}\n",
            8,
            "give exactly one of `rate` and `add`",
        ),
        (
            "background:\n  - {target: t, counter: a_total, rate: -1}\n",
            8,
            "counters only increase",
        ),
        (
            "effects:\n  - {at: 0, target: t, counter: new_total, rate: 1, create: {a: b}}\n",
            8,
            "give `help:` (or `like:` another capture)",
        ),
        (
            "effects:\n  - {at: 0, target: t, histogram: h, rate: 1}\n",
            8,
            "histograms need `observe`",
        ),
        (
            "expect:\n  status: degraded\n  axis: disk\n",
            7,
            "unknown axis `disk`",
        ),
    ];
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("base.prom"), TINY_BASE).expect("base");
    for (i, (tail, line, msg)) in cases.iter().enumerate() {
        let p = tmp.path().join(format!("bad{i}.yaml"));
        std::fs::write(&p, format!("{head}{tail}")).expect("write");
        let err = scenario::load_spec(&p)
            .and_then(|v| scenario::Scenario::build(v, &GenOptions { base_dirs: vec![] }).map(|_| ()))
            .expect_err(&format!("case {i} should fail"))
            .to_string();
        let want_prefix = format!("{}:{line}:", p.display());
        assert!(
            err.starts_with(&want_prefix),
            "case {i}: `{err}` should start with `{want_prefix}`"
        );
        assert!(err.contains(msg), "case {i}: `{err}` should contain `{msg}`");
    }
    // A missing base names what it looked for.
    let p = tmp.path().join("nobase.yaml");
    std::fs::write(&p, head.replace("base.prom", "missing.prom")).expect("write");
    let err = scenario::load_spec(&p)
        .and_then(|v| scenario::Scenario::build(v, &GenOptions::default()).map(|_| ()))
        .expect_err("missing base")
        .to_string();
    assert!(
        err.contains(":6:") && err.contains("base capture `missing.prom` not found"),
        "{err}"
    );
}

/// The benchmark spec (not generated by the tests: it writes ~600 MB) stays valid.
#[test]
fn perf_spec_binds() {
    let spec =
        scenario::load_spec(Path::new("testdata/scenarios/perf/three-by-three-15m.yaml")).expect("spec");
    let sc = scenario::Scenario::build(spec, &GenOptions::default()).expect("binds");
    assert_eq!(sc.targets.len(), 6);
    assert_eq!(sc.steps, 61);
}
