//! Which files of the `--logs` arguments are read, as which member and
//! component, in which order, and which are skipped and why. Recognised
//! without flags:
//!
//! - an OpenShift must-gather: `namespaces/<ns>/pods/<pod>/<container>/<container>/logs/{previous,current}.log`
//!   (the `etcd` container of the `etcd-*` pods, the `kube-apiserver`
//!   container of the `kube-apiserver-*` pods; the member is the pod);
//! - a node's `/var/log/pods` (sosreport, node tarball):
//!   `<ns>_<pod>_<uid>/<container>/<restart>.log[.<time>][.gz]`;
//! - a plain directory or files `<name>.log[.N][.gz]` (the member is `<name>`).
//!
//! `NAME=PATH` names the member of every file under PATH.

use std::path::{Path, PathBuf};

use super::class::Component;

/// One log file to read.
#[derive(Clone, Debug, PartialEq)]
pub struct LogFile {
    pub path: PathBuf,
    /// The member or replica (pod, `NAME=`, or the file's name).
    pub member: String,
    /// `None`: decided from the content.
    pub component: Option<Component>,
    /// The layout it was recognised in.
    pub layout: &'static str,
    /// Order among the files of one member: restart number, then rotation
    /// generation (older first).
    order: (u64, i64),
}

/// A file not read, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    pub path: String,
    pub why: String,
}

/// The files of the arguments.
#[derive(Debug, Default)]
pub struct Expanded {
    pub files: Vec<LogFile>,
    pub skipped: Vec<Skipped>,
    /// Files skipped without being named (not logs, in a must-gather or a
    /// node's tree), counted.
    pub other_files: u64,
}

/// Why the arguments cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("cannot read log path `{path}`: {message}")]
    Read { path: String, message: String },
    #[error("no log file in `{0}` ({1})")]
    Empty(String, String),
}

/// Most files walked under one argument, and deepest directory.
const MAX_FILES: usize = 200_000;
const MAX_DEPTH: usize = 16;

/// Splits `NAME=PATH` (a name without `/` before the first `=`, and PATH
/// not an existing path as a whole).
pub fn split_spec(arg: &str) -> (Option<String>, PathBuf) {
    if !Path::new(arg).exists() {
        if let Some((name, path)) = arg.split_once('=') {
            if !name.is_empty() && !name.contains('/') && !path.is_empty() {
                return (Some(name.to_string()), PathBuf::from(path));
            }
        }
    }
    (None, PathBuf::from(arg))
}

fn is_gz(name: &str) -> bool {
    name.ends_with(".gz")
}

/// `<stem>.log`, `<stem>.log.gz`, `<stem>.log.<suffix>[.gz]`: the stem and the
/// rotation generation (the live file newest).
fn log_name(name: &str) -> Option<(&str, i64)> {
    let base = name.strip_suffix(".gz").unwrap_or(name);
    if let Some(stem) = base.strip_suffix(".log") {
        return Some((stem, i64::MAX));
    }
    let i = base.rfind(".log.")?;
    let (stem, suffix) = (&base[..i], &base[i + 5..]);
    // logrotate's `.1` is newer than `.2`; the kubelet's `.20261206-040150`
    // grows with time.
    let digits: String = suffix.chars().filter(char::is_ascii_digit).collect();
    let n: i64 = digits.get(..digits.len().min(18))?.parse().ok()?;
    Some((
        stem,
        if suffix.contains('-') || digits.len() >= 8 {
            n
        } else {
            -n
        },
    ))
}

fn component_of_pod(pod: &str, container: &str) -> Option<Component> {
    if pod.starts_with("etcd-") || pod == "etcd" {
        return (container == "etcd").then_some(Component::Etcd);
    }
    if pod.starts_with("kube-apiserver-") || pod == "kube-apiserver" {
        return (container == "kube-apiserver").then_some(Component::Apiserver);
    }
    None
}

