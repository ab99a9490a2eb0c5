//! `query --prometheus` against a real Prometheus (`/usr/bin/prometheus`) served
//! over TLS with client-certificate verification and basic auth (its
//! `--web.config.file`): the `--prometheus-ca/-cert/-key/-user/-password-file`
//! options reach a real server, verification stays on unless turned off, and
//! each refusal is reported with its cause and without the password.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::pki::{self, Ca};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const USER: &str = "triage";
/// The password, and its bcrypt hash (cost 4) for Prometheus's web config.
const PASSWORD: &str = "tls-test-password";
const PASSWORD_BCRYPT: &str = "$2b$04$Cfzvu17jujmDwC.Nn4PWDeLdk73yF4/FOPQ7kCa.jvt/EpCYLzPra";

/// A Prometheus with an empty TSDB behind TLS + mTLS + basic auth; killed on drop.
struct TlsPrometheus {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for TlsPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsPrometheus {
    fn start(dir: &Path, ca: &Ca) -> TlsPrometheus {
        let server = ca.server(&["localhost", "127.0.0.1"]);
        let cert = pki::write(dir, "server.crt", &server.cert_pem);
        let key = pki::write(dir, "server.key", &server.key_pem);
        let ca_file = pki::write(dir, "ca.crt", &ca.pem());
        let web = pki::write(
            dir,
            "web.yml",
            &format!(
                "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\nbasic_auth_users:\n  {USER}: {PASSWORD_BCRYPT}\n",
                cert.display(),
                key.display(),
                ca_file.display()
            ),
        );
        let config = pki::write(dir, "prometheus.yml", "global:\n  evaluation_interval: 1h\n");
        let data = dir.join("data");
        let log = dir.join("prometheus.log");
        let port = support::free_port();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--web.config.file={}", web.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start prometheus");
        let mut p = TlsPrometheus { child, port, log };
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited with {status}: {}", p.log_text());
            }
            if p.log_text().contains("Server is ready to receive web requests") {
                return p;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "prometheus not ready after 30 s: {}",
                p.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// Runs `cptriage query --prometheus URL ARGS… 'vector(7)'`; (exit code, stdout + stderr).
fn query(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["query", "--prometheus", url, "--prometheus-timeout", "10s"];
    all.extend(args);
    all.push("vector(7)");
    let out = support::cptriage(&all, &[]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains(PASSWORD),
        "the password appears in the output: {text}"
    );
    (out.status.code(), text)
}

#[test]
fn tls_client_certificates_and_basic_auth_against_a_real_prometheus() {
    assert!(
        Path::new(PROMETHEUS).exists(),
        "{PROMETHEUS} missing (Debian package prometheus; scripts/test installs it)"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("cptriage test prometheus CA");
    let prom = TlsPrometheus::start(dir.path(), &ca);
    let client = ca.client("cptriage");
    let ca_file = pki::write(dir.path(), "client-ca.crt", &ca.pem());
    let cert = pki::write(dir.path(), "client.crt", &client.cert_pem);
    let key = pki::write(dir.path(), "client.key", &client.key_pem);
    let pw = pki::write(dir.path(), "password", &format!("{PASSWORD}\n"));
    let (ca_s, cert_s, key_s, pw_s) = (
        ca_file.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        pw.to_str().unwrap(),
    );
    let full = [
        "--prometheus-ca",
        ca_s,
        "--prometheus-cert",
        cert_s,
        "--prometheus-key",
        key_s,
        "--prometheus-user",
        USER,
        "--prometheus-password-file",
        pw_s,
    ];

    // Everything given: the query is answered by the real server.
    let (code, text) = query(&prom.url(), &full);
    assert_eq!(code, Some(0), "{text}\n{}", prom.log_text());
    assert!(text.contains('7'), "{text}");

    // Without the CA the server certificate is not trusted: verification is on.
    let (code, text) = query(&prom.url(), &full[2..]);
    assert_ne!(code, Some(0), "{text}");
    assert!(
        text.to_lowercase().contains("certificate"),
        "the refusal should name the certificate problem: {text}"
    );

    // Verification off, but no client certificate: the server refuses the handshake.
    let (code, text) = query(
        &prom.url(),
        &[
            "--prometheus-insecure-skip-tls-verify",
            "--prometheus-user",
            USER,
            "--prometheus-password-file",
            pw_s,
        ],
    );
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("rejected the client certificate"), "{text}");
    // …and turning verification off is loud.
    assert!(
        text.contains(&format!(
            "warning: TLS verification is OFF for {} (--prometheus-insecure-skip-tls-verify)",
            prom.url()
        )),
        "{text}"
    );

    // A wrong password: HTTP 401, reported as such.
    let wrong = pki::write(dir.path(), "wrong", "not-the-password\n");
    let mut args = full.to_vec();
    args[9] = wrong.to_str().unwrap();
    let (code, text) = query(&prom.url(), &args);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("401"), "{text}");
    assert!(!text.contains("not-the-password"), "{text}");

    // A client certificate from another CA is refused too.
    let other = Ca::new("someone else").client("intruder");
    let ocert = pki::write(dir.path(), "other.crt", &other.cert_pem);
    let okey = pki::write(dir.path(), "other.key", &other.key_pem);
    let mut args = full.to_vec();
    args[3] = ocert.to_str().unwrap();
    args[5] = okey.to_str().unwrap();
    let (code, text) = query(&prom.url(), &args);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("rejected the client certificate"), "{text}");
}

