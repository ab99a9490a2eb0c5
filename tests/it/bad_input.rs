//! The bad-input table: every case under `testdata/bad/` (plus a few built at
//! test time: permission denied, symlink loops, huge lines) runs through the real
//! binary, which must not panic, must exit with the documented code, and must
//! say which file (and line) is wrong and how. `testdata/bad/README.md` lists
//! the cases.

use crate::support;

use std::path::{Path, PathBuf};

use support::cptriage;

/// One row of the table.
struct Case {
    name: &'static str,
    args: Vec<String>,
    code: i32,
    /// Substrings of stdout + stderr (the JSON report's `warnings` for data problems).
    needles: Vec<String>,
}

fn case(name: &'static str, args: &[&str], code: i32, needles: &[&str]) -> Case {
    Case {
        name,
        args: args.iter().map(|s| s.to_string()).collect(),
        code,
        needles: needles.iter().map(|s| s.to_string()).collect(),
    }
}

fn dump(name: &'static str, file: &str, code: i32, needles: &[&str]) -> Case {
    let path = format!("testdata/bad/dumps/{file}");
    let mut c = case(name, &["diagnose", "--dump", &path, "-o", "json"], code, needles);
    c.needles.push(path);
    c
}

fn capture(name: &'static str, dir: &str, code: i32, needles: &[&str]) -> Case {
    let path = format!("testdata/bad/captures/{dir}");
    let mut c = case(name, &["diagnose", "--dump", &path, "-o", "json"], code, needles);
    c.needles.push(path);
    c
}

fn rules(name: &'static str, file: &str, needles: &[&str]) -> Case {
    let path = format!("testdata/bad/rules/{file}");
    let mut c = case(
        name,
        &[
            "diagnose",
            "--dump",
            "testdata/bad/dumps/empty.prom",
            "--rules",
            &path,
        ],
        2,
        needles,
    );
    c.needles.push(path);
    c
}

fn kubeconfig(name: &'static str, file: &str, context: Option<&str>, needles: &[&str]) -> Case {
    let path = format!("testdata/bad/kubeconfigs/{file}");
    let mut args = vec!["diagnose", "--live", "--kubeconfig", &path];
    if let Some(c) = context {
        args.extend(["--context", c]);
    }
    let mut c = case(name, &args, 2, needles);
    c.needles.push(path);
    c
}

