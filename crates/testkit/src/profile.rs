//! Monitoring profiles: how a real monitoring setup reshapes what cptriage
//! gets to read (series dropped by relabelling, histogram buckets thinned, a
//! coarse scrape interval, whole roles not scraped). One YAML file per profile
//! (`testdata/profiles/*.yaml`); applied to a capture directory or to
//! in-memory snapshots, so every scenario, capture and lab recording can be
//! diagnosed as each setup would show it.
//!
//! ```yaml
//! name: aks-minimal
//! description: AKS managed Prometheus, minimal ingestion profile
//! source: where the configuration comes from
//! interval: 30s                # scrapes kept at least this far apart
//! roles:                       # roles not listed are not scraped at all
//!   apiserver:
//!     metric_relabel_configs:  # Prometheus semantics: source labels joined
//!       - source_labels: [__name__]   # by `;`, the regex anchored, in order
//!         regex: apiserver_request_total|...
//!         action: keep         # keep | drop
//!   etcd: {}                   # scraped as is
//! float_labels: true           # `le`/`quantile` written as floats ("1.0")
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use cptriage::source::capture::manifest::{self, Manifest};
use cptriage::source::capture::write::CaptureWriter;
use cptriage::source::ingest::MemorySnapshot;
use cptriage::source::Role;
use cptriage::store::Millis;
use serde::Deserialize;

/// A profile as written in its file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileDef {
    pub name: String,
    pub description: String,
    /// Where the configuration comes from (a public chart, a vendor's docs).
    #[serde(default)]
    pub source: Option<String>,
    /// Scrape interval: snapshots of a target closer than this to the last
    /// one kept are dropped.
    #[serde(default)]
    pub interval: Option<String>,
    /// Per role, what is kept of it; roles not listed are not scraped.
    pub roles: BTreeMap<String, RoleDef>,
    /// `le` and `quantile` label values written as floats (`"1.0"`), as
    /// Prometheus 3 normalises them.
    #[serde(default)]
    pub float_labels: bool,
}

/// What a profile keeps of one role's scrapes.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleDef {
    #[serde(default)]
    pub metric_relabel_configs: Vec<RelabelDef>,
}

/// One `metric_relabel_configs` entry (the `keep` and `drop` actions).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelabelDef {
    #[serde(default = "default_source")]
    pub source_labels: Vec<String>,
    #[serde(default = "default_separator")]
    pub separator: String,
    pub regex: String,
    pub action: Action,
}

fn default_source() -> Vec<String> {
    vec!["__name__".into()]
}

fn default_separator() -> String {
    ";".into()
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Keep,
    Drop,
}

/// A loaded profile.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub source: Option<String>,
    pub interval: Option<Millis>,
    pub float_labels: bool,
    roles: BTreeMap<Role, Vec<Relabel>>,
}

#[derive(Clone, Debug)]
struct Relabel {
    source: Vec<String>,
    separator: String,
    regex: regex::Regex,
    action: Action,
}

/// A profile file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ProfileError {
    pub path: String,
    pub message: String,
}

