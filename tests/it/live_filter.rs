//! The recording filter on real captures: the kept families load exactly as
//! the same families of the original exposition.

use crate::support;

use cptriage::source::expfmt::{self, SampleRef};
use cptriage::source::ingest::Keep;
use cptriage::source::live::{families, filter};

/// Every sample of the families `keep` wants, as text lines.
fn samples(input: &[u8], keep: &Keep) -> Vec<String> {
    let mut out = Vec::new();
    let mut k = |f: &str| keep.wants(f);
    let mut sink = |s: &SampleRef<'_>| {
        let labels: Vec<String> = s
            .labels
            .iter()
            .map(|l| format!("{}={:?}", l.name, l.value))
            .collect();
        out.push(format!(
            "{}{{{}}} {:?} {:?}",
            s.name,
            labels.join(","),
            s.value,
            s.timestamp_ms
        ));
    };
    expfmt::parse(input, &mut k, &mut sink).unwrap();
    out
}

#[test]
fn filtered_real_captures_hold_the_same_samples_as_the_originals() {
    let keep = families::default_keep();
    for name in [
        "apiserver_nri_v1.33.0.prom",
        "etcd_nri_v3.4.13_k8s1.19.prom",
        "apiserver_datadog_v1.10.11.prom",
    ] {
        let orig = support::realdata(name);
        let f = filter::filter(&orig, &keep).unwrap();
        assert!(f.bytes.len() < orig.len(), "{name}: nothing dropped");
        assert!(f.families_kept > 10, "{name}: kept {}", f.families_kept);
        let want = samples(&orig, &keep);
        assert!(!want.is_empty());
        assert_eq!(samples(&f.bytes, &Keep::All), want, "{name}");
        // HELP and TYPE lines come along verbatim.
        let text = String::from_utf8(f.bytes).unwrap();
        let orig_text = String::from_utf8_lossy(&orig);
        for l in text.lines().filter(|l| l.starts_with('#')) {
            assert!(orig_text.contains(l), "{name}: {l}");
        }
        assert!(text.contains("# TYPE process_start_time_seconds gauge"), "{name}");
    }
}
