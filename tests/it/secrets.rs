//! The canary test: one canary string in every credential path (kubeconfig
//! token, token file, client key data, exec-plugin output, Prometheus bearer
//! token, basic-auth password, tenant header, etcd key) and in every file a
//! user may pass by mistake (a key or a token file as kubeconfig, rule file,
//! dump, CA file, capture manifest), each driven through its failure modes:
//! rejected, TLS name mismatch, client certificate refused, 401, 403, 500,
//! timeout, malformed file, and servers that reflect the `Authorization`
//! header into every body they send. The canary must appear in no stdout,
//! stderr, JSON report, capture or `--save` directory.
//!
//! Servers are TLS test servers on 127.0.0.1 (tests/support/server.rs); the
//! exec plugins are shell scripts in a temporary directory.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use base64::Engine;
use support::pki::{write, Ca, Leaf};
use support::server::{Request, Response, Server, Tls};

/// Looks like a real token (mixed case, digits), as real ones do.
const CANARY: &str = "cAnArY7Qx2Vb9Lm4Zt8Rk3Wp6Yd5";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The strings that must never show: the canary, its basic-auth header form,
/// and the base64 body lines of the test client key.
struct Needles(Vec<String>);

impl Needles {
    fn new(key: &Leaf) -> Needles {
        let mut v = vec![CANARY.to_string(), b64(&format!("user:{CANARY}"))];
        v.extend(
            key.key_pem
                .lines()
                .filter(|l| !l.starts_with("-----") && l.len() >= 20)
                .map(str::to_string),
        );
        Needles(v)
    }
}

/// Counts the needles in a run's stdout and stderr and in every file under `dirs`.
fn appearances(n: &Needles, out: &Output, dirs: &[&Path]) -> Vec<String> {
    let mut found = Vec::new();
    let mut look = |what: &str, text: &str| {
        for x in &n.0 {
            if text.contains(x.as_str()) {
                found.push(format!("{what} holds `{}…`", &x[..8]));
            }
        }
    };
    look("stdout", &String::from_utf8_lossy(&out.stdout));
    look("stderr", &String::from_utf8_lossy(&out.stderr));
    for d in dirs {
        let mut stack = vec![d.to_path_buf()];
        while let Some(p) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&p) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(b) = cptriage::source::ingest::read_maybe_gzip(&p) {
                    look(&p.display().to_string(), &String::from_utf8_lossy(&b));
                }
            }
        }
    }
    found
}

/// Runs cptriage and records where the needles showed, with the case name.
struct Runs<'a> {
    needles: &'a Needles,
    leaks: Vec<String>,
    runs: usize,
}

impl Runs<'_> {
    fn run(&mut self, case: &str, args: &[&str], dirs: &[&Path]) -> Output {
        let out = support::cptriage(args, &[]);
        self.runs += 1;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && out.status.code() != Some(101),
            "{case}: panicked\n{stderr}"
        );
        for l in appearances(self.needles, &out, dirs) {
            self.leaks.push(format!("{case}: {l}\nstderr: {stderr}"));
        }
        out
    }

    #[track_caller]
    fn finish(self, at_least: usize) {
        assert!(self.runs >= at_least, "only {} runs", self.runs);
        assert!(
            self.leaks.is_empty(),
            "{} appearances of the canary:\n{}",
            self.leaks.len(),
            self.leaks.join("\n\n")
        );
    }
}

/// What a reflecting server sends back: the `Authorization` header it got.
fn echo(r: &Request) -> String {
    r.authorization.clone().unwrap_or_default()
}

/// An HTTPS server (certificate for localhost) that answers every request with
/// `status` and the request's `Authorization` header in the body: in a metric
/// label and in the health texts for 200, in the error text otherwise.
fn reflecting(
    ca: &Ca,
    cert: Option<Leaf>,
    client_ca: Option<String>,
    status: u16,
    delay: Duration,
) -> Server {
    let cert = cert.unwrap_or_else(|| ca.server(&["localhost", "127.0.0.1"]));
    Server::start(
        Some(Tls {
            server: cert,
            client_ca_pem: client_ca,
        }),
        move |r| {
            let e = echo(r);
            let mut resp = if status != 200 {
                Response::status(
                    status,
                    &format!("{{\"kind\":\"Status\",\"message\":\"denied for {e}\"}}"),
                )
            } else if r.path.starts_with("/metrics") {
                Response::ok(format!(
                    "# TYPE etcd_server_has_leader gauge\netcd_server_has_leader{{echo=\"{e}\"}} 1\n# TYPE apiserver_request_total counter\napiserver_request_total{{code=\"200\",verb=\"GET\",echo=\"{e}\"}} 5\n"
                ))
            } else {
                Response::ok(format!("[+]ping ok (you sent {e})\nreadyz check passed\n"))
            };
            resp.delay = delay;
            resp
        },
    )
}

