//! `record --out DIR` claims its directory atomically (two runs racing for a
//! new directory: one records, the other is told which path it lost), leaves
//! nothing behind when it fails before recording, and its health files say
//! `tls_verified: false` for a plain-HTTP target.

use crate::support;

use std::time::Duration;

use support::server::{Response, Server};

fn etcd() -> Server {
    Server::start(None, |r| match r.path.as_str() {
        "/health" => Response::ok("{\"health\":\"true\"}"),
        _ => {
            let mut resp = Response::ok("# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n");
            // Long enough for two runs to overlap.
            resp.delay = Duration::from_millis(100);
            resp
        }
    })
}

fn record(out: &str, etcd: &str) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args([
            "record",
            "--out",
            out,
            "--no-apiserver",
            "--etcd",
            etcd,
            "--interval",
            "100ms",
            "--duration",
            "200ms",
            "--timeout",
            "2s",
        ])
        .env("HOME", "/nonexistent")
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cptriage")
}

#[test]
fn two_runs_racing_for_one_new_directory() {
    let s = etcd();
    let url = format!("e0=http://127.0.0.1:{}", s.port());
    for round in 0..3 {
        let d = tempfile::tempdir().expect("tempdir");
        let out = d.path().join("new/capture");
        let out_s = out.display().to_string();
        let a = record(&out_s, &url);
        let b = record(&out_s, &url);
        let (a, b) = (a.wait_with_output().expect("a"), b.wait_with_output().expect("b"));
        let codes = [a.status.code(), b.status.code()];
        let winners = codes.iter().filter(|c| **c == Some(0)).count();
        let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(
            winners,
            1,
            "round {round}: exactly one run records: {codes:?}\n{}\n{}",
            err(&a),
            err(&b)
        );
        let loser = if a.status.code() == Some(0) { &b } else { &a };
        assert_eq!(loser.status.code(), Some(2), "{}", err(loser));
        let e = err(loser);
        assert!(e.contains(&format!("`{out_s}`")), "the loser names the path: {e}");
        assert!(
            e.contains("another run started writing into it") || e.contains("exists and is not empty"),
            "{e}"
        );
        // The winner's capture is whole.
        let m = std::fs::read_to_string(out.join("manifest.yaml")).expect("manifest");
        assert!(m.contains("name: e0"), "{m}");
        assert!(std::fs::read_dir(out.join("e0")).expect("snapshots").count() >= 2);
    }
}

#[test]
fn a_failed_record_leaves_no_directory_behind() {
    let d = tempfile::tempdir().expect("tempdir");
    let k = d.path().join("kubeconfig");
    std::fs::write(&k, "clusters: [\n").expect("write");
    for out in ["fresh", "fresh/nested/deeper"] {
        let p = d.path().join(out);
        let o = support::cptriage(
            &[
                "record",
                "--out",
                &p.display().to_string(),
                "--kubeconfig",
                &k.display().to_string(),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!d.path().join("fresh").exists(), "`{out}` left behind");
    }
    // An existing empty directory is kept (it was the user's), and stays empty.
    let mine = d.path().join("mine");
    std::fs::create_dir(&mine).expect("mkdir");
    let o = support::cptriage(
        &[
            "record",
            "--out",
            &mine.display().to_string(),
            "--kubeconfig",
            &k.display().to_string(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(mine.is_dir());
    assert_eq!(std::fs::read_dir(&mine).expect("read").count(), 0);
    // `diagnose --live --save` the same.
    let save = d.path().join("save");
    let o = support::cptriage(
        &[
            "diagnose",
            "--live",
            "--kubeconfig",
            &k.display().to_string(),
            "--save",
            &save.display().to_string(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!save.exists());
}

#[test]
fn plain_http_targets_are_not_tls_verified() {
    let s = etcd();
    let d = tempfile::tempdir().expect("tempdir");
    let out = d.path().join("cap");
    let o = record(
        &out.display().to_string(),
        &format!("e0=http://127.0.0.1:{}", s.port()),
    )
    .wait_with_output()
    .expect("record");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let h: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("health/e0.json")).expect("health"))
            .expect("json");
    assert_eq!(h["tls_verified"], false, "{h}");
    assert_eq!(h["url"], format!("http://127.0.0.1:{}/metrics", s.port()));
    assert!(String::from_utf8_lossy(&o.stdout).contains("plain http"));
}