/// Recognises one file by its path.
fn classify(path: &Path, name: Option<&str>) -> Result<LogFile, Option<String>> {
    let parts: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let n = parts.len();
    let file = parts.last().cloned().unwrap_or_default();
    let with_name = |mut f: LogFile| {
        if let Some(nm) = name {
            f.member = nm.to_string();
        }
        f
    };
    // must-gather: …/pods/<pod>/<container>/<container>/logs/<file>.log
    if n >= 6 && parts[n - 2] == "logs" && !parts[n - 5].is_empty() && parts[n - 6] == "pods" {
        let (pod, container) = (&parts[n - 5], &parts[n - 4]);
        if !matches!(
            file.as_str(),
            "current.log" | "previous.log" | "previous.insecure.log" | "current.insecure.log"
        ) {
            return Err(Some(format!("`{file}` is not a container log of a must-gather")));
        }
        if file.contains("insecure") {
            return Err(Some(
                "an `insecure` log (the same lines without redaction): the redacted one is read".into(),
            ));
        }
        return match component_of_pod(pod, container) {
            Some(c) => Ok(with_name(LogFile {
                path: path.to_path_buf(),
                member: pod.clone(),
                component: Some(c),
                layout: "must-gather",
                order: (0, i64::from(!file.starts_with("previous"))),
            })),
            None => Err(Some(format!(
                "container `{container}` of pod `{pod}` is not an etcd or kube-apiserver server"
            ))),
        };
    }
    // /var/log/pods/<ns>_<pod>_<uid>/<container>/<N>.log[...]
    if n >= 3 {
        let dir = &parts[n - 3];
        let mut it = dir.splitn(3, '_');
        if let (Some(_ns), Some(pod), Some(uid)) = (it.next(), it.next(), it.next()) {
            if uid.len() >= 8 && log_name(&file).is_some() {
                let container = &parts[n - 2];
                let (stem, gen) = log_name(&file).unwrap_or(("0", 0));
                return match (component_of_pod(pod, container), stem.parse::<u64>()) {
                    (Some(c), Ok(restart)) => Ok(with_name(LogFile {
                        path: path.to_path_buf(),
                        member: pod.to_string(),
                        component: Some(c),
                        layout: "/var/log/pods",
                        order: (restart, gen),
                    })),
                    (Some(_), Err(_)) => Err(Some(format!(
                        "`{file}` is not a `<restart>.log` of the container runtime"
                    ))),
                    (None, _) => Err(Some(format!(
                        "container `{container}` of pod `{pod}` is not an etcd or kube-apiserver server"
                    ))),
                };
            }
        }
    }
    if parts.iter().any(|p| p == "containers") && parts.iter().rev().nth(1).is_some_and(|p| p == "containers")
    {
        return Err(Some(
            "`/var/log/containers` holds links to `/var/log/pods`, read there".into(),
        ));
    }
    match log_name(&file) {
        Some((stem, gen)) => {
            let member = name.map(str::to_string).unwrap_or_else(|| stem.to_string());
            let lower = stem.to_ascii_lowercase();
            let component = if lower.contains("apiserver") {
                Some(Component::Apiserver)
            } else if lower.contains("etcd") {
                Some(Component::Etcd)
            } else {
                None
            };
            Ok(LogFile {
                path: path.to_path_buf(),
                member,
                component,
                layout: "plain",
                order: (0, gen),
            })
        }
        None => Err(None),
    }
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), LayoutError> {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES {
        return Ok(());
    }
    let rd = std::fs::read_dir(dir).map_err(|e| LayoutError::Read {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            walk(&e.path(), depth + 1, out)?;
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    Ok(())
}

/// The files of the arguments (`NAME=PATH` or `PATH`), grouped by member,
/// each member's files oldest first.
pub fn expand(args: &[String]) -> Result<Expanded, LayoutError> {
    let mut ex = Expanded::default();
    for arg in args {
        let (name, path) = split_spec(arg);
        let meta = std::fs::metadata(&path).map_err(|e| LayoutError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if !meta.is_dir() {
            // A file given by name is read whatever its name.
            let f = classify(&path, name.as_deref()).unwrap_or_else(|_| LogFile {
                member: name.clone().unwrap_or_else(|| {
                    path.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default()
                }),
                path: path.clone(),
                component: None,
                layout: "plain",
                order: (0, i64::MAX),
            });
            ex.files.push(f);
            continue;
        }
        let mut all = Vec::new();
        walk(&path, 0, &mut all)?;
        let before = ex.files.len();
        let mut skipped_here = Vec::new();
        for p in all {
            let rel = p.strip_prefix(&path).unwrap_or(&p);
            match classify(rel, name.as_deref()) {
                Ok(mut f) => {
                    f.path = p;
                    ex.files.push(f);
                }
                Err(Some(why)) => skipped_here.push(Skipped {
                    path: p.display().to_string(),
                    why,
                }),
                Err(None) => ex.other_files += 1,
            }
        }
        if ex.files.len() == before {
            let why = match skipped_here.first() {
                Some(s) => format!(
                    "{} log file(s) skipped, first `{}`: {}",
                    skipped_here.len(),
                    s.path,
                    s.why
                ),
                None => "no `*.log` file, no must-gather or /var/log/pods layout".into(),
            };
            return Err(LayoutError::Empty(path.display().to_string(), why));
        }
        ex.skipped.extend(skipped_here);
    }
    ex.files.sort_by(|a, b| {
        a.member
            .cmp(&b.member)
            .then(a.order.cmp(&b.order))
            .then(a.path.cmp(&b.path))
    });
    ex.files.dedup_by(|a, b| a.path == b.path);
    Ok(ex)
}

/// Whether a path's name says gzip (the content decides; this only names it).
pub fn named_gz(p: &Path) -> bool {
    p.file_name().is_some_and(|n| is_gz(&n.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_by_path() {
        let f = classify(
            Path::new("mg/namespaces/openshift-etcd/pods/etcd-master-0/etcd/etcd/logs/previous.log"),
            None,
        )
        .unwrap();
        assert_eq!(
            (f.member.as_str(), f.component, f.layout),
            ("etcd-master-0", Some(Component::Etcd), "must-gather")
        );
        let e = classify(
            Path::new("mg/namespaces/openshift-etcd/pods/etcd-master-0/etcdctl/etcdctl/logs/current.log"),
            None,
        );
        assert!(matches!(e, Err(Some(w)) if w.contains("etcdctl")));
        let f = classify(
            Path::new("var/log/pods/kube-system_etcd-node1_0123456789abcdef/etcd/1.log.20261206-040150.gz"),
            None,
        )
        .unwrap();
        assert_eq!(
            (f.member.as_str(), f.layout, f.order.0),
            ("etcd-node1", "/var/log/pods", 1)
        );
        let f = classify(Path::new("logs/m0.log.2.gz"), Some("x")).unwrap();
        assert_eq!((f.member.as_str(), f.order), ("x", (0, -2)));
        assert_eq!(classify(Path::new("logs/readme.txt"), None), Err(None));
        assert_eq!(
            split_spec("m0=/nonexistent/x.log"),
            (Some("m0".into()), PathBuf::from("/nonexistent/x.log"))
        );
    }
}
