//! The large-capture generator (`gen-scale`), on a small instance: output is
//! deterministic, the resource space is multiplied, counters only grow, and
//! `diagnose` reads the capture and names the generated fault.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cptriage::source::expfmt;
use cptriage::source::ingest::read_maybe_gzip;
use cptriage_testkit::scenario::scale::{self, ScaleOptions, APISERVER_BASE};

fn realdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/realdata")
}

fn small(threads: usize) -> ScaleOptions {
    ScaleOptions {
        realdata: realdata(),
        resources: 3,
        duration_s: 600,
        interval_s: 15,
        apiservers: 1,
        etcd_members: 3,
        threads,
        gzip_level: 1,
    }
}

/// Every file under `dir` (relative path → bytes).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Samples of one exposition: series text → value.
fn samples(body: &[u8]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut keep = |_: &str| true;
    let mut sink = |s: &expfmt::SampleRef<'_>| {
        let l: Vec<String> = s
            .labels
            .iter()
            .map(|l| format!("{}={}", l.name, l.value))
            .collect();
        out.insert(format!("{}{{{}}}", s.name, l.join(",")), s.value);
    };
    expfmt::parse(body, &mut keep, &mut sink).unwrap();
    out
}

#[test]
fn the_scaled_capture_is_deterministic_larger_monotonic_and_diagnosed() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let sa = scale::generate(&small(2), &a).unwrap();
    let sb = scale::generate(&small(1), &b).unwrap();
    assert_eq!(
        (sa.raw_bytes, sa.compressed_bytes),
        (sb.raw_bytes, sb.compressed_bytes)
    );
    // 41 snapshots (both ends) × 4 targets, and nothing else but the manifest.
    assert_eq!(sa.files, 41 * 4);
    let (ta, tb) = (tree(&a), tree(&b));
    assert_eq!(ta.len(), 41 * 4 + 1);
    assert!(ta == tb, "two runs (1 and 2 threads) differ");
    assert!(!d.path().join("a.base").exists(), "the scratch base is removed");
    assert_eq!(
        sa.compressed_bytes,
        ta.values().map(|v| v.len() as u64).sum::<u64>() - ta["manifest.yaml"].len() as u64
    );

    // The apiserver snapshots hold every per-resource series 3 times.
    let base = samples(&read_maybe_gzip(&realdata().join(format!("{APISERVER_BASE}.gz"))).unwrap());
    let first = read_maybe_gzip(&a.join("apiserver-0/1767225600000.prom.gz")).unwrap();
    let last = read_maybe_gzip(&a.join("apiserver-0/1767226200000.prom.gz")).unwrap();
    assert_eq!(sa.raw_bytes, {
        let mut n = 0;
        for k in ta.keys() {
            if k.ends_with(".gz") {
                n += read_maybe_gzip(&a.join(k)).unwrap().len() as u64;
            }
        }
        n
    });
    let (s0, s1) = (samples(&first), samples(&last));
    let per_resource = {
        let mut n = 0;
        let mut keep = |_: &str| true;
        let mut sink = |s: &expfmt::SampleRef<'_>| {
            n += usize::from(
                s.labels
                    .iter()
                    .any(|l| l.name == "resource" && !l.value.is_empty()),
            );
        };
        expfmt::parse(
            &read_maybe_gzip(&realdata().join(format!("{APISERVER_BASE}.gz"))).unwrap(),
            &mut keep,
            &mut sink,
        )
        .unwrap();
        n
    };
    assert!(per_resource > 10_000, "{per_resource}");
    assert_eq!(s0.len(), base.len() + 2 * per_resource);
    assert_eq!(s1.len(), s0.len());
    assert!(s0.contains_key(
        "apiserver_request_total{code=200,component=apiserver,dry_run=,group=,resource=pods-s2,scope=resource,subresource=,verb=GET,version=v1}"
    ));

    // Counters and histograms only grow, and the copies move too.
    let mut grew = 0;
    for (k, v0) in &s0 {
        let v1 = s1[k];
        if k.starts_with("apiserver_request_total")
            || k.starts_with("apiserver_request_duration_seconds_")
            || k.starts_with("etcd_request_duration_seconds_")
        {
            assert!(v1 >= *v0, "{k}: {v0} → {v1}");
            if v1 > *v0 && k.contains("-s2") {
                grew += 1;
            }
        }
    }
    assert!(grew > 1000, "{grew} copied series grew");

    // diagnose reads it and names the generated fault: etcd disk on etcd-0, from 6m40s.
    let out = support::cptriage(&["diagnose", "-o", "json", "--dump", a.to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["root_cause"]["axis"], "etcd", "{stdout}");
    assert_eq!(v["root_cause"]["sub_axis"], "disk", "{stdout}");
    assert_eq!(
        v["root_cause"]["instances"],
        serde_json::json!(["etcd-0"]),
        "{stdout}"
    );
}

#[test]
fn generation_refuses_a_non_empty_output_directory() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("x"), "x").unwrap();
    let e = scale::generate(&small(1), d.path()).unwrap_err().to_string();
    assert!(e.contains("output directory is not empty"), "{e}");
}
