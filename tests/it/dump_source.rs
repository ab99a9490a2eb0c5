//! The dump source: capture directories, ad-hoc directories, single files, gzip,
//! roles, times, staleness and partial failures.

use crate::support::realcap;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use cptriage::source::capture::{self, DumpArg};
use cptriage::source::ingest::{self, DumpError, Keep};
use cptriage::source::{Role, TimeSource};
use cptriage::store::is_stale;

const ETCD: &str = "# HELP etcd_server_has_leader Whether or not a leader exists.\n# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n# HELP etcd_server_version Which version is running.\n# TYPE etcd_server_version gauge\netcd_server_version{server_version=\"3.5.21\"} 1\n";
const API: &str = "# HELP apiserver_request_total [STABLE] Counter of apiserver requests.\n# TYPE apiserver_request_total counter\napiserver_request_total{code=\"200\",verb=\"GET\"} 10\n# HELP kubernetes_build_info [ALPHA] build info\n# TYPE kubernetes_build_info gauge\nkubernetes_build_info{git_version=\"v1.33.0\"} 1\n";

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

fn write_gz(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let f = std::fs::File::create(p).unwrap();
    let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    e.write_all(s.as_bytes()).unwrap();
    e.finish().unwrap();
}

fn args(v: &[&str]) -> Vec<DumpArg> {
    v.iter().map(|a| DumpArg::parse(a).unwrap()).collect()
}

fn arg_path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn capture_directory_with_manifest_gzip_by_magic_and_unrecognised_files() {
    let d = tempfile::tempdir().unwrap();
    write(
        &d.path().join("manifest.yaml"),
        "format: cptriage/capture/v1\ninterval: 15s\ntargets:\n  - {name: m1, role: etcd, version: 3.5.21}\n  - {name: api, role: apiserver}\n",
    );
    write(&d.path().join("m1/1767225600000.prom"), ETCD);
    write_gz(&d.path().join("m1/1767225615000.prom.gz"), ETCD);
    // gzip content without the .gz extension is still read.
    write_gz(&d.path().join("m1/1767225630000.prom"), ETCD);
    write(&d.path().join("api/1767225600000.prom"), API);
    write(&d.path().join("api/README.md"), "notes");
    let ds = capture::load(&args(&[&arg_path(d.path())]), &Keep::All).unwrap();
    let m1 = ds.targets.iter().find(|t| t.name == "m1").unwrap();
    assert_eq!(m1.role, Role::Etcd);
    assert_eq!(m1.role_reason, "capture manifest");
    assert_eq!(m1.time_source, TimeSource::FileName);
    let times: Vec<i64> = m1.snapshots.iter().map(|s| s.time).collect();
    assert_eq!(times, [1_767_225_600_000, 1_767_225_615_000, 1_767_225_630_000]);
    assert_eq!(m1.version.as_deref(), Some("3.5.21"));
    let api = ds.targets.iter().find(|t| t.name == "api").unwrap();
    assert_eq!(api.role, Role::Apiserver);
    assert!(
        ds.warnings
            .iter()
            .any(|w| w.origin.ends_with("README.md") && w.message.contains("skipped")),
        "{:?}",
        ds.warnings
    );
    let leader: Vec<_> = ds.store.by_name("etcd_server_has_leader").collect();
    assert_eq!(leader.len(), 1);
    assert_eq!(leader[0].labels.get("instance"), Some("m1"));
    assert_eq!(leader[0].labels.get("role"), Some("etcd"));
    assert_eq!(leader[0].points.len(), 3);
}