fn table() -> Vec<Case> {
    vec![
        // Dumps.
        dump("zero-byte dump", "empty.prom", 3, &["empty file"]),
        dump("binary dump", "binary.prom", 3, &["line 1: not a Prometheus text exposition (binary data"]),
        dump("truncated gzip", "truncated.prom.gz", 3, &["corrupt gzip data"]),
        dump("gzip magic, garbage inside", "gzip-garbage.prom.gz", 3, &["corrupt gzip data: invalid gzip header"]),
        dump("not an exposition", "garbage.txt", 3, &["line 1: not a Prometheus text exposition"]),
        dump(
            "malformed lines are named",
            "bad-lines.prom",
            3,
            &["bad-lines.prom: line 3: invalid escape sequence", "bad-lines.prom: line 4: invalid label name"],
        ),
        // A lone request counter cannot say that clients are fine: the latency
        // is not read, so the answer is inconclusive (exit 3), never healthy.
        dump("NaN counter", "nan-counter.prom", 3, &["line 2: counter `apiserver_request_total{code=\\\"200\\\",verb=\\\"GET\\\"}` is NaN", "cannot say that apiserver is healthy"]),
        dump("negative counter", "negative-counter.prom", 3, &["cannot say that apiserver is healthy", "line 2: counter `apiserver_request_total{code=\\\"200\\\",verb=\\\"GET\\\"}` is negative"]),
        dump("duplicate series", "duplicate-series.prom", 3, &["cannot say that apiserver is healthy", "line 3: duplicate series", "(also at line 2); the later value wins"]),
        dump("timestamps in the future", "future-timestamps.prom", 3, &["cannot say that apiserver is healthy", "2100-01-01T00:00:00Z", "is in the future"]),
        dump(
            "timestamps at the ends of int64",
            "extreme-timestamps.prom",
            // Degraded, cause undecided: these dumps have no etcd latency.
            5,
            &["is in the future", "samples carry explicit timestamps more than 60 s from the snapshot time"],
        ),
        dump("bytes after the gzip data", "trailing-garbage.prom.gz", 3, &["trailing-garbage.prom.gz: 17 bytes after the end of the gzip data ignored", "\"inconclusive\""]),
        dump("timestamps at the Unix epoch", "epoch-timestamps.prom", 5, &["snapshot time 1970-01-01T00:00:00Z (from the samples' timestamps) is at or before the Unix epoch"]),
        dump("histogram bucket le=NaN", "nan-le.prom", 3, &["nan-le.prom: line 5: bucket `le=\\\"NaN\\\"` in histogram series", "histogram_quantile over it is NaN"]),
        dump("only comments", "comments-only.prom", 3, &["comments-only.prom: no samples (only comments, HELP/TYPE lines or blank lines)", "no axis is lit, but the data cannot say that"]),
        case("no such file", &["diagnose", "--dump", "testdata/bad/dumps/nope.prom"], 2, &["`testdata/bad/dumps/nope.prom`: no such file or directory"]),
        case("unknown role prefix", &["diagnose", "--dump", "db:x=testdata/bad/dumps/nope.prom"], 2, &["`db:x=testdata/bad/dumps/nope.prom`: unknown role `db`"]),
        // Captures and their manifests.
        capture("manifest of another format version", "wrong-format", 2, &["manifest.yaml:1:1`: invalid capture manifest: unsupported capture format `cptriage/capture/v9`"]),
        capture("manifest that is not YAML", "manifest-bad-yaml", 2, &["manifest.yaml:4:9`: invalid capture manifest: targets[0].name: invalid type: sequence, expected a string"]),
        capture("manifest with an unknown key", "manifest-unknown-key", 2, &["manifest.yaml:6:1`: invalid capture manifest: unknown field `retention`"]),
        capture("manifest with an unknown role", "manifest-unknown-role", 2, &["manifest.yaml:4:3`: invalid capture manifest: targets[0]: unknown role `database`"]),
        capture("zero-byte manifest", "manifest-empty", 2, &["manifest.yaml:1:1`: invalid capture manifest: missing field `format`"]),
        capture("binary manifest", "manifest-binary", 3, &["manifest.yaml`: cannot read: stream did not contain valid UTF-8"]),
        capture("manifest without targets", "manifest-no-targets", 2, &["manifest.yaml:1:1`: invalid capture manifest: missing field `targets`"]),
        capture("target name escaping the capture", "path-escape", 2, &["manifest.yaml:4:3`: invalid capture manifest: target name `../../dumps` is not a plain directory name"]),
        capture("target listed twice", "duplicate-target", 2, &["manifest.yaml:6:3`: invalid capture manifest: target name `etcd-0` is listed twice"]),
        capture("target without its directory", "missing-target-dir", 3, &["no usable snapshot", "missing-target-dir/etcd-0: target listed in the manifest has no snapshot directory"]),
        capture("snapshot names that are not times", "names-not-times", 3, &["etcd-0/README: not recognised (no time in the name"]),
        capture("truncated gzip snapshot", "truncated-gzip-snapshot", 3, &["etcd-0/1767225630000.prom.gz: corrupt gzip data"]),
        capture("every snapshot empty", "all-snapshots-empty", 3, &["no usable snapshot", "etcd-0/1767225600000.prom: empty file"]),
        capture("manifest nested 80 deep", "deep-manifest", 2, &["deep-manifest/manifest.yaml:3:127`: invalid capture manifest: YAML nested more than 64 levels deep"]),
        capture("snapshot with bytes after its gzip data", "gzip-trailing-bytes", 3, &["etcd-0/1767225615000.prom.gz: 529 bytes after the end of the gzip data ignored"]),
        capture("failure of an unknown target", "failure-unknown-target", 3, &["failures name target `etcd-9`, which the manifest does not list"]),
        // Rule files.
        rules("rule naming an unknown node", "unknown-node.yaml", &["unknown-node.yaml:29:5: error: node `raft_q` refers to unknown child `etcd-rafts`"]),
        rules("cycle in the tree", "cycle.yaml", &["cycle.yaml:20:9: error: the tree has a cycle: symptom → raft_q → symptom"]),
        rules("rule file of another version", "wrong-version.yaml", &["wrong-version.yaml:2:1: error: unsupported rule format version 7"]),
        rules("rule file that is not YAML", "bad-yaml.yaml", &["bad-yaml.yaml:18:24: error: signals[1].threshold.below: invalid type"]),
        rules("bad PromQL in a rule", "bad-promql.yaml", &["bad-promql.yaml:17:11: error: signal `no_leader` expression: invalid PromQL"]),
        rules("rule naming an unknown signal", "unknown-signal.yaml", &["unknown-signal.yaml:28:11: error: node `raft_q` uses unknown signal `no_leaders`"]),
        rules("signal quiet after an unknown signal", "quiet-after-unknown.yaml", &["quiet-after-unknown.yaml:19:27: error: signal `no_leader` is quiet after unknown signal `no_leaders`"]),
        rules("signals quiet after each other", "quiet-after-chain.yaml", &["quiet-after-chain.yaml:13:27: error: signal `errors` is quiet after `no_leader`, which is itself or quiet after another"]),
        rules("leaf dated by an unknown signal", "early-signs-unknown.yaml", &["early-signs-unknown.yaml:39:29: error: leaf `etcd-raft` is dated by unknown signal `slow_applies`"]),
        rules("zero-byte rule file", "empty.yaml", &["empty.yaml:1:1: error: missing field `version`"]),
        rules("expression nested 300 deep", "deep-expression.yaml", &["deep-expression.yaml:17:11: error: signal `no_leader` expression: invalid PromQL: PromQL nested more than 256 levels deep; cptriage refuses deeper nesting (at line 1, column 1028)"]),
        rules("chain of 1000 unary minus", "unary-chain.yaml", &["unary-chain.yaml:17:12: error: signal `no_leader` expression: invalid PromQL: PromQL nested more than 256 levels deep"]),
        rules("YAML nested 100 deep", "deep-yaml.yaml", &["deep-yaml.yaml:15:262: error: YAML nested more than 64 levels deep"]),
        rules("binary rule file", "binary.yaml", &["cannot read rule file `testdata/bad/rules/binary.yaml`: stream did not contain valid UTF-8"]),
        // Kubeconfigs.
        kubeconfig("context that is not there", "one-context.yaml", Some("nope"), &["`: context `nope` not found in the kubeconfig"]),
        kubeconfig("kubeconfig that is not YAML", "bad-yaml.yaml", None, &["bad-yaml.yaml:7:1`: invalid kubeconfig: did not find expected ',' or '}'"]),
        kubeconfig("cluster without server", "no-server.yaml", None, &["cluster `prod` has no `server`"]),
        kubeconfig("CA that is not base64", "bad-base64.yaml", None, &["`certificate-authority-data` is not valid base64"]),
        kubeconfig("context naming an unknown cluster", "unknown-cluster.yaml", None, &["context `prod` names cluster `staging`, which is not in the kubeconfig"]),
        kubeconfig("context naming an unknown user", "unknown-user.yaml", None, &["context `prod` names user `root`, which is not in the kubeconfig"]),
        kubeconfig("basic authentication", "basic-auth.yaml", None, &["user `admin` uses basic authentication"]),
        kubeconfig("server that is not a URL", "bad-server.yaml", None, &["invalid server URL `not a url`"]),
        kubeconfig("no current context", "no-current-context.yaml", None, &["kubeconfig has no current context; name one with `--context`"]),
        kubeconfig("CA file missing", "missing-ca-file.yaml", None, &["missing-ca-file.yaml`: `certificate-authority`: cannot read `testdata/bad/kubeconfigs/missing-ca.crt`"]),
        kubeconfig(
            "two YAML documents in a kubeconfig",
            "two-documents.yaml",
            None,
            &["two-documents.yaml:13:1`: invalid kubeconfig: deserializing from YAML containing more than one document is not supported"],
        ),
        kubeconfig("user that is a string (a pasted token)", "string-user.yaml", None, &["string-user.yaml:13:9`: invalid kubeconfig: users[0].user: invalid type: a string (not shown), expected struct RawUser"]),
        kubeconfig("kubeconfig nested 200 deep", "deep.yaml", None, &["deep.yaml:2:74`: invalid kubeconfig: YAML nested more than 64 levels deep"]),
        kubeconfig("server URL with a password", "server-with-password.yaml", None, &["invalid server URL `https://<redacted>@exa mple`"]),
        kubeconfig("binary kubeconfig", "binary.yaml", None, &["cannot read kubeconfig: not valid UTF-8 text"]),
    ]
}

