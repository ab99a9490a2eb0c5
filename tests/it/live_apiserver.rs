//! `record` against HTTPS test servers on 127.0.0.1 that serve a real
//! kube-apiserver capture (`testdata/realdata/`) behind bearer-token and
//! client-certificate auth, with a fake `default/kubernetes` EndpointSlice:
//! every kubeconfig path (token, token file, certificate data, exec plugins,
//! CA problems, 401, 403, insecure mode, in-cluster) and the kubectl plugin name.
//! A canary token and a canary key must appear nowhere in outputs or captures.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine;
use cptriage::source::capture::manifest;
use cptriage::source::capture::{self, DumpArg};
use cptriage::source::ingest::Keep;
use support::pki::{write, Ca, Leaf};
use support::server::{Request, Response, Server, Tls};

const CANARY_TOKEN: &str = "cptriage-canary-token-3f9a71c2e5d4";
const FORBIDDEN_TOKEN: &str = "identity-without-metrics-rbac";
const CAPTURE: &str = "apiserver_nri_v1.33.0.prom";

struct Fixture {
    dir: tempfile::TempDir,
    ca: Ca,
    client: Leaf,
    replicas: Vec<Server>,
    lb: Server,
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// `Ok` when the request carries the canary token or the accepted client certificate.
fn authorize(r: &Request, client_der: &[u8]) -> Result<(), Response> {
    if r.authorization.as_deref() == Some(&*format!("Bearer {CANARY_TOKEN}"))
        || r.client_cert.as_deref() == Some(client_der)
    {
        Ok(())
    } else if r.authorization.as_deref() == Some(&*format!("Bearer {FORBIDDEN_TOKEN}")) {
        Err(Response::status(
            403,
            r#"{"kind":"Status","message":"forbidden: User \"x\" cannot get path \"/metrics\""}"#,
        ))
    } else {
        Err(Response::status(
            401,
            r#"{"kind":"Status","message":"Unauthorized"}"#,
        ))
    }
}

fn der_of(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .as_ref()
        .to_vec()
}

/// An apiserver replica: `/metrics` (the real capture), `/readyz`, `/livez`,
/// and, when `slices` is given, the EndpointSlice list.
fn apiserver(
    ca: &Ca,
    cert: &Leaf,
    client_der: Vec<u8>,
    body: Arc<Vec<u8>>,
    gz: Arc<Vec<u8>>,
    slices: Option<String>,
) -> Server {
    Server::start(
        Some(Tls {
            server: cert.clone(),
            client_ca_pem: Some(ca.pem()),
        }),
        move |r| {
            if let Err(resp) = authorize(r, &client_der) {
                return resp;
            }
            match r.path.as_str() {
                "/metrics" => Response::ok_gz(&body, &gz),
                "/readyz?verbose" => Response::ok("[+]ping ok\n[+]etcd ok\nreadyz check passed\n"),
                "/livez?verbose" => Response::ok("[+]ping ok\nlivez check passed\n"),
                p if p.starts_with("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices") => {
                    match &slices {
                        Some(s) => Response::ok(s.clone()),
                        None => Response::status(404, "not found"),
                    }
                }
                _ => Response::status(404, "not found"),
            }
        },
    )
}

impl Fixture {
    /// Two replicas and a load balancer, all serving `server_cert`.
    fn new(server_cert: Option<Leaf>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("test cluster ca");
        let cert =
            server_cert.unwrap_or_else(|| ca.server(&["localhost", "127.0.0.1", "kubernetes.default.svc"]));
        let client = ca.client("cptriage-test-user");
        let body = Arc::new(support::realdata(CAPTURE));
        let gz = Arc::new(Response::compress(&body));
        let der = der_of(&client.cert_pem);
        let replicas: Vec<Server> = (0..2)
            .map(|_| apiserver(&ca, &cert, der.clone(), body.clone(), gz.clone(), None))
            .collect();
        let slices = serde_json::json!({
            "kind": "EndpointSliceList",
            "items": replicas.iter().map(|r| serde_json::json!({
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": r.port(), "protocol": "TCP"}],
            })).collect::<Vec<_>>(),
        })
        .to_string();
        let lb = apiserver(&ca, &cert, der, body, gz, Some(slices));
        Fixture {
            dir,
            ca,
            client,
            replicas,
            lb,
        }
    }