/// Failed scrapes in the manifest stay with their target: a member that
/// stopped answering near the end extends the window to the last attempt, and
/// one that never answered is still listed, with its manifest role.
#[test]
fn failed_scrapes_in_the_manifest_are_kept_as_evidence() {
    let d = tempfile::tempdir().unwrap();
    write(
        &d.path().join("manifest.yaml"),
        "format: cptriage/capture/v1\ninterval: 15s\ntargets:\n  - {name: m1, role: etcd}\n  - {name: m2, role: etcd}\n  - {name: m3, role: etcd}\nfailures:\n  - {target: m2, time: 1767225630000, error: connection refused}\n  - {target: m2, time: 1767225645000, error: connection refused}\n  - {target: m3, time: 1767225600000, error: timed out after 4s}\n  - {target: m3, time: 1767225615000, error: timed out after 4s}\n",
    );
    for t in ["1767225600000", "1767225615000", "1767225630000"] {
        write(&d.path().join(format!("m1/{t}.prom")), ETCD);
    }
    for t in ["1767225600000", "1767225615000"] {
        write(&d.path().join(format!("m2/{t}.prom")), ETCD);
    }
    let ds = capture::load(&args(&[&arg_path(d.path())]), &Keep::All).unwrap();
    let m2 = ds.targets.iter().find(|t| t.name == "m2").unwrap();
    assert_eq!(m2.failures, [1_767_225_630_000, 1_767_225_645_000]);
    assert_eq!(ds.window(), Some((1_767_225_600_000, 1_767_225_645_000)));
    let m3 = ds
        .targets
        .iter()
        .find(|t| t.name == "m3")
        .expect("a silent target is kept");
    assert_eq!(m3.role, Role::Etcd);
    assert!(m3.snapshots.is_empty());
    assert_eq!(m3.failures.len(), 2);
    // `up`, as Prometheus records it: 1 per answered scrape, 0 per failed one.
    let up = |t: &str| -> Vec<(i64, f64)> {
        let s = ds
            .store
            .by_name("up")
            .find(|s| s.labels.get("instance") == Some(t))
            .unwrap_or_else(|| panic!("no up for {t}"));
        assert_eq!(s.labels.get("role"), Some("etcd"));
        s.points.iter().map(|p| (p.t, p.v)).collect()
    };
    assert_eq!(
        up("m2"),
        [
            (1_767_225_600_000, 1.0),
            (1_767_225_615_000, 1.0),
            (1_767_225_630_000, 0.0),
            (1_767_225_645_000, 0.0)
        ]
    );
    assert_eq!(up("m3"), [(1_767_225_600_000, 0.0), (1_767_225_615_000, 0.0)]);
}

#[test]
fn adhoc_directory_infers_roles_and_reads_every_time_form() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("etcd-0/1767225600.prom"), ETCD);
    write(&d.path().join("etcd-0/1767225615.5.prom"), ETCD);
    write(&d.path().join("etcd-0/1767225630000.prom"), ETCD);
    write(&d.path().join("kube/2026-01-01T00-00-00Z.prom"), API);
    write(&d.path().join("kube/2026-01-01T00:00:15Z.prom"), API);
    write(&d.path().join("kube/notes.json"), "{}");
    let ds = capture::load(&args(&[&arg_path(d.path())]), &Keep::All).unwrap();
    let e = ds.targets.iter().find(|t| t.name == "etcd-0").unwrap();
    assert_eq!(e.role, Role::Etcd);
    assert!(
        e.role_reason.contains("etcd_server_has_leader"),
        "{}",
        e.role_reason
    );
    let times: Vec<i64> = e.snapshots.iter().map(|s| s.time).collect();
    assert_eq!(times, [1_767_225_600_000, 1_767_225_615_500, 1_767_225_630_000]);
    let k = ds.targets.iter().find(|t| t.name == "kube").unwrap();
    assert_eq!(k.role, Role::Apiserver);
    assert_eq!(k.version.as_deref(), Some("v1.33.0"));
    assert_eq!(k.snapshots.len(), 2);
    assert!(
        ds.warnings.iter().any(|w| w.origin.ends_with("notes.json")),
        "{:?}",
        ds.warnings
    );
}

