//! etcd logs as evidence (`diagnose --logs`), on the lab's real logs
//! (testdata/lab/<run>/logs/, etcd 3.4 capnslog text and 3.5 zap JSON, kept
//! by `cargo lab run` and exported with the recordings):
//!
//! - alone, the logs of every fault name etcd, the faulty member and an
//!   onset within [−5 s, +20 s] of the injection, and the healthy runs raise
//!   no axis (a quiet log is inconclusive, never healthy);
//! - beside the recording, the verdict is the metrics' own, and the logs
//!   confirm it or say why not;
//! - must-gather and `/var/log/pods` trees built from the same lines (the
//!   runtime's prefix, lines split `P`/`F`, rotated gzip files) give the same
//!   verdict as the plain files;
//! - a single metrics snapshot beside the logs gives a dated verdict;
//! - bad input is counted and named by `file:line`, the rest read.

use std::io::Write;
use std::path::{Path, PathBuf};

use cptriage::source::logs::{self, line, LogsConfig};
use cptriage::store::Store;
use cptriage_lab::judge::{judge, judge_logs, Outcome};
use cptriage_lab::truth::{Truth, LOGS_DIR, RECORDING_DIR, TRUTH_FILE};

use crate::support::run;

fn lab() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/lab")
}

/// The committed runs that carry their members' logs.
fn runs_with_logs() -> Vec<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(lab())
        .expect("testdata/lab")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(TRUTH_FILE).is_file() && p.join(LOGS_DIR).is_dir())
        .collect();
    runs.sort();
    runs
}

fn truth(run: &Path) -> Truth {
    Truth::read(&run.join(TRUTH_FILE)).unwrap()
}

