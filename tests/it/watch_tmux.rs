//! `diagnose --live --watch` in a real terminal (tmux) against a real etcd
//! cluster: the page is redrawn in place round after round, a member that
//! stops answering shows on the page, Ctrl-C prints the final report with its
//! exit code and completes the `--save` capture.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::etcd::Cluster;

struct Tmux(String);

impl Tmux {
    fn start(cmd: &str) -> Tmux {
        let name = format!("cptriage-watch-{}", std::process::id());
        let st = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x", "110", "-y", "45", cmd])
            .env_remove("TMUX")
            .status()
            .expect("tmux (scripts/test installs it)");
        assert!(st.success(), "tmux new-session failed");
        Tmux(name)
    }

    /// The visible screen (no scrollback).
    fn screen(&self) -> String {
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The screen with its scrollback.
    fn history(&self) -> String {
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-S", "-3000", "-t", &self.0])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn keys(&self, k: &str) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.0, k])
            .status()
            .expect("tmux send-keys");
    }

    /// Waits until the screen satisfies `f`, returning it.
    fn wait_for(&self, what: &str, limit: Duration, f: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(t0.elapsed() < limit, "timed out waiting for {what}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

/// The round number in the page header (`round N every …`).
fn round(screen: &str) -> Option<usize> {
    let line = screen.lines().find(|l| l.starts_with("cptriage watch:"))?;
    let rest = &line[line.find("round ")? + 6..];
    rest.split_whitespace().next()?.parse().ok()
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn watch_redraws_in_place_and_ctrl_c_prints_the_final_report() {
    let mut c = Cluster::start(3, None);
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("saved");
    let code_file = dir.path().join("exit-code");
    let mut args: Vec<String> = vec!["diagnose".into(), "--live".into(), "--watch".into()];
    args.extend(c.record_flags());
    args.extend([
        "--interval".into(),
        "1s".into(),
        "--timeout".into(),
        "800ms".into(),
    ]);
    args.extend(["--save".into(), save.display().to_string()]);
    let cmd = format!(
        "env -u KUBECONFIG HOME=/nonexistent COLUMNS=110 {} {}; echo $? > {}; sleep 60",
        sh_quote(env!("CARGO_BIN_EXE_cptriage")),
        args.iter().map(|a| sh_quote(a)).collect::<Vec<_>>().join(" "),
        sh_quote(&code_file.display().to_string()),
    );
    let t = Tmux::start(&cmd);
    let first = t.wait_for("the first page", Duration::from_secs(20), |s| round(s).is_some());
    let r1 = round(&first).unwrap();
    // In place: one header on the screen, never a scrolling log of pages.
    assert_eq!(first.matches("cptriage watch:").count(), 1, "{first}");
    assert!(first.contains("3 etcd members"), "{first}");
    let later = t.wait_for("a later round", Duration::from_secs(20), |s| {
        round(s).is_some_and(|r| r >= r1 + 2)
    });
    assert_eq!(later.matches("cptriage watch:").count(), 1, "{later}");
    // A member that stops answering shows on the page as it happens.
    c.kill(2);
    let down = t.wait_for("the failing member on the page", Duration::from_secs(20), |s| {
        s.contains("connection refused")
    });
    assert!(
        down.contains("etcd-2") || down.contains("m2") || down.contains("refused"),
        "{down}"
    );
    let before_stop = round(&down).unwrap();
    // Ctrl-C: the final report and the exit code of its status.
    t.keys("C-c");
    let t0 = Instant::now();
    while !code_file.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no exit after Ctrl-C:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(200));
    let code: i32 = std::fs::read_to_string(&code_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let end = t.history();
    let last = end
        .rfind("watch ended after")
        .unwrap_or_else(|| panic!("no final report:\n{end}"));
    let fin = &end[last..];
    assert!(
        ["HEALTHY", "DEGRADED", "RECOVERED", "INCONCLUSIVE"]
            .iter()
            .any(|w| fin.contains(w)),
        "{end}"
    );
    assert!(!end[last..].contains("cptriage watch:"), "{end}");
    assert!([0, 1, 3, 4].contains(&code), "exit {code}:\n{end}");
    // The capture holds every round (and the member's failures), readable by `--dump`.
    let manifest = std::fs::read_to_string(save.join("manifest.yaml")).unwrap();
    assert!(manifest.contains("failures:"), "{manifest}");
    let snaps = count_files(&save, "prom.gz");
    assert!(
        snaps >= 3 * before_stop - 3,
        "{snaps} snapshots for {before_stop} rounds"
    );
    let again = support::cptriage(&["diagnose", "--dump", save.to_str().unwrap(), "-o", "json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(v["status"].is_string(), "{v}");

    // For a script (no terminal, `-o json`, a bounded `--duration`): the pages
    // go to stderr one after another, stdout holds only the final document.
    let mut args: Vec<String> = vec!["diagnose".into(), "--live".into(), "--watch".into()];
    args.extend(c.record_flags());
    args.extend(
        [
            "--interval",
            "1s",
            "--duration",
            "3s",
            "--timeout",
            "800ms",
            "-o",
            "json",
        ]
        .map(String::from),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = support::cptriage(&refs, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(doc["schema"], "cptriage/verdict/v1");
    assert!(err.matches("cptriage watch:").count() >= 2, "{err}");
    assert!(!err.contains("\x1b[2J"), "no screen control codes off a terminal");
}

fn count_files(dir: &Path, suffix: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += count_files(&p, suffix);
        } else if p.to_string_lossy().ends_with(suffix) {
            n += 1;
        }
    }
    n
}