/// A Prometheus API that reflects the `Authorization` header (and the tenant
/// header is not seen by the test server) in its warnings, its label values
/// and its error texts.
fn reflecting_prometheus(ca: &Ca, status: u16, delay: Duration) -> Server {
    let cert = ca.server(&["localhost", "127.0.0.1"]);
    Server::start(
        Some(Tls {
            server: cert,
            client_ca_pem: None,
        }),
        move |r| {
            let e = echo(r).replace('"', "");
            let body = if status != 200 {
                format!("{{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"refused {e}\"}}")
            } else if r.path.contains("/label/") {
                format!("{{\"status\":\"success\",\"warnings\":[\"saw {e}\"],\"data\":[\"up\",\"{e}\"]}}")
            } else {
                let now = 1_767_225_600;
                let values: Vec<String> = (0..10)
                    .map(|i| format!("[{},\"1\"]", now - 600 + i * 60))
                    .collect();
                format!(
                    "{{\"status\":\"success\",\"warnings\":[\"saw {e}\"],\"data\":{{\"resultType\":\"matrix\",\"result\":[{{\"metric\":{{\"__name__\":\"up\",\"job\":\"apiserver\",\"instance\":\"{e}\"}},\"values\":[{}]}}]}}}}",
                    values.join(",")
                )
            };
            let mut resp = Response::status(status, &body);
            resp.delay = delay;
            resp
        },
    )
}

struct Env {
    dir: tempfile::TempDir,
    ca: Ca,
    client: Leaf,
    needles: Needles,
}

impl Env {
    fn new() -> Env {
        let ca = Ca::new("canary ca");
        let client = ca.client("canary-user");
        let needles = Needles::new(&client);
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
            ca,
            client,
            needles,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn file(&self, name: &str, text: &str) -> String {
        write(self.dir.path(), name, text).display().to_string()
    }

    /// A kubeconfig for `https://localhost:PORT` with `user` (YAML lines under `user:`).
    fn kubeconfig(&self, name: &str, port: u16, user: &str) -> String {
        self.file(
            name,
            &format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://localhost:{port}\n    certificate-authority-data: {}\ncontexts:\n- name: t\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user:\n{user}",
                b64(&self.ca.pem())
            ),
        )
    }