/// Runs one case; the problems found, if any.
fn run(c: &Case, env: &[(&str, &str)]) -> Result<(), String> {
    let args: Vec<&str> = c.args.iter().map(|s| s.as_str()).collect();
    let out = cptriage(&args, env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let both = format!("{stdout}\n{stderr}");
    // For a JSON report, its status and warnings are what matters.
    let shown = match serde_json::from_str::<serde_json::Value>(&stdout) {
        Ok(v) => format!("status {} warnings {:#}", v["status"], v["warnings"]),
        Err(_) => stdout.chars().take(2000).collect(),
    };
    let mut problems = Vec::new();
    if stderr.contains("panicked") || out.status.code() == Some(101) {
        problems.push("panicked".to_string());
    }
    if out.status.code() != Some(c.code) {
        problems.push(format!("exit code {:?}, expected {}", out.status.code(), c.code));
    }
    for n in &c.needles {
        if !both.contains(n.as_str()) {
            problems.push(format!("`{n}` not in the output"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "case `{}`: {}\nstdout: {shown}\nstderr: {stderr}",
            c.name,
            problems.join("; ")
        ))
    }
}

#[track_caller]
fn check(c: &Case, env: &[(&str, &str)]) {
    if let Err(e) = run(c, env) {
        panic!("{e}");
    }
}

#[test]
fn bad_inputs_fail_cleanly_and_say_where() {
    let t = table();
    assert!(t.len() >= 30, "{} cases", t.len());
    let mut names = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for c in &t {
        assert!(names.insert(c.name), "duplicate case name `{}`", c.name);
        if let Err(e) = run(c, &[]) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        t.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_case_file_is_in_the_readme() {
    let readme = std::fs::read_to_string("testdata/bad/README.md").expect("testdata/bad/README.md");
    for kind in ["dumps", "captures", "rules", "kubeconfigs"] {
        for e in std::fs::read_dir(Path::new("testdata/bad").join(kind)).expect("read testdata/bad") {
            let p = e.expect("entry").path();
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            assert!(
                readme.contains(&format!("{kind}/{n}")),
                "testdata/bad/README.md does not describe `{kind}/{n}`"
            );
        }
    }
}

/// A scratch directory for cases that cannot be committed (modes, links, size).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn running_as_root() -> bool {
    // Root ignores file modes, so "permission denied" cannot be provoked.
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn unreadable_dump_and_capture_directory() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch();
    let f = d.path().join("secret.prom");
    std::fs::write(&f, "etcd_server_has_leader 1\n").expect("write");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let cap = d.path().join("cap");
    std::fs::create_dir_all(cap.join("etcd-0")).expect("mkdir");
    std::fs::write(
        cap.join("manifest.yaml"),
        "format: cptriage/capture/v1\ntargets:\n- {name: etcd-0, role: etcd}\n",
    )
    .expect("write");
    std::fs::set_permissions(cap.join("etcd-0"), std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let (fs, caps) = (path_str(&f), path_str(&cap));
    let cases = [
        case(
            "unreadable dump",
            &["diagnose", "--dump", &fs],
            3,
            &[&fs, "Permission denied"],
        ),
        case(
            "unreadable target directory",
            &["diagnose", "--dump", &caps],
            3,
            &[&caps, "etcd-0", "Permission denied"],
        ),
    ];
    if running_as_root() {
        // Root reads mode-000 files: only check that nothing panics.
        for c in &cases {
            let args: Vec<&str> = c.args.iter().map(|s| s.as_str()).collect();
            let out = cptriage(&args, &[]);
            assert_ne!(out.status.code(), Some(101), "{}", c.name);
            assert!(
                !String::from_utf8_lossy(&out.stderr).contains("panicked"),
                "{}",
                c.name
            );
        }
    } else {
        for c in &cases {
            check(c, &[]);
        }
    }
    // Restore modes so the temporary directory can be removed.
    let _ = std::fs::set_permissions(cap.join("etcd-0"), std::fs::Permissions::from_mode(0o755));
}

#[test]
fn symlink_loops() {
    let d = scratch();
    let a = d.path().join("a.prom");
    let b = d.path().join("b.prom");
    std::os::unix::fs::symlink(&b, &a).expect("symlink");
    std::os::unix::fs::symlink(&a, &b).expect("symlink");
    let dir = d.path().join("dir");
    std::fs::create_dir(&dir).expect("mkdir");
    std::os::unix::fs::symlink(&dir, dir.join("self")).expect("symlink");
    std::os::unix::fs::symlink(&a, dir.join("1767225600000.prom")).expect("symlink");
    let (aa, dd) = (path_str(&a), path_str(&dir));
    check(
        &case(
            "symlink loop as a dump",
            &["diagnose", "--dump", &aa],
            3,
            &[&aa, "Too many levels of symbolic links"],
        ),
        &[],
    );
    check(
        &case(
            "directory with a link to itself and a looping file",
            &["diagnose", "--dump", &dd],
            3,
            &["1767225600000.prom: cannot read: Too many levels of symbolic links"],
        ),
        &[],
    );
}

#[test]
fn huge_lines_and_label_values() {
    let d = scratch();
    let line = d.path().join("huge-line.prom");
    let mut text = String::from("# TYPE etcd_server_has_leader gauge\netcd_server_has_leader{x=\"");
    text.push_str(&"a".repeat(8 << 20));
    text.push('\n');
    std::fs::write(&line, &text).expect("write");
    let label = d.path().join("huge-label.prom");
    let mut text =
        String::from("# TYPE apiserver_request_total counter\napiserver_request_total{code=\"200\",verb=\"");
    text.push_str(&"GET".repeat(1 << 20));
    text.push_str("\"} 5\n");
    std::fs::write(&label, &text).expect("write");
    let (l, v): (PathBuf, PathBuf) = (line, label);
    let (ls, vs) = (path_str(&l), path_str(&v));
    check(
        &case(
            "an 8 MiB unterminated line",
            &["diagnose", "--dump", &ls, "-o", "json"],
            3,
            &[&format!("{ls}: line 2: unterminated label value")],
        ),
        &[],
    );
    check(
        &case(
            "a 3 MiB label value",
            &["diagnose", "--dump", &vs, "-o", "json"],
            3,
            &[
                "\"target\": \"huge-label\"",
                "cannot say that apiserver is healthy",
            ],
        ),
        &[],
    );
}

#[test]
fn kubeconfig_naming_an_endless_file_is_bounded() {
    let d = scratch();
    let k = d.path().join("zero.yaml");
    std::fs::write(
        &k,
        "current-context: t\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', certificate-authority: /dev/zero}\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: x}\n",
    )
    .expect("write");
    let ks = path_str(&k);
    check(
        &case(
            "CA file that never ends",
            &["diagnose", "--live", "--kubeconfig", &ks],
            2,
            &[&format!(
                "`{ks}`: `certificate-authority`: cannot read `/dev/zero`: larger than 16 MiB"
            )],
        ),
        &[],
    );
    check(
        &case(
            "kubeconfig that never ends",
            &["diagnose", "--live", "--kubeconfig", "/dev/zero"],
            2,
            &["`/dev/zero`: cannot read kubeconfig: larger than 16 MiB"],
        ),
        &[],
    );
}

/// `rules check`, `diagnose --rules`, `tree --rules` and `rules export` refuse
/// the same rule files with the same message: a file `rules check` accepts
/// never crashes the others.
#[test]
fn every_rules_command_refuses_the_same_files() {
    for f in [
        "deep-expression.yaml",
        "unary-chain.yaml",
        "deep-yaml.yaml",
        "bad-promql.yaml",
        "cycle.yaml",
    ] {
        let path = format!("testdata/bad/rules/{f}");
        let check = cptriage(&["rules", "check", &path], &[]);
        let first = String::from_utf8_lossy(&check.stderr)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        assert_eq!(check.status.code(), Some(2), "{f}: {first}");
        for args in [
            vec![
                "diagnose",
                "--dump",
                "testdata/bad/dumps/empty.prom",
                "--rules",
                &path,
            ],
            vec!["tree", "--rules", &path],
            vec!["rules", "export", "--format", "prometheus", "--rules", &path],
        ] {
            let out = cptriage(&args, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{f} {args:?}: {err}");
            assert!(err.contains(&first), "{f} {args:?}: `{first}` not in\n{err}");
        }
    }
}

/// Nesting that used to overflow the stack (exit 134) or take quadratic time:
/// each is refused with its location, quickly.
#[test]
fn deep_nesting_is_refused_quickly_with_a_location() {
    let d = scratch();
    let dump = "testdata/bad/dumps/negative-counter.prom";
    let t0 = std::time::Instant::now();
    // `query` with 20,000 nested calls and with 300,000 parentheses.
    for (what, expr) in [
        (
            "20k nested abs()",
            format!("{}x{}", "abs(".repeat(20_000), ")".repeat(20_000)),
        ),
        (
            "300k parentheses",
            format!("{}x{}", "(".repeat(300_000), ")".repeat(300_000)),
        ),
        ("80k unary minus", format!("{}x", "-".repeat(80_000))),
        ("10k additions", vec!["1"; 10_000].join("+")),
    ] {
        let f = d.path().join("expr.txt");
        std::fs::write(&f, &expr).expect("write");
        // Too long for one argument on some systems: pass it through a rule file too.
        if expr.len() < 100_000 {
            let out = cptriage(&["query", "--dump", dump, "--", &expr], &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "query {what}: {err}");
            assert!(
                err.contains("PromQL nested more than 256 levels deep"),
                "query {what}: {err}"
            );
            assert!(err.contains("(at line 1, column "), "query {what}: {err}");
        }
        let rules = std::fs::read_to_string("testdata/bad/rules/deep-expression.yaml")
            .expect("read")
            .lines()
            .map(|l| {
                if l.starts_with("    expr: abs(") {
                    format!("    expr: '{expr}'")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let rf = d.path().join("deep.yaml");
        std::fs::write(&rf, rules).expect("write");
        let rs = path_str(&rf);
        for args in [
            vec!["rules", "check", &rs],
            vec!["diagnose", "--dump", dump, "--rules", &rs],
        ] {
            let out = cptriage(&args, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {what}: {err}");
            assert!(err.contains("deep.yaml:17:"), "{what}: {err}");
            assert!(
                err.contains("PromQL nested more than 256 levels deep"),
                "{what}: {err}"
            );
        }
    }
    // YAML 100,000 levels deep (flow mappings were quadratic: 86 s) in a rule
    // file, a kubeconfig and a manifest.
    let deep = format!(
        "version: 1\nroot: {}1{}\n",
        "{a: ".repeat(100_000),
        "}".repeat(100_000)
    );
    let f = d.path().join("deep-yaml.yaml");
    std::fs::write(&f, &deep).expect("write");
    let fs = path_str(&f);
    let cap = d.path().join("cap");
    std::fs::create_dir(&cap).expect("mkdir");
    std::fs::write(cap.join("manifest.yaml"), &deep).expect("write");
    let caps = path_str(&cap);
    for (args, code) in [
        (vec!["rules", "check", fs.as_str()], 2),
        (vec!["diagnose", "--live", "--kubeconfig", fs.as_str()], 2),
        (vec!["diagnose", "--dump", caps.as_str()], 2),
    ] {
        let out = cptriage(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.contains(":2:") && err.contains("YAML nested more than 64 levels deep"),
            "{args:?}: {err}"
        );
    }
    // All of the above (18 runs) in well under the time one used to take.
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        t0.elapsed()
    );
}

/// A capture whose `manifest.yaml` is a symbolic link (to `/etc/shadow`, say)
/// is refused without reading the target.
#[test]
fn a_linked_manifest_is_not_followed() {
    let d = scratch();
    let secret = d.path().join("shadow");
    std::fs::write(
        &secret,
        "root:$6$notArealHash$abcdefghijklmnopqrstuvwxyz0123456789:19000:0:99999:7:::\n",
    )
    .expect("write");
    let cap = d.path().join("cap");
    std::fs::create_dir_all(cap.join("etcd-0")).expect("mkdir");
    std::os::unix::fs::symlink(&secret, cap.join("manifest.yaml")).expect("symlink");
    let caps = path_str(&cap);
    let out = cptriage(&["diagnose", "--dump", &caps], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("manifest.yaml:1:1`: invalid capture manifest: the manifest is a symbolic link"),
        "{err}"
    );
    assert!(!err.contains("root:") && !err.contains("notArealHash"), "{err}");
}
