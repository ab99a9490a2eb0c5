//! The capture format: what `--dump` reads and what `record`, `diagnose
//! --live --save` and the scenario generators write.
//!
//! Accepted inputs (any mix, several at once):
//! - a capture directory (`manifest.yaml` + `<target>/<unix-ms>.prom[.gz]`);
//! - a directory of ad-hoc files: `<target>/<time>.prom[.gz]` (unix seconds,
//!   fractional seconds, milliseconds, or an RFC 3339 time in the name), or files
//!   at its top level, each a target named by its file name;
//! - single files, optionally prefixed `NAME=` or `role:NAME=` (the same `NAME`
//!   given to several files makes them snapshots of one target).
//!
//! Files that are not recognised are listed as warnings and skipped. Reading
//! turns the arguments into a plan of snapshot files that the ingest funnel
//! ([`crate::source::ingest`]) loads; writing is [`write::CaptureWriter`].

pub mod manifest;
pub mod write;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::source::ingest::{run_plan, DumpError, Keep, Plan, Planned};
use crate::source::{nodemap, timename};
use crate::source::{Dataset, Role};
use manifest::Manifest;

/// One `--dump` argument: `[role:][NAME=]PATH`.
#[derive(Clone, Debug, PartialEq)]
pub struct DumpArg {
    pub name: Option<String>,
    pub role: Option<Role>,
    pub path: PathBuf,
}

impl DumpArg {
    /// Parses `[role:][NAME=]PATH`. A path that exists as given is taken whole,
    /// even if it contains `=` or `:`.
    pub fn parse(arg: &str) -> Result<DumpArg, DumpError> {
        if Path::new(arg).exists() {
            return Ok(DumpArg {
                name: None,
                role: None,
                path: arg.into(),
            });
        }
        let Some((prefix, path)) = arg.split_once('=') else {
            return Ok(DumpArg {
                name: None,
                role: None,
                path: arg.into(),
            });
        };
        if prefix.contains('/') {
            return Ok(DumpArg {
                name: None,
                role: None,
                path: arg.into(),
            });
        }
        let (role, name) = match prefix.split_once(':') {
            Some((r, n)) => {
                let role = Role::parse(r).ok_or_else(|| DumpError::BadArgument {
                    path: arg.into(),
                    message: format!("unknown role `{r}` (expected {})", Role::GIVEN),
                })?;
                (Some(role), n)
            }
            None => (None, prefix),
        };
        if name.is_empty() || path.is_empty() {
            return Err(DumpError::BadArgument {
                path: arg.into(),
                message: "expected `[role:][NAME=]PATH`".into(),
            });
        }
        Ok(DumpArg {
            name: Some(name.to_string()),
            role,
            path: path.into(),
        })
    }
}

fn is_metrics_file(name: &str) -> bool {
    [
        ".prom",
        ".prom.gz",
        ".txt",
        ".txt.gz",
        ".metrics",
        ".metrics.gz",
        ".gz",
        ".om",
    ]
    .iter()
    .any(|e| name.ends_with(e))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, DumpError> {
    let rd = fs::read_dir(dir).map_err(|e| DumpError::Unreadable {
        path: dir.into(),
        source: e,
    })?;
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    Ok(v)
}

fn plan_capture(plan: &mut Plan, dir: &Path, arg: &DumpArg) -> Result<(), DumpError> {
    let mpath = dir.join("manifest.yaml");
    // A link could make cptriage read (and quote) any file of the machine.
    if fs::symlink_metadata(&mpath).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(DumpError::Manifest {
            path: mpath,
            line: 1,
            column: 1,
            message: "the manifest is a symbolic link; cptriage reads only a regular `manifest.yaml` inside the capture".into(),
        });
    }
    let text = crate::limits::read_text_capped(&mpath).map_err(|e| DumpError::Unreadable {
        path: mpath.clone(),
        source: e,
    })?;
    let m: Manifest = manifest::parse(&text).map_err(|e| DumpError::Manifest {
        path: mpath.clone(),
        line: e.line,
        column: e.column,
        message: e.message,
    })?;
    let prefix = arg.name.as_deref();
    let tname = |n: &str| match prefix {
        Some(p) => format!("{p}/{n}"),
        None => n.to_string(),
    };
    let mut known = HashSet::new();
    for t in &m.targets {
        known.insert(t.name.clone());
        plan.declare(
            &tname(&t.name),
            Some((t.role, "capture manifest".into())),
            t.version.clone(),
        );
        if let Some(node) = t
            .node
            .clone()
            .or_else(|| t.url.as_deref().and_then(nodemap::host_of))
        {
            plan.declare_node(&tname(&t.name), node);
        }
        let tdir = dir.join(&t.name);
        if !tdir.is_dir() {
            plan.warn(
                tdir.display().to_string(),
                "target listed in the manifest has no snapshot directory",
            );
            continue;
        }
        plan_target_dir(plan, &tdir, &tname(&t.name))?;
    }
    for f in &m.failures {
        if !known.contains(&f.target) {
            plan.warn(
                mpath.display().to_string(),
                format!(
                    "failures name target `{}`, which the manifest does not list; ignored",
                    f.target
                ),
            );
            continue;
        }
        let mut f = f.clone();
        f.target = tname(&f.target);
        plan.failures.push(f);
    }
    for p in sorted_entries(dir)? {
        let n = file_name(&p);
        if p.is_dir() && n == "health" {
            // Health-endpoint results written by `record` (not metrics).
            continue;
        }
        if p.is_dir() && !known.contains(&n) {
            plan.warn(
                p.display().to_string(),
                "directory not listed in the manifest; loaded with an inferred role",
            );
            plan_target_dir(plan, &p, &tname(&n))?;
        } else if p.is_file() && n != "manifest.yaml" {
            plan.warn(p.display().to_string(), "not part of the capture layout; skipped");
        }
    }
    Ok(())
}