    /// An executable shell script.
    fn script(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.path(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p.display().to_string()
    }
}

/// Live scraping flags: two quick rounds.
const LIVE: [&str; 7] = [
    "--no-discovery",
    "--interval",
    "100ms",
    "--duration",
    "200ms",
    "--timeout",
    "1s",
];

/// Each kubeconfig credential (inline token, token file, exec plugin output,
/// client key data) against each way a server can fail or reflect it.
#[test]
fn kubeconfig_credentials_never_show() {
    let env = Env::new();
    let other = Ca::new("another ca");
    let slow = Duration::from_millis(1500);
    let servers: Vec<(&str, Server)> = vec![
        ("401", reflecting(&env.ca, None, None, 401, Duration::ZERO)),
        ("403", reflecting(&env.ca, None, None, 403, Duration::ZERO)),
        ("500", reflecting(&env.ca, None, None, 500, Duration::ZERO)),
        (
            "200 reflecting",
            reflecting(&env.ca, None, None, 200, Duration::ZERO),
        ),
        ("timeout", reflecting(&env.ca, None, None, 200, slow)),
        (
            "TLS name mismatch",
            reflecting(
                &env.ca,
                Some(env.ca.server(&["wrong.example"])),
                None,
                200,
                Duration::ZERO,
            ),
        ),
        (
            "client certificate rejected",
            reflecting(&env.ca, None, Some(other.pem()), 200, Duration::ZERO),
        ),
    ];
    let token_file = env.file("token.txt", &format!("{CANARY}\n"));
    let ok_plugin = env.script(
        "plugin-ok",
        &format!("printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{CANARY}\"}}}}'"),
    );
    let users: Vec<(&str, String)> = vec![
        ("token", format!("    token: {CANARY}\n")),
        ("token file", format!("    tokenFile: {token_file}\n")),
        (
            "exec plugin",
            format!("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {ok_plugin}\n      interactiveMode: Never\n"),
        ),
        (
            "client key data",
            format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                b64(&env.client.cert_pem),
                b64(&env.client.key_pem)
            ),
        ),
    ];
    let mut runs = Runs {
        needles: &env.needles,
        leaks: Vec::new(),
        runs: 0,
    };
    for (u, user) in &users {
        for (s, server) in &servers {
            let case = format!("kubeconfig {u}, server {s}");
            let k = env.kubeconfig(&format!("k-{}", runs.runs), server.port(), user);
            let save = env.path(&format!("save-{}", runs.runs));
            let save_s = save.display().to_string();
            let mut args = vec![
                "diagnose",
                "--live",
                "--kubeconfig",
                &k,
                "-o",
                "json",
                "--save",
                &save_s,
            ];
            args.extend(LIVE);
            runs.run(&case, &args, &[&save]);
        }
    }
    // The HTML report of a reflecting server, for every kind of credential.
    let reflecting_port = servers[3].1.port();
    for (u, user) in &users {
        let k = env.kubeconfig(&format!("k-html-{}", runs.runs), reflecting_port, user);
        let mut args = vec!["diagnose", "--live", "--kubeconfig", &k, "-o", "html"];
        args.extend(LIVE);
        let out = runs.run(&format!("kubeconfig {u}, -o html"), &args, &[]);
        assert!(
            out.stdout.starts_with(b"<!DOCTYPE html>"),
            "kubeconfig {u}, -o html: no page\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A recording, whose capture holds the health bodies and metrics of a
    // reflecting server.
    let k = env.kubeconfig("k-record", servers[3].1.port(), &users[0].1);
    let cap = env.path("capture");
    let cap_s = cap.display().to_string();
    let mut args = vec!["record", "--out", &cap_s, "--kubeconfig", &k];
    args.extend(LIVE);
    let out = runs.run("record, reflecting server", &args, &[&cap]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let health = std::fs::read_to_string(cap.join("health/apiserver-localhost.json")).expect("health file");
    assert!(health.contains("<redacted>"), "{health}");
    runs.finish(users.len() * servers.len() + users.len() + 1);
}

/// Exec plugins that fail: exit with the token on stderr, print it in
/// malformed output, in an expiry or an apiVersion.
#[test]
fn exec_plugin_output_never_shows() {
    let env = Env::new();
    let server = reflecting(&env.ca, None, None, 401, Duration::ZERO);
    let plugins = [
        ("exits 1, token on stderr", format!("echo \"token {CANARY} expired\" >&2\nexit 1")),
        ("malformed JSON", format!("printf '{{\"token\": \"{CANARY}\" oops'")),
        (
            "expiry that is the token",
            format!("printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{CANARY}\",\"expirationTimestamp\":\"{CANARY}\"}}}}'"),
        ),
        (
            "apiVersion that is the token",
            format!("printf '{{\"apiVersion\":\"{CANARY}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{CANARY}\"}}}}'"),
        ),
        (
            "no kind, token in status",
            format!("printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{{\"token\":\"{CANARY}\"}}}}'"),
        ),
    ];
    let mut runs = Runs {
        needles: &env.needles,
        leaks: Vec::new(),
        runs: 0,
    };
    for (i, (what, body)) in plugins.iter().enumerate() {
        let p = env.script(&format!("plugin-{i}"), body);
        let k = env.kubeconfig(
            &format!("k-{i}"),
            server.port(),
            &format!("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {p}\n      interactiveMode: Never\n"),
        );
        let mut args = vec!["diagnose", "--live", "--kubeconfig", &k, "-o", "json"];
        args.extend(LIVE);
        let out = runs.run(&format!("exec plugin: {what}"), &args, &[]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    runs.finish(plugins.len());
}

/// `--prometheus-token-file`, `--prometheus-password-file` and a tenant
/// header against an API that reflects them in errors, warnings and labels.
#[test]
fn prometheus_credentials_never_show() {
    let env = Env::new();
    let ca = env.file("ca.pem", &env.ca.pem());
    let token = env.file("token.txt", &format!("{CANARY}\n"));
    let password = env.file("password.txt", CANARY);
    let servers: Vec<(&str, Server)> = vec![
        ("401", reflecting_prometheus(&env.ca, 401, Duration::ZERO)),
        ("403", reflecting_prometheus(&env.ca, 403, Duration::ZERO)),
        ("500", reflecting_prometheus(&env.ca, 500, Duration::ZERO)),
        ("422", reflecting_prometheus(&env.ca, 422, Duration::ZERO)),
        (
            "200 reflecting",
            reflecting_prometheus(&env.ca, 200, Duration::ZERO),
        ),
        (
            "timeout",
            reflecting_prometheus(&env.ca, 200, Duration::from_millis(1500)),
        ),
    ];
    let header = format!("X-Scope-OrgID: {CANARY}");
    let auths: Vec<(&str, Vec<&str>)> = vec![
        ("bearer token", vec!["--prometheus-token-file", &token]),
        (
            "basic auth",
            vec![
                "--prometheus-user",
                "user",
                "--prometheus-password-file",
                &password,
            ],
        ),
        ("tenant header", vec!["--prometheus-header", &header]),
    ];
    let mut runs = Runs {
        needles: &env.needles,
        leaks: Vec::new(),
        runs: 0,
    };
    for (a, auth) in &auths {
        for (s, server) in &servers {
            let url = format!("https://localhost:{}", server.port());
            let base = [
                "--prometheus",
                &url,
                "--prometheus-ca",
                &ca,
                "--prometheus-timeout",
                "1s",
            ];
            let mut q = vec!["query", "up"];
            q.extend(base);
            q.extend(auth.iter().copied());
            runs.run(&format!("query, {a}, server {s}"), &q, &[]);
            let mut qj = q.clone();
            qj.extend(["-o", "json"]);
            runs.run(&format!("query -o json, {a}, server {s}"), &qj, &[]);
            let mut d = vec![
                "diagnose",
                "-o",
                "json",
                "--from",
                "1767225000",
                "--to",
                "1767225600",
            ];
            d.extend(base);
            d.extend(auth.iter().copied());
            runs.run(&format!("diagnose, {a}, server {s}"), &d, &[]);
        }
    }
    runs.finish(auths.len() * servers.len() * 3);
}

/// `--etcd-key`: a valid key against a server that rejects the client
/// certificate or has the wrong name, and a key file that is not PEM.
#[test]
fn etcd_keys_never_show() {
    let env = Env::new();
    let other = Ca::new("another ca");
    let ca = env.file("etcd-ca.pem", &env.ca.pem());
    let cert = env.file("client.crt", &env.client.cert_pem);
    let key = env.file("client.key", &env.client.key_pem);
    let bad_key = env.file(
        "bad.key",
        &format!("-----BEGIN PRIVATE KEY-----\n{CANARY}{CANARY}\n-----END PRIVATE KEY-----\n"),
    );
    let servers: Vec<(&str, Server)> = vec![
        (
            "client certificate rejected",
            reflecting(&env.ca, None, Some(other.pem()), 200, Duration::ZERO),
        ),
        (
            "TLS name mismatch",
            reflecting(
                &env.ca,
                Some(env.ca.server(&["wrong.example"])),
                None,
                200,
                Duration::ZERO,
            ),
        ),
        ("403", reflecting(&env.ca, None, None, 403, Duration::ZERO)),
        (
            "timeout",
            reflecting(&env.ca, None, None, 200, Duration::from_millis(1500)),
        ),
    ];
    let mut runs = Runs {
        needles: &env.needles,
        leaks: Vec::new(),
        runs: 0,
    };
    for (s, server) in &servers {
        for (k, keyfile) in [("valid key", &key), ("key that is not PEM", &bad_key)] {
            let url = format!("e0=https://localhost:{}", server.port());
            let save = env.path(&format!("etcd-save-{}", runs.runs));
            let save_s = save.display().to_string();
            let mut args = vec![
                "diagnose",
                "--live",
                "--no-apiserver",
                "--etcd",
                &url,
                "--etcd-cacert",
                &ca,
                "--etcd-cert",
                &cert,
                "--etcd-key",
                keyfile,
                "-o",
                "json",
                "--save",
                &save_s,
            ];
            args.extend(&LIVE[1..]);
            runs.run(&format!("etcd, {k}, server {s}"), &args, &[&save]);
        }
    }
    runs.finish(servers.len() * 2);
}

/// Key, token and password files given where a kubeconfig, a rule file, a
/// dump, a CA or a capture manifest belongs.
#[test]
fn mistaken_files_are_never_quoted() {
    let env = Env::new();
    let key_with_canary = env.file(
        "canary.key",
        &format!("-----BEGIN PRIVATE KEY-----\n{CANARY}\n{CANARY}\n-----END PRIVATE KEY-----\n"),
    );
    let real_key = env.file("client.key", &env.client.key_pem);
    let token = env.file("token", &format!("{CANARY}\n"));
    let env_file = env.file("creds.env", &format!("TOKEN={CANARY}\nPASSWORD: {CANARY}\n"));
    let string_user = env.file(
        "string-user.yaml",
        &format!("current-context: t\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1'}}}}]\ncontexts: [{{name: t, context: {{cluster: c, user: u}}}}]\nusers:\n- name: u\n  user: \"{CANARY}\"\n"),
    );
    let shadow_dir = env.path("capture-with-link");
    std::fs::create_dir_all(shadow_dir.join("etcd-0")).expect("mkdir");
    std::fs::write(
        shadow_dir.join("etcd-0/1767225600000.prom"),
        "etcd_server_has_leader 1\n",
    )
    .expect("write");
    std::os::unix::fs::symlink(&token, shadow_dir.join("manifest.yaml")).expect("symlink");
    let shadow = shadow_dir.display().to_string();
    let dump = "testdata/bad/dumps/negative-counter.prom";
    let rec_out = env.path("never-created/out");
    let rec = rec_out.display().to_string();
    let mut runs = Runs {
        needles: &env.needles,
        leaks: Vec::new(),
        runs: 0,
    };
    for f in [&key_with_canary, &real_key, &token, &env_file] {
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("as --kubeconfig", vec!["diagnose", "--live", "--kubeconfig", f]),
            (
                "as record --kubeconfig",
                vec!["record", "--out", &rec, "--kubeconfig", f],
            ),
            ("as --rules", vec!["diagnose", "--dump", dump, "--rules", f]),
            (
                "as --rules -o json",
                vec!["diagnose", "--dump", dump, "--rules", f, "-o", "json"],
            ),
            ("as tree --rules", vec!["tree", "--rules", f]),
            ("to rules check", vec!["rules", "check", f]),
            (
                "to rules export",
                vec!["rules", "export", "--format", "prometheus", "--rules", f],
            ),
            ("to rules test", vec!["rules", "test", f]),
            ("as --dump", vec!["diagnose", "--dump", f, "-o", "json"]),
            ("as query --dump", vec!["query", "--dump", f, "up"]),
            (
                "as --prometheus-ca",
                vec![
                    "query",
                    "up",
                    "--prometheus",
                    "https://127.0.0.1:1",
                    "--prometheus-ca",
                    f,
                ],
            ),
            (
                "as --etcd-cacert",
                vec![
                    "diagnose",
                    "--live",
                    "--no-apiserver",
                    "--etcd",
                    "https://127.0.0.1:1",
                    "--etcd-cacert",
                    f,
                ],
            ),
        ];
        for (what, args) in cases {
            let out = runs.run(&format!("{f} {what}"), &args, &[]);
            assert_ne!(out.status.code(), Some(0), "{f} {what} succeeded");
        }
        // The failed recording left no directory behind.
        assert!(
            !env.path("never-created").exists(),
            "record left its --out behind"
        );
    }
    let k = vec!["diagnose", "--live", "--kubeconfig", string_user.as_str()];
    let out = runs.run("kubeconfig whose user is a string", &k, &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = runs.run(
        "capture whose manifest links to a token file",
        &["diagnose", "--dump", &shadow, "-o", "json"],
        &[],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the manifest is a symbolic link"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    runs.finish(4 * 12 + 2);
}

/// `cptriage serve` with each Prometheus credential against an API that
/// reflects it: the canary (and serve's own token) must appear in no answer
/// of its HTTP interface (the triage list, the verdict JSON and HTML,
/// `/metrics`), no log line and no file of `--reports`.
#[test]
fn serve_never_shows_credentials() {
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new();
    let ca = env.file("ca.pem", &env.ca.pem());
    let token = env.file("token.txt", &format!("{CANARY}\n"));
    let password = env.file("password.txt", CANARY);
    let cert = env.file("client.crt", &env.client.cert_pem);
    let key = env.file("client.key", &env.client.key_pem);
    let own_token = "serve-Own-Token-0c4f7a9e1b";
    let servers: Vec<(&str, Server)> = vec![
        ("401", reflecting_prometheus(&env.ca, 401, Duration::ZERO)),
        (
            "200 reflecting",
            reflecting_prometheus(&env.ca, 200, Duration::ZERO),
        ),
        (
            "timeout",
            reflecting_prometheus(&env.ca, 200, Duration::from_millis(1500)),
        ),
    ];
    let header = format!("X-Scope-OrgID: {CANARY}");
    let auths: Vec<(&str, Vec<&str>)> = vec![
        ("bearer token", vec!["--prometheus-token-file", &token]),
        (
            "basic auth and client key",
            vec![
                "--prometheus-user",
                "user",
                "--prometheus-password-file",
                &password,
                "--prometheus-cert",
                &cert,
                "--prometheus-key",
                &key,
            ],
        ),
        ("tenant header", vec!["--prometheus-header", &header]),
    ];
    let mut needles = Needles::new(&env.client);
    needles.0.push(own_token.to_string());
    let notification = serde_json::json!({
        "version": "4", "groupKey": "{}:{alertname=\"EtcdMembersDown\"}", "status": "resolved",
        "receiver": "cptriage", "externalURL": "http://am",
        "alerts": [{"status": "resolved", "labels": {"alertname": "EtcdMembersDown"},
                    "startsAt": "2025-12-31T23:55:00Z", "endsAt": "2026-01-01T00:00:00Z",
                    "fingerprint": "f1"}],
    })
    .to_string();
    let mut leaks = Vec::new();
    let mut runs = 0;
    for (a, auth) in &auths {
        for (s, server) in &servers {
            let case = format!("serve, {a}, server {s}");
            let reports = env.path(&format!("serve-reports-{runs}"));
            let mut args: Vec<String> = [
                "--prometheus",
                &format!("https://localhost:{}", server.port()),
                "--prometheus-ca",
                &ca,
                "--prometheus-timeout",
                "1s",
                "--lookback",
                "5m",
                "--reports",
                reports.to_str().expect("path"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(auth.iter().map(|s| s.to_string()));
            let mut serve = support::serve::Serve::start(env.dir.path(), &args, Some(own_token));
            let (code, text) = serve.post_notification(&notification);
            assert_eq!(code, 202, "{case}: {text}");
            let v: serde_json::Value = serde_json::from_str(&text).expect("json");
            let id = v["triages"][0]["id"].as_str().expect("id").to_string();
            let done = support::wait_for(Duration::from_secs(30), || {
                let (code, body) = serve.get_json(&format!("/v1/triage/{id}"));
                (code == 200).then_some(body)
            });
            assert!(done.is_some(), "{case}: not judged in 30 s: {}", serve.log_text());
            let mut answers = String::new();
            for path in [
                "/v1/triage",
                &format!("/v1/triage/{id}"),
                &format!("/v1/triage/{id}.html"),
                "/metrics",
            ] {
                answers.push_str(&serve.get(path).expect("get").text().expect("text"));
            }
            let (code, _) = serve.terminate(Duration::from_secs(15));
            assert_eq!(code, Some(0), "{case}");
            let out = Output {
                status: std::process::ExitStatus::from_raw(0),
                stdout: answers.into_bytes(),
                stderr: serve.log_text().into_bytes(),
            };
            assert!(reports.join(format!("{id}.json")).is_file(), "{case}: no report");
            for l in appearances(&needles, &out, &[&reports]) {
                leaks.push(format!("{case}: {l}"));
            }
            runs += 1;
        }
    }
    assert_eq!(runs, auths.len() * servers.len());
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}