    /// A kubeconfig for the load balancer at `https://localhost:PORT`.
    fn kubeconfig(&self, name: &str, cluster_extra: &str, user: &str) -> PathBuf {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: c\n  cluster:\n    server: https://localhost:{}\n{cluster_extra}contexts:\n- name: test\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user:\n{user}",
            self.lb.port()
        );
        write(self.dir.path(), name, &text)
    }

    fn ca_data(&self) -> String {
        format!("    certificate-authority-data: {}\n", b64(&self.ca.pem()))
    }

    fn record(&self, kubeconfig: &Path, extra: &[&str]) -> (PathBuf, Output) {
        let cap = self
            .dir
            .path()
            .join(format!("cap{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        let mut args = vec![
            "record",
            "--out",
            cap.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--interval",
            "300ms",
            "--duration",
            "600ms",
            "--timeout",
            "5s",
        ];
        args.extend(extra);
        let out = support::cptriage(&args, &[]);
        (cap, out)
    }
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[track_caller]
fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[track_caller]
fn assert_every_scrape_failed(out: &Output, reason: &str) {
    assert_eq!(out.status.code(), Some(3), "stderr:\n{}", text(&out.stderr));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains(reason), "expected `{reason}` in:\n{all}");
    assert!(
        text(&out.stderr).contains("every scrape failed"),
        "{}",
        text(&out.stderr)
    );
}

fn manifest_of(cap: &Path) -> manifest::Manifest {
    manifest::parse(&std::fs::read_to_string(cap.join("manifest.yaml")).unwrap()).unwrap()
}

/// Checks a successful capture of both replicas, scraped directly.
fn assert_both_replicas(f: &Fixture, cap: &Path) {
    let m = manifest_of(cap);
    let mut urls: Vec<String> = m.targets.iter().filter_map(|t| t.url.clone()).collect();
    urls.sort();
    let mut want: Vec<String> = f
        .replicas
        .iter()
        .map(|r| format!("https://127.0.0.1:{}/metrics", r.port()))
        .collect();
    want.sort();
    assert_eq!(urls, want, "each replica scraped at its own address");
    assert!(m.failures.is_empty(), "{:?}", m.failures);
    for t in &m.targets {
        assert_eq!(
            t.name,
            format!(
                "apiserver-127.0.0.1-{}",
                t.url
                    .as_deref()
                    .unwrap()
                    .split(':')
                    .nth(2)
                    .unwrap()
                    .trim_end_matches("/metrics")
            )
        );
        assert_eq!(t.version.as_deref(), Some("v1.33.0"));
        let h: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(cap.join("health").join(format!("{}.json", t.name))).unwrap(),
        )
        .unwrap();
        let checks = h["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 4, "readyz and livez in each of 2 rounds");
        assert!(checks.iter().any(|c| c["endpoint"] == "/readyz?verbose"
            && c["body"].as_str().unwrap().contains("readyz check passed")));
        assert!(checks.iter().all(|c| c["ok"] == true));
    }
    // The capture loads like any dump, with the families record keeps.
    let keep = Keep::Names(
        ["apiserver_request_total", "go_memstats_mallocs_total"]
            .map(String::from)
            .into(),
    );
    let ds = capture::load(&[DumpArg::parse(cap.to_str().unwrap()).unwrap()], &keep).unwrap();
    assert_eq!(ds.targets.len(), 2);
    for t in &ds.targets {
        assert_eq!(t.snapshots.len(), 2);
        assert_eq!(t.role, cptriage::source::Role::Apiserver);
    }
    assert!(ds.store.has_metric("apiserver_request_total"));
    assert!(ds.store.has_metric("process_start_time_seconds"));
    assert!(
        !ds.store.has_metric("go_memstats_mallocs_total"),
        "unknown families are not recorded by default"
    );
    // Each replica was asked for gzip and got the token.
    for r in &f.replicas {
        let reqs = r.requests.lock().unwrap();
        let m: Vec<&Request> = reqs.iter().filter(|q| q.path == "/metrics").collect();
        assert_eq!(m.len(), 2);
        assert!(m
            .iter()
            .all(|q| q.accept_encoding.as_deref().is_some_and(|a| a.contains("gzip"))));
    }
}

#[test]
fn token_in_kubeconfig_scrapes_every_replica_found_by_the_endpointslice() {
    let f = Fixture::new(None);
    let kc = f.kubeconfig("kc", &f.ca_data(), &format!("    token: {CANARY_TOKEN}\n"));
    let (cap, out) = f.record(&kc, &[]);
    assert_ok(&out);
    assert!(
        text(&out.stderr).contains("from the default/kubernetes EndpointSlice"),
        "{}",
        text(&out.stderr)
    );
    assert_both_replicas(&f, &cap);
    assert!(
        f.lb.paths().iter().all(|p| !p.starts_with("/metrics")),
        "the load balancer is not scraped"
    );
    support::assert_absent_everywhere(CANARY_TOKEN, &[&out.stdout, &out.stderr], &cap);
}

#[test]
fn token_file_through_a_kubeconfig_list() {
    let f = Fixture::new(None);
    write(f.dir.path(), "token", &format!("{CANARY_TOKEN}\n"));
    // The first file has the cluster and context; the second the user, with a relative token path.
    let first = f.kubeconfig("first", &f.ca_data(), "    token: overridden-below\n");
    let first_text = std::fs::read_to_string(&first).unwrap();
    let cut = first_text.find("users:").unwrap();
    std::fs::write(&first, &first_text[..cut]).unwrap();
    let second = write(
        f.dir.path(),
        "second",
        "users:\n- name: u\n  user:\n    tokenFile: token\n",
    );
    let cap = f.dir.path().join("cap-list");
    let env = format!("{}:{}", first.display(), second.display());
    let out = support::cptriage(
        &[
            "record",
            "--out",
            cap.to_str().unwrap(),
            "--interval",
            "300ms",
            "--duration",
            "600ms",
        ],
        &[("KUBECONFIG", &env)],
    );
    assert_ok(&out);
    assert_both_replicas(&f, &cap);
    support::assert_absent_everywhere(CANARY_TOKEN, &[&out.stdout, &out.stderr], &cap);
}

#[test]
fn client_certificate_data_and_the_canary_key_stays_secret() {
    let f = Fixture::new(None);
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&f.client.cert_pem),
        b64(&f.client.key_pem)
    );
    let kc = f.kubeconfig("kc", &f.ca_data(), &user);
    let (cap, out) = f.record(&kc, &[]);
    assert_ok(&out);
    assert_both_replicas(&f, &cap);
    // A line from the middle of the key, and the key's base64 form in the kubeconfig.
    let key_line = f.client.key_pem.lines().nth(1).unwrap().to_string();
    support::assert_absent_everywhere(&key_line, &[&out.stdout, &out.stderr], &cap);
    support::assert_absent_everywhere(&b64(&f.client.key_pem)[..40], &[&out.stdout, &out.stderr], &cap);
}

