//! Datasets written as OpenMetrics text, the input of `promtool tsdb
//! create-blocks-from openmetrics`: how the cross-check and fleet tests and
//! the fleet benchmark fill a real Prometheus with generated captures.
//!
//! Every stored series is written (its `role` and `instance` labels included,
//! and the `up` series the ingest funnel derives from the snapshots), with an
//! extra label (e.g. `cluster`) per dataset when asked. Stale markers are not
//! samples and are left out. Families are contiguous, as OpenMetrics requires;
//! the text is streamed, never held whole.

use std::collections::BTreeSet;
use std::io::{BufWriter, Write};
use std::path::Path;

use cptriage::source::Dataset;
use cptriage::store::{is_stale, Labels, METRIC_NAME};

/// What a write held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub series: usize,
    pub samples: usize,
    /// Stale markers left out.
    pub stale: usize,
}

/// A label value escaped for the exposition text.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A sample value as OpenMetrics writes it.
pub fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// A timestamp in milliseconds as OpenMetrics seconds.
pub fn time(t: i64) -> String {
    format!("{}.{:03}", t.div_euclid(1000), t.rem_euclid(1000))
}

/// Writes the series of every `(value, dataset)` to `path`, each series with
/// `label="value"` added when `label` is given.
pub fn write(parts: &[(&str, &Dataset)], label: Option<&str>, path: &Path) -> std::io::Result<Written> {
    write_filtered(parts, label, path, |_, _| true)
}

/// [`write`], leaving out the series for which `keep(value, labels)` is
/// false (a cluster that does not expose a family the others have; a
/// benchmark that keeps a few resources).
pub fn write_filtered(
    parts: &[(&str, &Dataset)],
    label: Option<&str>,
    path: &Path,
    keep: impl Fn(&str, &Labels) -> bool,
) -> std::io::Result<Written> {
    let names: BTreeSet<&str> = parts
        .iter()
        .flat_map(|(_, ds)| ds.store.series().iter().filter_map(|s| s.labels.metric_name()))
        .collect();
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut w = Written::default();
    for name in names {
        writeln!(out, "# TYPE {name} unknown")?;
        for (v, ds) in parts {
            for s in ds.store.by_name(name).filter(|s| keep(v, &s.labels)) {
                w.series += 1;
                let mut labels: Vec<String> = s
                    .labels
                    .iter()
                    .filter(|l| &*l.name != METRIC_NAME)
                    .map(|l| format!("{}=\"{}\"", l.name, escape(&l.value)))
                    .collect();
                if let Some(l) = label {
                    labels.push(format!("{l}=\"{}\"", escape(v)));
                }
                let head = format!("{name}{{{}}}", labels.join(","));
                for p in s.points.iter() {
                    if is_stale(p.v) {
                        w.stale += 1;
                        continue;
                    }
                    w.samples += 1;
                    writeln!(out, "{head} {} {}", value(p.v), time(p.t))?;
                }
            }
        }
    }
    out.write_all(b"# EOF\n")?;
    out.flush()?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_times_as_openmetrics_writes_them() {
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::INFINITY), "+Inf");
        assert_eq!(value(1.5), "1.5");
        assert_eq!(time(1_767_225_600_250), "1767225600.250");
        assert_eq!(time(-1), "-1.999");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