#[test]
fn single_files_with_names_roles_and_mtime() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.prom");
    let b = d.path().join("b.prom");
    write(&a, ETCD);
    write(&b, ETCD);
    let ds = capture::load(
        &args(&[
            &format!("etcd:m1={}", a.display()),
            &format!("m1={}", b.display()),
            &format!("unknown:x={}", a.display()),
        ]),
        &Keep::All,
    )
    .unwrap();
    let m1 = ds.targets.iter().find(|t| t.name == "m1").unwrap();
    assert_eq!(m1.role_reason, "given on the command line");
    assert_eq!(m1.time_source, TimeSource::Mtime);
    let x = ds.targets.iter().find(|t| t.name == "x").unwrap();
    assert_eq!(x.role, Role::Unknown);
}

#[test]
fn explicit_sample_timestamps_give_the_time() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.prom");
    write(&p, "# TYPE up gauge\nup 1 1767225600000\n");
    let ds = capture::load(&args(&[&arg_path(&p)]), &Keep::All).unwrap();
    assert_eq!(ds.targets[0].time_source, TimeSource::SampleTimestamp);
    assert_eq!(ds.targets[0].snapshots[0].time, 1_767_225_600_000);
}

#[test]
fn disappearing_series_get_a_staleness_marker_and_instance_is_renamed() {
    let d = tempfile::tempdir().unwrap();
    write(
        &d.path().join("t/1767225600000.prom"),
        "# TYPE x counter\nx{a=\"1\"} 1\nx{a=\"2\",instance=\"orig\"} 1\n",
    );
    write(
        &d.path().join("t/1767225615000.prom"),
        "# TYPE x counter\nx{a=\"1\"} 2\n",
    );
    let ds = capture::load(&args(&[&arg_path(d.path())]), &Keep::All).unwrap();
    let gone = ds
        .store
        .by_name("x")
        .find(|s| s.labels.get("a") == Some("2"))
        .unwrap();
    assert_eq!(gone.labels.get("exported_instance"), Some("orig"));
    assert_eq!(gone.labels.get("instance"), Some("t"));
    assert_eq!(gone.points.len(), 2);
    assert!(is_stale(gone.samples()[1].v));
    assert_eq!(gone.samples()[1].t, 1_767_225_615_000);
}

#[test]
fn keep_filter_loads_only_named_families_and_identity() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("api.prom");
    write(&p, &format!("{API}# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\n# TYPE other gauge\nother 3\n"));
    let keep = Keep::Names(BTreeSet::from(["apiserver_request_total".to_string()]));
    let ds = capture::load(&args(&[&arg_path(&p)]), &keep).unwrap();
    let names: BTreeSet<&str> = ds.store.metric_names().collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "apiserver_request_total",
            "kubernetes_build_info",
            "process_start_time_seconds"
        ])
    );
    // The family list still names what the target exposed, kept or not.
    assert!(ds.targets[0].families.contains("other"));
    assert_eq!(ds.targets[0].snapshots[0].process_start, Some(1.7e9));
}

#[test]
fn a_corrupt_file_is_a_warning_and_the_rest_is_analysed() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("t/1767225600000.prom"), ETCD);
    std::fs::write(
        d.path().join("t/1767225615000.prom.gz"),
        [0x1f, 0x8b, 0x08, 0x00, 0x01],
    )
    .unwrap();
    let ds = capture::load(&args(&[&arg_path(d.path())]), &Keep::All).unwrap();
    assert_eq!(ds.targets[0].snapshots.len(), 1);
    assert!(
        ds.warnings.iter().any(|w| w.message.contains("corrupt gzip")),
        "{:?}",
        ds.warnings
    );
}