#[track_caller]
fn verdict(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["diagnose"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let out = run(&all);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: no JSON verdict ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn root(v: &serde_json::Value) -> (String, String, Vec<String>, String) {
    let rc = &v["root_cause"];
    (
        v["status"].as_str().unwrap_or("").to_string(),
        format!(
            "{}/{}",
            rc["axis"].as_str().unwrap_or("-"),
            rc["sub_axis"].as_str().unwrap_or("-")
        ),
        rc["instances"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
        rc["onset"].as_str().unwrap_or("-").to_string(),
    )
}

#[test]
fn lab_logs_cover_every_fault_kind_on_two_etcd_versions() {
    let runs = runs_with_logs();
    let truths: Vec<Truth> = runs.iter().map(|r| truth(r)).collect();
    for scenario in [
        "healthy-noisy",
        "fsync-slow-leader",
        "fsync-slow-follower",
        "sigstop-leader",
        "sigkill-leader",
        "quorum-loss",
        "nospace",
        "compaction-defrag",
    ] {
        let mut versions: Vec<&str> = truths
            .iter()
            .filter(|t| t.scenario == scenario)
            .map(|t| &t.etcd_version[..3])
            .collect();
        versions.sort();
        versions.dedup();
        assert_eq!(versions, ["3.4", "3.5"], "{scenario}: logs of etcd {versions:?}");
    }
}

#[test]
fn lab_logs_alone_name_etcd_the_member_and_the_onset() {
    let mut failed = Vec::new();
    for r in runs_with_logs() {
        let t = truth(&r);
        let v = verdict(&["--logs", &s(&r.join(LOGS_DIR))]);
        let j = judge_logs(&t, &v);
        if j.pass() != t.known_failure_logs.is_none() {
            failed.push(format!(
                "{}: {} (known failure: {:?})",
                r.display(),
                j.failures().join("; "),
                t.known_failure_logs
            ));
        }
        // What was read is said: every member's file, no bad line.
        let files = v["logs"]["files"].as_array().unwrap();
        assert_eq!(files.len(), 3, "{}: {files:?}", r.display());
        assert_eq!(v["logs"]["bad_lines"], 0, "{}", r.display());
        if t.expect.status == "degraded" && t.known_failure_logs.is_none() {
            // The root cause's first log line is shown, dated to the millisecond.
            let ev = v["logs"]["evidence"].as_array().unwrap();
            assert!(!ev.is_empty(), "{}: no log line shown", r.display());
        }
    }
    assert!(failed.is_empty(), "logs alone:\n{}", failed.join("\n"));
}

/// Logs that point at another member than the metrics' cause do not confirm
/// it: the starved follower's log (m0, most of the cluster's slow requests)
/// given as m1's, and m1's as m0's.
#[test]
fn logs_lit_on_another_member_do_not_confirm_the_cause() {
    let r = lab().join("long-cpu-starved-follower-etcd3.4-1");
    let rec = s(&r.join(RECORDING_DIR));
    let logs = r.join(LOGS_DIR);
    let both = verdict(&["--dump", &rec, "--logs", &s(&logs)]);
    let texts = |v: &serde_json::Value| -> Vec<String> {
        v["corroboration"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(both["root_cause"]["instances"], serde_json::json!(["m0"]));
    let t = texts(&both);
    assert!(
        t.iter()
            .any(|x| x.starts_with("the logs confirm etcd/cpu") && x.contains("on m0")),
        "{t:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    for (from, to) in [("m0", "m1"), ("m1", "m0"), ("m2", "m2")] {
        std::fs::copy(
            logs.join(format!("{from}.log.gz")),
            dir.path().join(format!("{to}.log.gz")),
        )
        .unwrap();
    }
    let swapped = verdict(&["--dump", &rec, "--logs", &s(dir.path())]);
    assert_eq!(swapped["root_cause"]["instances"], serde_json::json!(["m0"]));
    let c = &swapped["corroboration"][0];
    assert_eq!(c["kind"], "does-not-confirm", "{c}");
    let text = c["text"].as_str().unwrap();
    assert!(
        text.starts_with("the logs do not confirm etcd/cpu on m0:")
            && text.contains("on m1")
            && text.ends_with("not on m0"),
        "{text}"
    );
}

/// From logs alone, a member cut off calls elections while its peers log it
/// unreachable: the network leaf, on that member. A stopped leader's
/// followers campaign too, and a lost quorum's survivor: no one logs them
/// unreachable, and those runs stay raft.
#[test]
fn logs_alone_tell_a_cut_off_member_from_a_stopped_leader() {
    let (mut cut, mut stopped) = (0, 0);
    for r in runs_with_logs() {
        let n = r.file_name().unwrap().to_string_lossy().to_string();
        let t = truth(&r);
        let v = verdict(&["--logs", &s(&r.join(LOGS_DIR))]);
        let rc = &v["root_cause"];
        if n.contains("partition") {
            assert_eq!(rc["leaf"], "etcd-network", "{n}: {rc}");
            assert_eq!(rc["instances"], serde_json::json!(t.members), "{n}: {rc}");
            let why = rc["localisation"].as_str().unwrap_or_default();
            assert!(
                why.contains("calling elections while its peers logged it unreachable"),
                "{n}: {why}"
            );
            cut += 1;
        } else if ["sigstop", "sigkill", "quorum-loss"]
            .iter()
            .any(|f| n.contains(f))
        {
            assert_eq!(rc["leaf"], "etcd-raft", "{n}: {rc}");
            stopped += 1;
        }
    }
    assert!(
        cut >= 2 && stopped >= 6,
        "{cut} partitions, {stopped} stopped members with logs"
    );
}

/// Whether the leaf lists a log signal in its evidence: only then can the
/// logs confirm it (a write burst, etcd/load, is seen in metrics alone).
fn leaf_reads_logs(leaf: &serde_json::Value) -> bool {
    use cptriage::rules::load::RuleSet;
    use cptriage::rules::model::SignalRole;
    let rules = RuleSet::default_rules().expect("shipped rules");
    let Some(l) = leaf.as_str().and_then(|id| rules.leaf(id)) else {
        return false;
    };
    rules.leaves[l]
        .evidence
        .iter()
        .filter_map(|id| rules.signal(id))
        .any(|k| rules.signals[k].def.role == SignalRole::Logs)
}

#[test]
fn lab_logs_beside_the_recording_keep_the_verdict_and_confirm_it() {
    let mut failed = Vec::new();
    let mut mended = Vec::new();
    for r in runs_with_logs() {
        let t = truth(&r);
        let rec = s(&r.join(RECORDING_DIR));
        let metrics = verdict(&["--dump", &rec]);
        let both = verdict(&["--dump", &rec, "--logs", &s(&r.join(LOGS_DIR))]);
        let j = judge(&t, &both);
        // Logs never lose what the recording gets right; they may mend a
        // known failure (an onset the metrics show late: below).
        if t.known_failure.is_none() && !j.pass() {
            failed.push(format!("{}: {}", r.display(), j.failures().join("; ")));
        }
        if t.known_failure.is_some() && j.pass() {
            mended.push(r.clone());
        }
        let (ms, ma, mi, mo) = root(&metrics);
        let (bs, ba, bi, bo) = root(&both);
        // Logs may date the root cause earlier, never later.
        assert!(
            bo <= mo,
            "{}: logs moved the onset from {mo} to {bo}",
            r.display()
        );
        assert_eq!(
            (ms, ma, mi),
            (bs, ba, bi),
            "{}: the logs changed the verdict",
            r.display()
        );
        let failing = both["status"] == "degraded" || both["status"] == "recovered";
        if t.known_failure.is_none() && failing && leaf_reads_logs(&both["root_cause"]["leaf"]) {
            let c = both["corroboration"].as_array().cloned().unwrap_or_default();
            assert!(
                c.iter()
                    .any(|c| c["text"].as_str().is_some_and(|x| x.starts_with("the logs "))),
                "{}: the logs say nothing of the root cause: {c:?}",
                r.display()
            );
        }
    }
    assert!(failed.is_empty(), "logs beside metrics:\n{}", failed.join("\n"));
    // A known failure the logs mend is one the metrics date late (the logs
    // say when a member lost its leader or slowed, to the second): it fails
    // on onset alone. (The delayed members and the partitioned follower were
    // such runs until the metrics dated them right themselves.)
    for r in &mended {
        let t = truth(r);
        let j = judge(&t, &verdict(&["--dump", &s(&r.join(RECORDING_DIR))]));
        let failing: Vec<&str> = j
            .checks
            .iter()
            .filter(|c| c.outcome == Outcome::Fail)
            .map(|c| c.criterion)
            .collect();
        assert_eq!(failing, vec!["onset"], "{}: {:?}", r.display(), j.failures());
    }
}

/// The lines of a run's member log, decompressed.
fn lines_of(p: &Path) -> Vec<String> {
    let raw = std::fs::read(p).unwrap();
    let mut text = String::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(&raw[..])
        .read_to_string(&mut text)
        .unwrap();
    text.lines().map(str::to_string).collect()
}

/// An RFC 3339 time with nanoseconds, as the container runtime and
/// `--timestamps` write it.
fn rfc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S%.9fZ")
        .to_string()
}

fn gz(path: &Path, text: &str) {
    let mut e =
        flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap();
}

/// Writes each member's log of `run` as a must-gather
/// (`namespaces/openshift-etcd/pods/etcd-<m>/etcd/etcd/logs/{previous,current}.log`,
/// `--timestamps` prefix, beside the pods' other containers and files) and
/// as a node's `/var/log/pods` (`openshift-etcd_etcd-<m>_<uid>/etcd/0.log`,
/// the runtime's prefix, long lines split `P`…`F`, the first half rotated
/// into a gzip file).
fn layouts(run: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let mg = dir.join("must-gather.local.123/quay-io-openshift-must-gather-sha256-0");
    let pods = dir.join("node/var/log/pods");
    for e in std::fs::read_dir(run.join(LOGS_DIR)).unwrap() {
        let p = e.unwrap().path();
        let m = p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".log.gz")
            .to_string();
        // Each line at its own time (a line without one, at the last, or
        // the first timed line's).
        let lines = lines_of(&p);
        let mut last = lines
            .iter()
            .find_map(|l| line::parse(l).ok().and_then(|x| x.time))
            .unwrap();
        let timed: Vec<(i64, String)> = lines
            .into_iter()
            .map(|l| {
                let t = line::parse(&l).ok().and_then(|x| x.time).unwrap_or(last);
                last = t;
                (t, l)
            })
            .collect();
        let half = timed.len() / 2;
        let pod = mg.join(format!("namespaces/openshift-etcd/pods/etcd-{m}"));
        let logs = pod.join("etcd/etcd/logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::create_dir_all(pod.join("etcdctl/etcdctl/logs")).unwrap();
        std::fs::write(
            pod.join("etcdctl/etcdctl/logs/current.log"),
            "2026-01-01T00:00:00Z sh-4.4$\n",
        )
        .unwrap();
        std::fs::write(pod.join(format!("etcd-{m}.yaml")), "kind: Pod\n").unwrap();
        let kubectl = |part: &[(i64, String)]| -> String {
            part.iter().map(|(t, l)| format!("{} {l}\n", rfc(*t))).collect()
        };
        std::fs::write(logs.join("previous.log"), kubectl(&timed[..half])).unwrap();
        std::fs::write(logs.join("current.log"), kubectl(&timed[half..])).unwrap();
        let c = pods.join(format!(
            "openshift-etcd_etcd-{m}_5e0c3e58-9a1b-4c2d-8e7f-0123456789ab/etcd"
        ));
        std::fs::create_dir_all(&c).unwrap();
        let cri = |part: &[(i64, String)]| -> String {
            let mut out = String::new();
            for (t, l) in part {
                // Lines over 200 bytes split as the runtime splits long lines.
                let mut rest = l.as_str();
                while rest.len() > 200 {
                    let mut cut = 200;
                    while !rest.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    out.push_str(&format!("{} stderr P {}\n", rfc(*t), &rest[..cut]));
                    rest = &rest[cut..];
                }
                out.push_str(&format!("{} stderr F {rest}\n", rfc(*t)));
            }
            out
        };
        gz(&c.join("0.log.20261206-040000.gz"), &cri(&timed[..half]));
        std::fs::write(c.join("0.log"), cri(&timed[half..])).unwrap();
    }
    std::fs::create_dir_all(mg.join("cluster-scoped-resources")).unwrap();
    std::fs::write(mg.join("cluster-scoped-resources/nodes.yaml"), "kind: List\n").unwrap();
    (
        mg,
        pods.parent()
            .unwrap()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf(),
    )
}

#[test]
fn must_gather_and_var_log_pods_give_the_plain_files_verdict() {
    let runs: Vec<PathBuf> = runs_with_logs()
        .into_iter()
        .filter(|r| truth(r).scenario == "sigkill-leader" || truth(r).scenario == "fsync-slow-leader")
        .collect();
    assert!(runs.len() >= 2, "{runs:?}");
    for r in runs {
        let tmp = tempfile::tempdir().unwrap();
        let (mg, node) = layouts(&r, tmp.path());
        let plain = verdict(&["--logs", &s(&r.join(LOGS_DIR))]);
        let (ps, pa, pi, po) = root(&plain);
        let pi: Vec<String> = pi.iter().map(|m| format!("etcd-{m}")).collect();
        for (what, dir) in [("must-gather", &mg), ("/var/log/pods", &node)] {
            let v = verdict(&["--logs", &s(dir)]);
            assert_eq!(
                root(&v),
                (ps.clone(), pa.clone(), pi.clone(), po.clone()),
                "{}: {what}",
                r.display()
            );
            let files = v["logs"]["files"].as_array().unwrap();
            assert_eq!(files.len(), 6, "{what}: {files:?}");
            assert!(files.iter().all(|f| f["layout"] == what), "{what}: {files:?}");
            assert_eq!(v["logs"]["bad_lines"], 0, "{what}");
            assert!(v["logs"]["lines"].as_u64() > Some(0));
        }
        // The must-gather's other containers are skipped, and say why.
        let v = verdict(&["--logs", &s(&mg)]);
        let skipped = v["logs"]["skipped"].as_array().unwrap();
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(
            skipped
                .iter()
                .all(|x| x["why"].as_str().unwrap().contains("etcdctl")),
            "{skipped:?}"
        );
    }
}

#[test]
fn one_metrics_snapshot_beside_the_logs_gets_a_dated_verdict() {
    for r in runs_with_logs()
        .into_iter()
        .filter(|r| truth(r).scenario == "sigkill-leader")
    {
        let t = truth(&r);
        // Each member's last snapshot: one point in time, no rates.
        let mut args: Vec<String> = vec!["--dump".into()];
        for m in ["m0", "m1", "m2"] {
            let dir = r.join(RECORDING_DIR).join(m);
            let mut snaps: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            snaps.sort();
            args.push(format!("{m}={}", s(snaps.last().unwrap())));
        }
        let alone: Vec<&str> = args.iter().map(String::as_str).collect();
        let snap = verdict(&alone);
        assert!(
            snap["root_cause"]["onset"].is_null() || snap["root_cause"].is_null(),
            "{snap}"
        );
        let mut with = alone.clone();
        let logs = s(&r.join(LOGS_DIR));
        with.extend(["--logs", logs.as_str()]);
        let v = verdict(&with);
        let j = judge_logs(&t, &v);
        assert!(j.pass(), "{}: {}", r.display(), j.failures().join("; "));
        assert!(v["root_cause"]["onset"].is_string(), "{v}");
    }
}

fn read_logs(args: &[&Path]) -> logs::LogsSummary {
    let mut store = Store::default();
    let a: Vec<String> = args.iter().map(|p| s(p)).collect();
    logs::read(&a, &LogsConfig::default(), &mut store).expect("read")
}

const ZAP_SLOW: &str = r#"{"level":"warn","ts":"2026-12-06T04:01:50.123Z","caller":"wal/wal.go:805","msg":"slow fdatasync","took":"1.527s","expected-duration":"1s"}"#;

#[test]
fn bad_lines_are_named_and_the_rest_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let huge = "x".repeat(2 << 20);
    // (file, content, the bad line's number, what the message says)
    let cases: Vec<(&str, Vec<u8>, u64, &str)> = vec![
        ("binary.log", [ZAP_SLOW.as_bytes(), b"\n\x00\x01\xff\xfe junk\n", ZAP_SLOW.as_bytes()].concat(), 2, "binary"),
        ("cut.log", format!("{ZAP_SLOW}\n{{\"level\":\"warn\",\"ts\":\"2026-12-06T04:01:51Z\",\"msg\":\"slow fd\n{ZAP_SLOW}\n").into_bytes(), 2, "cut short"),
        ("huge.log", format!("{ZAP_SLOW}\n{huge}\n{ZAP_SLOW}\n").into_bytes(), 2, "longer than"),
        ("badts.log", format!("{ZAP_SLOW}\n{{\"level\":\"warn\",\"ts\":\"yesterday\",\"msg\":\"slow fdatasync\"}}\n{ZAP_SLOW}\n").into_bytes(), 2, "not a time"),
        ("split.log", format!("2026-12-06T04:01:50.123Z stderr F {ZAP_SLOW}\n2026-12-06T04:01:50.123Z stderr P {{\"level\":\n").into_bytes(), 2, "ends inside a line"),
    ];
    for (name, content, n, what) in &cases {
        let p = d.join(name);
        std::fs::write(&p, content).unwrap();
        let sum = read_logs(&[&p]);
        assert_eq!(sum.bad_lines, 1, "{name}: {:?}", sum.bad_examples);
        let b = &sum.bad_examples[0];
        assert_eq!(b.at, format!("{}:{n}", p.display()), "{name}");
        assert!(b.message.contains(what), "{name}: {}", b.message);
        let good = if *name == "split.log" { 1 } else { 2 };
        assert_eq!(sum.recognised, good, "{name}: the rest is read");
    }
    // A line without a time is counted, not placed and not bad.
    let p = d.join("untimed.log");
    std::fs::write(
        &p,
        format!("[WARNING] Deprecated '--logger=capnslog' flag is set\n{ZAP_SLOW}\n"),
    )
    .unwrap();
    let sum = read_logs(&[&p]);
    assert_eq!((sum.bad_lines, sum.untimed, sum.recognised), (0, 1, 1));
    assert_eq!(sum.untimed_example, Some(format!("{}:1", p.display())));
    // A gzip cut short: what was read counts, the rest is named.
    let whole: String = (0..2000).map(|_| format!("{ZAP_SLOW}\n")).collect();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(whole.as_bytes()).unwrap();
    let mut bytes = e.finish().unwrap();
    bytes.truncate(bytes.len() * 2 / 3);
    let p = d.join("trunc.log.gz");
    std::fs::write(&p, &bytes).unwrap();
    let sum = read_logs(&[&p]);
    assert!(
        sum.recognised > 100 && sum.recognised < 2000,
        "{}",
        sum.recognised
    );
    assert!(
        sum.bad_examples
            .iter()
            .any(|b| b.message.contains("cannot read further")),
        "{:?}",
        sum.bad_examples
    );
    // Nothing readable at all: exit 3, naming the file and the first bad line.
    let junk = d.join("junk.log");
    std::fs::write(&junk, b"\x00\x01\x02\n\xff\xfe\n").unwrap();
    let out = run(&["diagnose", "--logs", &s(&junk)]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("junk.log:1") && err.contains("binary"), "{err}");
    // A path that does not exist: usage error naming it.
    let out = run(&["diagnose", "--logs", "/nonexistent/etcd.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/etcd.log"));
    // A directory without logs: named, with why.
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "x").unwrap();
    let out = run(&["diagnose", "--logs", &s(&empty)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no log file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn request_keys_and_credentials_never_reach_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("m0.log");
    let secret = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlc2lnbmF0dXJl";
    let mut text = String::new();
    for i in 0..30 {
        text.push_str(&format!(
            "2026-12-06 04:01:{i:02}.123456 W | etcdserver: read-only range request \"key:\\\"/registry/secrets/kube-system/token-{secret}\\\" \" with result \"range_response_count:1 size:9\" took too long (1.{i:02}s) to execute\n"
        ));
        text.push_str(&format!(
            "2026-12-06 04:01:{i:02}.223456 W | wal: sync duration of 1.5s, expected less than 1s\n"
        ));
    }
    std::fs::write(&p, text).unwrap();
    for fmt in ["json", "table", "wide", "markdown"] {
        let out = run(&["diagnose", "--logs", &format!("m0={}", s(&p)), "-o", fmt]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !all.contains(secret) && !all.contains("/registry/secrets"),
            "{fmt}: {all}"
        );
    }
    let v = verdict(&["--logs", &format!("m0={}", s(&p))]);
    assert_eq!(root(&v).1, "etcd/disk", "{v}");
    assert_eq!(root(&v).2, vec!["m0"]);
}