fn plan_target_dir(plan: &mut Plan, dir: &Path, target: &str) -> Result<(), DumpError> {
    for p in sorted_entries(dir)? {
        let n = file_name(&p);
        if p.is_dir() {
            plan.warn(p.display().to_string(), "nested directory; skipped");
            continue;
        }
        let st = timename::stem(&n);
        match timename::find_time(st) {
            Some(nt) => plan.files.push(Planned {
                target: target.to_string(),
                path: p,
                bytes: None,
                name_time: Some(nt.time),
            }),
            None if is_metrics_file(&n) => plan.files.push(Planned {
                target: target.to_string(),
                path: p,
                bytes: None,
                name_time: None,
            }),
            None => plan.warn(
                p.display().to_string(),
                "not recognised (no time in the name and not a .prom/.txt/.gz file); skipped",
            ),
        }
    }
    Ok(())
}

fn plan_adhoc_dir(plan: &mut Plan, dir: &Path, arg: &DumpArg) -> Result<(), DumpError> {
    for p in sorted_entries(dir)? {
        let n = file_name(&p);
        if p.is_dir() {
            let target = match &arg.name {
                Some(pre) => format!("{pre}/{n}"),
                None => n.clone(),
            };
            if let Some(r) = arg.role {
                plan.declare(&target, Some((r, "given on the command line".into())), None);
            }
            plan_target_dir(plan, &p, &target)?;
        } else {
            let st = timename::stem(&n);
            let found = timename::find_time(st);
            if found.is_none() && !is_metrics_file(&n) {
                plan.warn(
                    p.display().to_string(),
                    "not recognised as a metrics dump; skipped",
                );
                continue;
            }
            // A file named only by a time is a snapshot of the directory's target
            // (NAME= when given, else the directory's name).
            let target = match (&found, &arg.name) {
                (Some(nt), Some(pre)) if !nt.rest.is_empty() => format!("{pre}/{}", nt.rest),
                (Some(nt), None) if !nt.rest.is_empty() => nt.rest.clone(),
                (Some(_), Some(pre)) => pre.clone(),
                (Some(_), None) => file_name(dir),
                (None, Some(pre)) => format!("{pre}/{st}"),
                (None, None) => st.to_string(),
            };
            if let Some(r) = arg.role {
                plan.declare(&target, Some((r, "given on the command line".into())), None);
            }
            plan.files.push(Planned {
                target,
                path: p,
                bytes: None,
                name_time: found.map(|f| f.time),
            });
        }
    }
    Ok(())
}

fn plan_args(args: &[DumpArg]) -> Result<Plan, DumpError> {
    let mut plan = Plan::default();
    let mut unnamed_singles: HashMap<String, usize> = HashMap::new();
    for arg in args {
        let meta = fs::metadata(&arg.path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DumpError::NotFound(arg.path.clone()),
            _ => DumpError::Unreadable {
                path: arg.path.clone(),
                source: e,
            },
        })?;
        if meta.is_dir() {
            if arg.path.join("manifest.yaml").is_file() {
                plan_capture(&mut plan, &arg.path, arg)?;
            } else {
                plan_adhoc_dir(&mut plan, &arg.path, arg)?;
            }
            continue;
        }
        let n = file_name(&arg.path);
        let st = timename::stem(&n);
        let found = timename::find_time(st);
        let target = match (&arg.name, &found) {
            (Some(name), _) => name.clone(),
            (None, Some(nt)) if !nt.rest.is_empty() => nt.rest.clone(),
            (None, Some(_)) => arg
                .path
                .parent()
                .map(file_name)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| st.to_string()),
            (None, None) => {
                let k = unnamed_singles.entry(st.to_string()).or_insert(0);
                *k += 1;
                if *k == 1 {
                    st.to_string()
                } else {
                    let t = format!("{st}-{k}");
                    plan.warn(
                        arg.path.display().to_string(),
                        format!("another file is already named `{st}`; this one is target `{t}` (use NAME=PATH to name it)"),
                    );
                    t
                }
            }
        };
        if let Some(r) = arg.role {
            plan.declare(&target, Some((r, "given on the command line".into())), None);
        }
        plan.files.push(Planned {
            target,
            path: arg.path.clone(),
            bytes: None,
            name_time: found.map(|f| f.time),
        });
    }
    Ok(plan)
}

/// Loads dumps into a [`Dataset`].
pub fn load(args: &[DumpArg], keep: &Keep) -> Result<Dataset, DumpError> {
    load_capped(args, keep, crate::limits::DEFAULT_MAX_BODY)
}

/// [`load`] reading at most `max_bytes` of each snapshot file (after
/// decompression): a bigger file (a gzip bomb) is skipped with a warning.
pub fn load_capped(args: &[DumpArg], keep: &Keep, max_bytes: u64) -> Result<Dataset, DumpError> {
    let mut plan = plan_args(args)?;
    plan.max_bytes = Some(max_bytes);
    run_plan(plan, keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_arg_forms() {
        assert_eq!(
            DumpArg::parse("etcd:m1=/x/y.prom").unwrap(),
            DumpArg {
                name: Some("m1".into()),
                role: Some(Role::Etcd),
                path: "/x/y.prom".into()
            }
        );
        assert_eq!(DumpArg::parse("a=/x").unwrap().name.as_deref(), Some("a"));
        assert_eq!(DumpArg::parse("/some/a=b/c").unwrap().name, None);
        assert!(DumpArg::parse("db:x=/y")
            .unwrap_err()
            .to_string()
            .contains("unknown role `db`"));
    }
}