#[test]
fn nothing_usable_is_an_error_listing_why() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("empty.prom");
    write(&p, "");
    match capture::load(&args(&[&arg_path(&p)]), &Keep::All) {
        Err(DumpError::NoData(w)) => assert!(w[0].message.contains("empty file"), "{w:?}"),
        other => panic!("expected NoData, got {other:?}"),
    }
    match capture::load(&args(&["/nonexistent/x.prom"]), &Keep::All) {
        Err(DumpError::NotFound(p)) => assert_eq!(p, Path::new("/nonexistent/x.prom")),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[test]
fn bad_manifest_names_file_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    write(
        &d.path().join("manifest.yaml"),
        "format: cptriage/capture/v1\ntargets:\n  - name: a\n    rol: etcd\n",
    );
    let e = capture::load(&args(&[&arg_path(d.path())]), &Keep::All).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("manifest.yaml:4:5"), "{msg}");
    assert!(msg.contains("unknown field `rol`"), "{msg}");
}

/// Every real capture in testdata/realdata (gzipped) loads, with the role its content says.
#[test]
fn every_real_capture_loads_with_the_right_role() {
    let mut n = 0;
    for (name, p) in realcap::files() {
        n += 1;
        let ds = capture::load(&args(&[&arg_path(&p)]), &Keep::All).unwrap_or_else(|e| panic!("{name}: {e}"));
        let t = &ds.targets[0];
        let want = if name.starts_with("etcd_") {
            Role::Etcd
        } else if name.contains("slis") {
            Role::Unknown
        } else {
            Role::Apiserver
        };
        assert_eq!(t.role, want, "{name}: {}", t.role_reason);
        if name.starts_with("etcd_") {
            let v = name.split('_').nth(2).unwrap().trim_start_matches('v');
            assert_eq!(t.version.as_deref(), Some(v), "{name}");
        }
        // kube-apiserver's version from kubernetes_build_info: `git_version`,
        // or `gitVersion` in 1.10–1.15.
        if let Some(rest) = name.strip_prefix("apiserver_").filter(|r| !r.starts_with("slis")) {
            // The file names the minor version (a capture of 1.27.4 is named 1.27.0).
            let v = rest.rsplit('_').next().unwrap().trim_end_matches(".prom");
            let minor = &v[..v.rfind('.').unwrap() + 1];
            let got = t
                .version
                .as_deref()
                .unwrap_or_else(|| panic!("{name}: no version"));
            assert!(got.starts_with(minor), "{name}: {got}");
        }
        assert!(ds.store.point_count() > 0, "{name}");
    }
    assert_eq!(n, 32);
}

#[test]
fn memory_snapshots_load_like_the_same_files() {
    use cptriage::source::ingest::MemorySnapshot;
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let a = "# TYPE x counter\nx{a=\"1\"} 1\nx{a=\"2\"} 5\n";
    let b = "# TYPE x counter\nx{a=\"1\"} 3\n";
    write(&d.path().join("t/1767225600000.prom"), a);
    write(&d.path().join("t/1767225615000.prom"), b);
    let from_files = capture::load(
        &args(&[&format!("unknown:t={}", d.path().join("t").display())]),
        &Keep::All,
    )
    .unwrap();
    let snaps = vec![
        MemorySnapshot {
            target: "t".into(),
            role: Some(Role::Unknown),
            role_reason: "given on the command line".into(),
            time: 1_767_225_600_000,
            origin: "http://127.0.0.1:1/metrics".into(),
            bytes: Arc::new(a.as_bytes().to_vec()),
        },
        MemorySnapshot {
            target: "t".into(),
            role: Some(Role::Unknown),
            role_reason: "given on the command line".into(),
            time: 1_767_225_615_000,
            origin: "http://127.0.0.1:1/metrics".into(),
            bytes: Arc::new(b.as_bytes().to_vec()),
        },
    ];
    let from_memory = ingest::load_memory(snaps, vec![], &Keep::All).unwrap();
    let dump_series = |ds: &cptriage::source::Dataset| {
        let mut v: Vec<String> = ds
            .store
            .series()
            .iter()
            .map(|s| {
                format!(
                    "{} {:?}",
                    s.labels,
                    s.points.iter().map(|p| (p.t, p.v.to_bits())).collect::<Vec<_>>()
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(dump_series(&from_files), dump_series(&from_memory));
    assert_eq!(from_memory.targets[0].snapshots.len(), 2);
}