fn exec_plugin(f: &Fixture, api_version: &str) -> PathBuf {
    let script = format!(
        "#!/bin/sh\n# an exec credential plugin\n[ \"$1\" = get-token ] || exit 9\n[ \"$PLUGIN_ENV\" = yes ] || exit 8\ncase \"$KUBERNETES_EXEC_INFO\" in *'\"interactive\":false'*) ;; *) exit 7;; esac\nprintf '{{\"apiVersion\":\"{api_version}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{CANARY_TOKEN}\"}}}}'\n"
    );
    let p = write(
        f.dir.path(),
        &format!("plugin-{}", api_version.replace('/', "_")),
        &script,
    );
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p
}

#[test]
fn exec_credential_plugins_v1_and_v1beta1() {
    let f = Fixture::new(None);
    for v in [
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
    ] {
        let plugin = exec_plugin(&f, v);
        let user = format!(
            "    exec:\n      apiVersion: {v}\n      command: {}\n      args: [get-token]\n      env: [{{name: PLUGIN_ENV, value: \"yes\"}}]\n      interactiveMode: Never\n",
            plugin.display()
        );
        let kc = f.kubeconfig(&format!("kc-{}", v.len()), &f.ca_data(), &user);
        let (cap, out) = f.record(&kc, &["--no-discovery"]);
        assert_ok(&out);
        let m = manifest_of(&cap);
        assert_eq!(m.targets.len(), 1);
        assert_eq!(
            m.targets[0].url.as_deref(),
            Some(&*format!("https://localhost:{}/metrics", f.lb.port()))
        );
        support::assert_absent_everywhere(CANARY_TOKEN, &[&out.stdout, &out.stderr], &cap);
    }
    // A failing plugin is a configuration error naming the plugin.
    let user = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/false\n      interactiveMode: Never\n";
    let kc = f.kubeconfig("kc-false", &f.ca_data(), user);
    let (_, out) = f.record(&kc, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("exec credential plugin `/bin/false`: exited with"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn wrong_ca_is_an_unknown_authority_and_exit_3() {
    let f = Fixture::new(None);
    let other = Ca::new("some other ca");
    let kc = f.kubeconfig(
        "kc",
        &format!("    certificate-authority-data: {}\n", b64(&other.pem())),
        &format!("    token: {CANARY_TOKEN}\n"),
    );
    let (cap, out) = f.record(&kc, &[]);
    assert_every_scrape_failed(&out, "signed by an unknown certificate authority");
    // Discovery failed too: the load-balanced address was used, with a warning.
    assert!(
        text(&out.stderr).contains("replica discovery failed"),
        "{}",
        text(&out.stderr)
    );
    // A CA that does not sign the server does not fix itself: the rounds
    // stop after the first one, which the manifest records.
    assert!(
        text(&out.stderr).contains("stopped after the first round"),
        "{}",
        text(&out.stderr)
    );
    let m = manifest_of(&cap);
    assert_eq!(m.failures.len(), 1);
    support::assert_absent_everywhere(CANARY_TOKEN, &[&out.stdout, &out.stderr], &cap);
}

#[test]
fn expired_and_misnamed_server_certificates_are_told_apart() {
    // Expired.
    let f = {
        let tmp = Fixture::new(None);
        let expired = tmp.ca.expired_server(&["localhost", "127.0.0.1"]);
        // Rebuild with the same CA: a fixture whose servers present the expired certificate.
        rebuild(tmp, expired)
    };
    let kc = f.kubeconfig("kc", &f.ca_data(), &format!("    token: {CANARY_TOKEN}\n"));
    let (_, out) = f.record(&kc, &["--no-discovery"]);
    assert_every_scrape_failed(&out, "the server certificate has expired");
    // Valid, but for another name.
    let f = {
        let tmp = Fixture::new(None);
        let other = tmp.ca.server(&["apiserver.other.example"]);
        rebuild(tmp, other)
    };
    let kc = f.kubeconfig("kc", &f.ca_data(), &format!("    token: {CANARY_TOKEN}\n"));
    let (_, out) = f.record(&kc, &["--no-discovery"]);
    assert_every_scrape_failed(&out, "not valid for the name");
}

/// The fixture's servers restarted with `cert` (same CA and client).
fn rebuild(f: Fixture, cert: Leaf) -> Fixture {
    let body = Arc::new(support::realdata(CAPTURE));
    let gz = Arc::new(Response::compress(&body));
    let der = der_of(&f.client.cert_pem);
    let lb = apiserver(&f.ca, &cert, der, body, gz, None);
    Fixture {
        dir: f.dir,
        ca: f.ca,
        client: f.client,
        replicas: Vec::new(),
        lb,
    }
}

#[test]
fn unauthorized_and_forbidden() {
    let f = Fixture::new(None);
    let kc = f.kubeconfig("kc401", &f.ca_data(), "    token: not-a-valid-token\n");
    let (_, out) = f.record(&kc, &["--no-discovery"]);
    assert_every_scrape_failed(&out, "HTTP 401 Unauthorized");
    let kc = f.kubeconfig("kc403", &f.ca_data(), &format!("    token: {FORBIDDEN_TOKEN}\n"));
    let (_, out) = f.record(&kc, &[]);
    assert_every_scrape_failed(
        &out,
        "the identity lacks `get` on the non-resource URL `/metrics`",
    );
    assert!(text(&out.stderr).contains("HTTP 403"), "{}", text(&out.stderr));
}

#[test]
fn insecure_skip_tls_verify_works_and_says_so_loudly() {
    let f = Fixture::new(None);
    let kc = f.kubeconfig(
        "kc",
        "    insecure-skip-tls-verify: true\n",
        &format!("    token: {CANARY_TOKEN}\n"),
    );
    let (cap, out) = f.record(&kc, &[]);
    assert_ok(&out);
    assert!(
        text(&out.stderr).contains("TLS verification is OFF"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("TLS verification was OFF for"),
        "{}",
        text(&out.stdout)
    );
    let h: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            cap.join("health")
                .join(format!("apiserver-127.0.0.1-{}.json", f.replicas[0].port())),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(h["tls_verified"], false);
}

#[test]
fn kubectl_plugin_name_behaves_identically() {
    let f = Fixture::new(None);
    let bin = f.dir.path().join("kubectl-cptriage");
    std::fs::copy(env!("CARGO_BIN_EXE_cptriage"), &bin).unwrap();
    let kc = f.kubeconfig("kc", &f.ca_data(), &format!("    token: {CANARY_TOKEN}\n"));
    let cap = f.dir.path().join("cap-plugin");
    // As `kubectl cptriage record --kubeconfig … --context …` runs it.
    let out = std::process::Command::new(&bin)
        .args([
            "record",
            "--out",
            cap.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ])
        .args(["--context", "test", "--interval", "300ms", "--duration", "600ms"])
        .env("HOME", "/nonexistent")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_ok(&out);
    assert_both_replicas(&f, &cap);
    let a = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .unwrap();
    let b = support::cptriage(&["--version"], &[]);
    assert_eq!(a.stdout, b.stdout);
    // Usage and errors say what the user typed: `kubectl cptriage`.
    let help = std::process::Command::new(&bin).arg("--help").output().unwrap();
    let help = text(&help.stdout);
    assert!(help.contains("Usage: kubectl cptriage <COMMAND>"), "{help}");
    let bad = std::process::Command::new(&bin)
        .args(["diagnose", "--nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("kubectl cptriage diagnose"),
        "{}",
        text(&bad.stderr)
    );
    assert!(
        !text(&bad.stderr).contains("kubectl-cptriage"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn a_replica_switch_behind_the_load_balancer_is_reported() {
    let ca = Ca::new("switch ca");
    let cert = ca.server(&["localhost"]);
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let lb = Server::start(
        Some(Tls {
            server: cert,
            client_ca_pem: None,
        }),
        move |r| {
            if r.path != "/metrics" {
                return Response::ok("ok");
            }
            // Two processes behind the balancer: the start time alternates.
            let k = n2.fetch_add(1, Ordering::Relaxed);
            Response::ok(format!(
                "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}\n# TYPE apiserver_request_total counter\napiserver_request_total{{code=\"200\"}} {}\n",
                1000 + (k % 2),
                10 * k
            ))
        },
    );
    let d = tempfile::tempdir().unwrap();
    let kc = write(
        d.path(),
        "kc",
        &format!(
            "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://localhost:{}\n    certificate-authority-data: {}\ncontexts:\n- name: t\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: x}}\n",
            lb.port(),
            b64(&ca.pem())
        ),
    );
    let cap2 = d.path().join("cap2");
    let out = support::cptriage(
        &[
            "record",
            "--out",
            cap2.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--interval",
            "200ms",
            "--duration",
            "600ms",
            "--no-discovery",
        ],
        &[],
    );
    assert_ok(&out);
    assert!(
        text(&out.stdout).contains("a different process answered at round 2"),
        "{}",
        text(&out.stdout)
    );
    let h: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cap2.join("health").join("apiserver-localhost.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(h["switches"].as_array().unwrap().len(), 2);
    // Each process is its own target: no rate spans the two.
    let m = manifest_of(&cap2);
    let names: Vec<&str> = m.targets.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["apiserver-localhost", "apiserver-localhost.p2"]);
    let ds = capture::load(&[DumpArg::parse(cap2.to_str().unwrap()).unwrap()], &Keep::All).unwrap();
    let starts = |inst: &str| -> Vec<f64> {
        ds.store
            .by_name("process_start_time_seconds")
            .filter(|s| s.labels.get("instance") == Some(inst))
            .flat_map(|s| {
                s.points
                    .iter()
                    .filter(|p| !cptriage::store::is_stale(p.v))
                    .map(|p| p.v)
            })
            .collect()
    };
    assert_eq!(starts("apiserver-localhost"), [1000.0, 1000.0]);
    assert_eq!(starts("apiserver-localhost.p2"), [1001.0]);
}

#[test]
fn record_refuses_a_non_empty_directory_and_needs_a_target() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("precious"), "user data").unwrap();
    let out = support::cptriage(
        &[
            "record",
            "--out",
            d.path().to_str().unwrap(),
            "--etcd",
            "http://127.0.0.1:1",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("exists and is not empty"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("precious")).unwrap(),
        "user data"
    );
    let out = support::cptriage(&["record", "--out", d.path().join("new").to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no target to scrape"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn in_cluster_service_account() {
    let f = Fixture::new(None);
    let sa = f.dir.path().join("sa");
    std::fs::create_dir(&sa).unwrap();
    write(&sa, "token", CANARY_TOKEN);
    write(&sa, "ca.crt", &f.ca.pem());
    let acc = cptriage::source::live::kubeconfig::resolve(&cptriage::source::live::KubeconfigOptions {
        in_cluster: Some(cptriage::source::live::kubeconfig::InCluster {
            dir: sa,
            host: "localhost".into(),
            port: f.lb.port().to_string(),
        }),
        ..Default::default()
    })
    .unwrap();
    let plan = cptriage::source::live::plan_targets(&cptriage::source::live::TargetOptions {
        apiserver: Some(acc),
        discover: true,
        timeout: std::time::Duration::from_secs(5),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(plan.targets.len(), 2, "{:?}", plan.warnings);
    let cfg = cptriage::source::live::LiveConfig {
        targets: plan.targets,
        interval: std::time::Duration::from_millis(100),
        rounds: 2,
        timeout: std::time::Duration::from_secs(5),
        keep: Keep::All,
        retain_snapshots: true,
        limits: Default::default(),
        stop: None,
    };
    let res = cptriage::source::live::scrape_rounds(&cfg, &mut |_| {});
    assert!(res.failures.is_empty(), "{:?}", res.failures);
    assert_eq!(res.snapshots.len(), 4);
    // Keep::All: the exposition exactly as served.
    assert_eq!(*res.snapshots[0].bytes, support::realdata(CAPTURE));
    let ds = res
        .dataset(&Keep::Names(["go_memstats_mallocs_total".to_string()].into()))
        .unwrap();
    assert!(ds.store.has_metric("go_memstats_mallocs_total"));
}

#[test]
fn proxy_url_from_the_kubeconfig_is_used() {
    let f = Fixture::new(None);
    let proxy = support::server::ConnectProxy::start();
    let kc = f.kubeconfig(
        "kc",
        &format!(
            "{}    proxy-url: http://127.0.0.1:{}\n",
            f.ca_data(),
            proxy.addr.port()
        ),
        &format!("    token: {CANARY_TOKEN}\n"),
    );
    let (cap, out) = f.record(&kc, &[]);
    assert_ok(&out);
    assert!(
        text(&out.stderr).contains("replicas cannot be scraped one by one through the proxy"),
        "{}",
        text(&out.stderr)
    );
    let m = manifest_of(&cap);
    assert_eq!(m.targets.len(), 1);
    assert!(m.failures.is_empty(), "{:?}", m.failures);
    assert_eq!(m.targets[0].version.as_deref(), Some("v1.33.0"));
    let seen = proxy.targets.lock().unwrap().clone();
    // Every request went through the proxy, by the cluster's name.
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|t| *t == format!("localhost:{}", f.lb.port())),
        "{seen:?}"
    );
    assert_eq!(f.lb.paths().iter().filter(|p| *p == "/metrics").count(), 2);
    support::assert_absent_everywhere(CANARY_TOKEN, &[&out.stdout, &out.stderr], &cap);
}

#[test]
fn tls_server_name_is_verified_instead_of_the_server_address() {
    // The certificate names only `localhost`; the kubeconfig's server is an IP address.
    let tmp = Fixture::new(None);
    let only_name = tmp.ca.server(&["localhost"]);
    let f = rebuild(tmp, only_name);
    let user = format!("    token: {CANARY_TOKEN}\n");
    let kc_text = |extra: &str| {
        format!(
            "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n{}{extra}contexts:\n- name: t\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user:\n{user}",
            f.lb.port(),
            f.ca_data()
        )
    };
    let plain = write(f.dir.path(), "kc-ip", &kc_text(""));
    let (_, out) = f.record(&plain, &["--no-discovery"]);
    assert_every_scrape_failed(&out, "not valid for the name");
    let named = write(
        f.dir.path(),
        "kc-name",
        &kc_text("    tls-server-name: localhost\n"),
    );
    let (cap, out) = f.record(&named, &["--no-discovery"]);
    assert_ok(&out);
    let m = manifest_of(&cap);
    assert_eq!(
        m.targets[0].url.as_deref(),
        Some(&*format!("https://127.0.0.1:{}/metrics", f.lb.port()))
    );
    assert_eq!(m.targets[0].name, "apiserver-127.0.0.1");
}

#[test]
fn unreachable_replicas_fall_back_to_the_load_balancer() {
    let f = Fixture::new(None);
    // An EndpointSlice listing replicas at addresses where nothing listens.
    let dead: Vec<u16> = (0..2).map(|_| support::free_port()).collect();
    let slices = serde_json::json!({"items": [{
        "endpoints": [{"addresses": ["127.0.0.1"]}],
        "ports": [{"name": "https", "port": dead[0]}],
    }, {
        "endpoints": [{"addresses": ["127.0.0.1"]}],
        "ports": [{"name": "https", "port": dead[1]}],
    }]})
    .to_string();
    let body = Arc::new(support::realdata(CAPTURE));
    let gz = Arc::new(Response::compress(&body));
    let cert = f.ca.server(&["localhost"]);
    let lb = apiserver(&f.ca, &cert, der_of(&f.client.cert_pem), body, gz, Some(slices));
    let kc = write(
        f.dir.path(),
        "kc-dead",
        &format!(
            "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://localhost:{}\n{}contexts:\n- name: t\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user:\n    token: {CANARY_TOKEN}\n",
            lb.port(),
            f.ca_data()
        ),
    );
    let (cap, out) = f.record(&kc, &[]);
    assert_ok(&out);
    assert!(
        text(&out.stderr)
            .contains("no apiserver replica is reachable at its own address (connection refused"),
        "{}",
        text(&out.stderr)
    );
    let m = manifest_of(&cap);
    assert_eq!(m.targets.len(), 1);
    assert_eq!(
        m.targets[0].url.as_deref(),
        Some(&*format!("https://localhost:{}/metrics", lb.port()))
    );
    assert!(m.failures.is_empty());
}

#[test]
fn proxy_environment_is_honoured_like_kubectl() {
    let f = {
        let tmp = Fixture::new(None);
        let named = tmp.ca.server(&["apiserver.cluster.test", "localhost"]);
        rebuild(tmp, named)
    };
    let proxy = support::server::ConnectProxy::start();
    let user = format!("    token: {CANARY_TOKEN}\n");
    let text_of = |server: &str| {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{}contexts:\n- name: test\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user:\n{user}",
            f.ca_data()
        )
    };
    let named = write(
        f.dir.path(),
        "kc-named",
        &text_of(&format!("https://apiserver.cluster.test:{}", f.lb.port())),
    );
    let proxy_url = format!("http://127.0.0.1:{}", proxy.addr.port());
    let record = |kc: &Path, env: &[(&str, &str)]| {
        let cap = f
            .dir
            .path()
            .join(format!("cap{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        let out = support::cptriage(
            &[
                "record",
                "--out",
                cap.to_str().unwrap(),
                "--kubeconfig",
                kc.to_str().unwrap(),
                "--no-discovery",
                "--interval",
                "300ms",
                "--duration",
                "600ms",
                "--timeout",
                "3s",
            ],
            env,
        );
        (cap, out)
    };

    // HTTPS_PROXY carries the requests for a name only the proxy can reach.
    let (cap, out) = record(&named, &[("HTTPS_PROXY", &proxy_url)]);
    assert_ok(&out);
    assert!(
        text(&out.stderr).contains("through the proxy in HTTPS_PROXY"),
        "{}",
        text(&out.stderr)
    );
    let seen = proxy.targets.lock().unwrap().clone();
    assert!(
        !seen.is_empty()
            && seen
                .iter()
                .all(|t| *t == format!("apiserver.cluster.test:{}", f.lb.port())),
        "{seen:?}"
    );
    assert!(manifest_of(&cap).failures.is_empty());

    // NO_PROXY exempts the cluster's domain: the name is then looked up
    // directly, which fails — proving the proxy was not used.
    let before = proxy.targets.lock().unwrap().len();
    let (_, out) = record(
        &named,
        &[("HTTPS_PROXY", &proxy_url), ("NO_PROXY", ".cluster.test")],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(proxy.targets.lock().unwrap().len(), before);

    // localhost never goes through a proxy, even a dead one.
    let local = f.kubeconfig("kc-local", &f.ca_data(), &user);
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let (cap, out) = record(&local, &[("HTTPS_PROXY", &dead), ("https_proxy", &dead)]);
    assert_ok(&out);
    assert!(!text(&out.stderr).contains("through the proxy"));
    assert!(manifest_of(&cap).failures.is_empty());
    assert_eq!(proxy.targets.lock().unwrap().len(), before);
}

/// An apiserver that accepts tokens `rot-N` and records them; when
/// `revoke_first_after` is set, `rot-1` is refused (401) after that many
/// `/metrics` requests.
fn rotating_apiserver(
    ca: &Ca,
    revoke_first_after: Option<usize>,
) -> (Server, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let body = Arc::new(support::realdata(CAPTURE));
    let metrics = Arc::new(AtomicUsize::new(0));
    let server = Server::start(
        Some(Tls {
            server: ca.server(&["localhost", "127.0.0.1"]),
            client_ca_pem: None,
        }),
        move |r| {
            let tok = r
                .authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer "))
                .unwrap_or("")
                .to_string();
            if !tok.starts_with("rot-") {
                return Response::status(401, r#"{"kind":"Status","message":"Unauthorized"}"#);
            }
            if r.path == "/metrics" {
                seen2.lock().unwrap().push(tok.clone());
                let n = metrics.fetch_add(1, Ordering::SeqCst);
                if revoke_first_after.is_some_and(|k| n >= k) && tok == "rot-1" {
                    return Response::status(401, r#"{"kind":"Status","message":"Unauthorized"}"#);
                }
                return Response::ok(body.to_vec());
            }
            Response::ok("ok\n")
        },
    );
    (server, seen)
}

/// An exec plugin that hands out `rot-1`, `rot-2`, … (counting its runs in a
/// file), each expiring `expires_in` seconds later when given.
fn rotating_plugin(dir: &Path, expires_in: Option<u64>) -> PathBuf {
    let count = dir.join("runs");
    let expiry = match expires_in {
        Some(s) => format!(
            ",\"expirationTimestamp\":\"%s\"}}}}' \"$n\" \"$(date -u -d \"@$(( $(date +%s) + {s} ))\" +%Y-%m-%dT%H:%M:%SZ)\"\n"
        ),
        None => "}}' \"$n\"\n".to_string(),
    };
    let script = format!(
        "#!/bin/sh\nn=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"rot-%s\"{expiry}",
        c = count.display()
    );
    let p = write(dir, "rotating-plugin", &script);
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p
}

#[test]
fn exec_plugin_tokens_are_renewed_on_expiry_and_after_a_401() {
    let ca = Ca::new("rotation ca");
    for (expires_in, revoke) in [(Some(6u64), None), (None, Some(1usize))] {
        let dir = tempfile::tempdir().unwrap();
        let (server, seen) = rotating_apiserver(&ca, revoke);
        let plugin = rotating_plugin(dir.path(), expires_in);
        let kc = write(
            dir.path(),
            "kc",
            &format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://localhost:{}\n    certificate-authority-data: {}\ncontexts:\n- name: t\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
                server.port(),
                b64(&ca.pem()),
                plugin.display()
            ),
        );
        let cap = dir.path().join("cap");
        let out = support::cptriage(
            &[
                "record",
                "--out",
                cap.to_str().unwrap(),
                "--kubeconfig",
                kc.to_str().unwrap(),
                "--no-discovery",
                "--interval",
                "300ms",
                "--duration",
                "3s",
            ],
            &[],
        );
        assert_ok(&out);
        let m = manifest_of(&cap);
        assert!(m.failures.is_empty(), "{:?}", m.failures);
        let seen = seen.lock().unwrap().clone();
        let distinct: std::collections::BTreeSet<&String> = seen.iter().collect();
        let runs: usize = std::fs::read_to_string(dir.path().join("runs"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        match revoke {
            // Expiring 6 s after issue and renewed 5 s before: a new token
            // about every second of the 3 s recording.
            None => {
                assert!(runs >= 3, "plugin runs {runs}, tokens {seen:?}");
                assert!(distinct.len() >= 3, "{seen:?}");
            }
            // No expiry: one renewal, caused by the 401, then rot-2 throughout.
            Some(_) => {
                assert_eq!(runs, 2, "{seen:?}");
                assert_eq!(seen.first().map(String::as_str), Some("rot-1"));
                assert!(seen[2..].iter().all(|t| t == "rot-2"), "{seen:?}");
            }
        }
        for t in distinct {
            support::assert_absent_everywhere(t, &[&out.stdout, &out.stderr], &cap);
        }
    }
}