/// Every TLS failure in plain words, for the Prometheus client and the live
/// one alike (test servers on 127.0.0.1; no real Prometheus needed).
#[test]
fn tls_failures_are_named_plainly() {
    use support::server::{Response, Server, Tls};
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("cptriage tls ca");
    let ca_file = pki::write(dir.path(), "ca.crt", &ca.pem());
    let ca_s = ca_file.to_str().unwrap();
    let ok = |_: &support::server::Request| Response::ok("{}");
    let tls = |leaf: pki::Leaf| {
        Some(Tls {
            server: leaf,
            client_ca_pem: None,
        })
    };
    // The CA's own certificate presented as the server's.
    let ca_as_server = Server::start(
        tls(pki::Leaf {
            cert_pem: ca.pem(),
            key_pem: ca.issuer.key().serialize_pem(),
        }),
        ok,
    );
    let expired = Server::start(tls(ca.expired_server(&["localhost"])), ok);
    // Signed by another CA with the same name: the signature does not verify.
    let twin = Server::start(tls(Ca::new("cptriage tls ca").server(&["localhost"])), ok);
    // A plain-HTTP server on the port (answers a TLS hello with a 400, as Go does).
    let plain = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let plain_port = plain.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        use std::io::Write;
        for s in plain.incoming().take(8).flatten() {
            let mut s = s;
            let _ =
                s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let cases = [
        (
            ca_as_server.port(),
            "TLS: the server presented a CA certificate as its own",
        ),
        (expired.port(), "TLS: the server certificate has expired"),
        (
            twin.port(),
            "TLS: the server certificate's signature does not verify with the trusted CA",
        ),
        (plain_port, "TLS: the server does not speak TLS on this port"),
    ];
    for (port, want) in cases {
        let url = format!("https://localhost:{port}");
        let out = support::cptriage(
            &["query", "up", "--prometheus", &url, "--prometheus-ca", ca_s],
            &[],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains(want), "prometheus: `{want}` not in {err}");
        assert!(
            !err.contains("CaUsedAsEndEntity") && !err.contains("UnsupportedSignatureAlgorithm"),
            "{err}"
        );
        let etcd = format!("e0={url}");
        let out = support::cptriage(
            &[
                "diagnose",
                "--live",
                "--no-apiserver",
                "--etcd",
                &etcd,
                "--etcd-cacert",
                ca_s,
                "--interval",
                "100ms",
                "--duration",
                "200ms",
                "--timeout",
                "2s",
            ],
            &[],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains(want), "live: `{want}` not in {err}");
    }
}