impl Profile {
    /// Reads and checks a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let err = |message: String| ProfileError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let def: ProfileDef = serde_yaml::from_str(&text).map_err(|e| err(e.to_string()))?;
        Profile::from_def(def).map_err(err)
    }

    /// Checks a parsed profile.
    pub fn from_def(def: ProfileDef) -> Result<Profile, String> {
        let interval = match &def.interval {
            Some(s) => Some(crate::scenario::PromDuration::parse(s)?.millis()),
            None => None,
        };
        let mut roles = BTreeMap::new();
        for (name, r) in def.roles {
            let role = Role::parse(&name).ok_or_else(|| format!("unknown role `{name}`"))?;
            let mut rules = Vec::new();
            for c in r.metric_relabel_configs {
                let regex = regex::Regex::new(&format!("^(?:{})$", c.regex))
                    .map_err(|e| format!("regex `{}`: {e}", c.regex))?;
                rules.push(Relabel {
                    source: c.source_labels,
                    separator: c.separator,
                    regex,
                    action: c.action,
                });
            }
            roles.insert(role, rules);
        }
        Ok(Profile {
            name: def.name,
            description: def.description,
            source: def.source,
            interval,
            float_labels: def.float_labels,
            roles,
        })
    }

    /// Every profile of a directory (`*.yaml`), sorted by file name.
    pub fn load_dir(dir: &Path) -> Result<Vec<Profile>, ProfileError> {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| ProfileError {
                path: dir.display().to_string(),
                message: e.to_string(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        paths.sort();
        paths.iter().map(|p| Profile::load(p)).collect()
    }

    /// Whether targets of `role` are scraped at all.
    pub fn scrapes(&self, role: Role) -> bool {
        self.roles.contains_key(&role)
    }

    /// One exposition body as this profile stores it (`None`: the role is
    /// not scraped). Samples are kept or dropped by the role's relabel rules;
    /// `# HELP`/`# TYPE` lines stay only for families with a sample left.
    pub fn transform(&self, role: Role, body: &[u8]) -> Option<Vec<u8>> {
        let rules = self.roles.get(&role)?;
        let text = String::from_utf8_lossy(body);
        let mut kept: Vec<String> = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for line in text.lines() {
            let t = line.trim_start();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let Some(sample) = Sample::parse(t) else {
                continue;
            };
            if !rules.iter().all(|r| r.keeps(&sample)) {
                continue;
            }
            names.insert(sample.name.to_string());
            kept.push(if self.float_labels {
                sample.with_float_labels()
            } else {
                t.to_string()
            });
        }
        let mut out = String::new();
        let family_kept = |fam: &str| {
            names.contains(fam)
                || ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| names.contains(&format!("{fam}{s}")))
        };
        // Comments first for the families kept, then the samples, in order.
        for line in text.lines() {
            let t = line.trim_start();
            if let Some(rest) = t.strip_prefix("# HELP ").or_else(|| t.strip_prefix("# TYPE ")) {
                let fam = rest.split_whitespace().next().unwrap_or("");
                if family_kept(fam) {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
        for k in kept {
            out.push_str(&k);
            out.push('\n');
        }
        Some(out.into_bytes())
    }

    /// Snapshots of one target kept by the scrape interval: the first, then
    /// each at least `interval` after the last kept one.
    fn keep_times(&self, mut times: Vec<Millis>) -> Vec<Millis> {
        times.sort();
        let Some(iv) = self.interval else { return times };
        let mut out: Vec<Millis> = Vec::new();
        for t in times {
            // A little slack for scrape jitter.
            if out.last().is_none_or(|&l| t - l >= iv - iv / 10) {
                out.push(t);
            }
        }
        out
    }

    /// In-memory snapshots as this profile stores them.
    pub fn apply_snapshots(&self, snaps: Vec<MemorySnapshot>) -> Vec<MemorySnapshot> {
        let mut times: BTreeMap<String, Vec<Millis>> = BTreeMap::new();
        for s in &snaps {
            times.entry(s.target.clone()).or_default().push(s.time);
        }
        let kept: BTreeMap<String, Vec<Millis>> =
            times.into_iter().map(|(t, v)| (t, self.keep_times(v))).collect();
        snaps
            .into_iter()
            .filter(|s| {
                kept.get(&s.target)
                    .is_some_and(|v| v.binary_search(&s.time).is_ok())
            })
            .filter_map(|s| {
                let role = s.role?;
                let bytes = self.transform(role, &gunzip(&s.bytes))?;
                Some(MemorySnapshot {
                    bytes: std::sync::Arc::new(bytes),
                    ..s
                })
            })
            .collect()
    }

    /// Writes the capture directory `src` as this profile stores it into
    /// `dst` (which must not exist or be empty): targets of roles not
    /// scraped are left out, with their failed scrapes.
    pub fn apply_capture(&self, src: &Path, dst: &Path) -> Result<(), ProfileError> {
        let err = |p: &Path, message: String| ProfileError {
            path: p.display().to_string(),
            message,
        };
        let mpath = src.join("manifest.yaml");
        let text = std::fs::read_to_string(&mpath).map_err(|e| err(&mpath, e.to_string()))?;
        let m = manifest::parse(&text).map_err(|e| err(&mpath, e.message))?;
        let targets: Vec<_> = m
            .targets
            .iter()
            .filter(|t| self.scrapes(t.role))
            .cloned()
            .collect();
        std::fs::create_dir_all(dst).map_err(|e| err(dst, e.to_string()))?;
        let w = CaptureWriter::new(dst, None);
        w.create_targets(targets.iter().map(|t| t.name.as_str()))
            .map_err(|e| err(dst, e.to_string()))?;
        for t in &targets {
            let dir = src.join(&t.name);
            let mut files: BTreeMap<Millis, std::path::PathBuf> = BTreeMap::new();
            for e in std::fs::read_dir(&dir).map_err(|e| err(&dir, e.to_string()))? {
                let p = e.map_err(|e| err(&dir, e.to_string()))?.path();
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if let Some(ms) = name.split('.').next().and_then(|x| x.parse::<Millis>().ok()) {
                    files.insert(ms, p);
                }
            }
            for time in self.keep_times(files.keys().copied().collect()) {
                let p = &files[&time];
                let raw = std::fs::read(p).map_err(|e| err(p, e.to_string()))?;
                if let Some(body) = self.transform(t.role, &gunzip(&raw)) {
                    w.write_snapshot(&t.name, time, &body)
                        .map_err(|e| err(p, e.to_string()))?;
                }
            }
        }
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        let failures = m
            .failures
            .iter()
            .filter(|f| names.contains(&f.target.as_str()))
            .cloned()
            .collect();
        let out = Manifest {
            targets,
            failures,
            interval: self
                .interval
                .map(|iv| format!("{}s", iv / 1000))
                .or(m.interval.clone()),
            ..m
        };
        w.write_manifest(&out).map_err(|e| err(dst, e.to_string()))
    }
}

impl Relabel {
    fn keeps(&self, s: &Sample) -> bool {
        let v: Vec<&str> = self.source.iter().map(|l| s.label(l)).collect();
        let hit = self.regex.is_match(&v.join(&self.separator));
        match self.action {
            Action::Keep => hit,
            Action::Drop => !hit,
        }
    }
}

/// One sample line, split for relabelling.
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    /// Everything after the label set (value, timestamp).
    rest: &'a str,
}

impl<'a> Sample<'a> {
    fn parse(line: &'a str) -> Option<Sample<'a>> {
        let end = line.find(['{', ' ', '\t'])?;
        let name = &line[..end];
        let mut labels = Vec::new();
        let mut rest = &line[end..];
        if rest.starts_with('{') {
            let b = rest.as_bytes();
            let mut i = 1;
            loop {
                while i < b.len() && (b[i] == b' ' || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() {
                    return None;
                }
                if b[i] == b'}' {
                    i += 1;
                    break;
                }
                let eq = rest[i..].find('=')? + i;
                let key = rest[i..eq].trim();
                i = eq + 1;
                if b.get(i) != Some(&b'"') {
                    return None;
                }
                i += 1;
                let mut val = String::new();
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        val.push('\\');
                        i += 1;
                    }
                    let c = rest[i..].chars().next()?;
                    val.push(c);
                    i += c.len_utf8();
                }
                i += 1;
                labels.push((key, val));
            }
            rest = &rest[i..];
        }
        Some(Sample { name, labels, rest })
    }

    /// A label's value as relabelling sees it (`__name__` is the name; a
    /// missing label is empty).
    fn label(&self, l: &str) -> &str {
        if l == "__name__" {
            return self.name;
        }
        self.labels
            .iter()
            .find(|(k, _)| *k == l)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// The line with `le` and `quantile` values as floats (`1` → `1.0`).
    fn with_float_labels(&self) -> String {
        let mut s = self.name.to_string();
        if !self.labels.is_empty() {
            s.push('{');
            let parts: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| {
                    let v = if (*k == "le" || *k == "quantile") && is_integer(v) {
                        format!("{v}.0")
                    } else {
                        v.clone()
                    };
                    format!("{k}=\"{v}\"")
                })
                .collect();
            s.push_str(&parts.join(","));
            s.push('}');
        }
        s.push_str(self.rest);
        s
    }
}

fn is_integer(v: &str) -> bool {
    let d = v.strip_prefix('-').unwrap_or(v);
    !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
}

/// The bytes, decompressed when they are gzip.
fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    if b.len() >= 2 && b[0] == 0x1f && b[1] == 0x8b {
        let mut out = Vec::new();
        if flate2::read::GzDecoder::new(b).read_to_end(&mut out).is_ok() {
            return out;
        }
    }
    b.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(yaml: &str) -> Profile {
        Profile::from_def(serde_yaml::from_str(yaml).unwrap()).unwrap()
    }

    #[test]
    fn relabel_keep_and_drop_follow_prometheus() {
        let p = profile(
            r#"
name: t
description: t
roles:
  apiserver:
    metric_relabel_configs:
      - {regex: "a_total|h_.*", action: keep}
      - {source_labels: [__name__, le], regex: "h_bucket;(0.5|2)", action: drop}
"#,
        );
        let body = b"# HELP a_total x\n# TYPE a_total counter\na_total{code=\"200\"} 3\n# TYPE b gauge\nb 1\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 2\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\n";
        let out = String::from_utf8(p.transform(Role::Apiserver, body).unwrap()).unwrap();
        assert!(out.contains("a_total{code=\"200\"} 3"));
        assert!(!out.contains("\nb 1") && !out.contains("TYPE b "), "{out}");
        assert!(!out.contains("le=\"0.5\"") && !out.contains("le=\"2\""), "{out}");
        assert!(
            out.contains("h_bucket{le=\"1\"} 2")
                && out.contains("h_count 2")
                && out.contains("# TYPE h histogram")
        );
        assert!(p.transform(Role::Etcd, body).is_none(), "etcd is not scraped");
    }

    #[test]
    fn float_labels_and_interval() {
        let p = profile("name: t\ndescription: t\ninterval: 30s\nfloat_labels: true\nroles: {etcd: {}}\n");
        let out = String::from_utf8(
            p.transform(
                Role::Etcd,
                b"h_bucket{le=\"1\",x=\"a\\\"b\"} 2\nh_bucket{le=\"+Inf\"} 2\n",
            )
            .unwrap(),
        )
        .unwrap();
        assert!(out.contains("h_bucket{le=\"1.0\",x=\"a\\\"b\"} 2"), "{out}");
        assert!(out.contains("le=\"+Inf\""));
        let t: Vec<Millis> = (0..9).map(|i| i * 15_000).collect();
        assert_eq!(p.keep_times(t), vec![0, 30_000, 60_000, 90_000, 120_000]);
    }
}
