//! kube-apiserver access from a kubeconfig or from the in-cluster service account.
//!
//! Resolution follows kubectl: `--kubeconfig FILE` (one file), else `KUBECONFIG`
//! (a colon-separated list merged so that the first file to define a name or a
//! value wins), else `~/.kube/config`; else, inside a pod, the service account
//! (`/var/run/secrets/kubernetes.io/serviceaccount` with
//! `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`). Relative paths in a
//! kubeconfig are relative to the file that holds them.
//!
//! Credentials are held in [`Secret`], whose `Debug` never shows them; no error
//! message of this module contains a token or a key.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Deserialize;

use crate::limits::read_capped;
pub use crate::secret::Secret;

/// The in-cluster service account directory.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The name in-cluster access verifies apiserver certificates for.
pub const IN_CLUSTER_NAME: &str = "kubernetes.default.svc";

/// How long an exec credential plugin may run.
const EXEC_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest exec plugin output read.
const EXEC_MAX_OUTPUT: u64 = 1 << 20;

/// How cptriage proves its identity to the apiserver.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// Bearer token.
    pub token: Option<Secret>,
    /// Client certificate chain (PEM).
    pub client_cert_pem: Option<Vec<u8>>,
    /// Client private key (PEM).
    pub client_key_pem: Option<Secret>,
    /// When the token expires (an exec plugin's `expirationTimestamp`).
    pub token_expiry: Option<std::time::SystemTime>,
    /// How to renew the token (exec plugin, token file).
    pub refresh: Option<super::token::TokenRefresh>,
}

impl Credentials {
    /// The token as a source the live targets share (renewed as it expires).
    pub fn token_source(&self) -> Option<super::token::TokenSource> {
        self.token
            .clone()
            .map(|t| super::token::TokenSource::new(t, self.token_expiry, self.refresh.clone()))
    }
}

/// A token file that cannot be read again.
#[derive(Debug, thiserror::Error)]
#[error("`{}`: {source}", .path.display())]
pub struct TokenFileError {
    path: PathBuf,
    source: std::io::Error,
}

/// Reads a token file (trimmed).
fn read_token_file(path: &Path) -> Result<Secret, TokenFileError> {
    let t = read_capped(path).map_err(|source| TokenFileError {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Secret::new(String::from_utf8_lossy(&t).trim().as_bytes()))
}

/// A refresh that reads `path` again every minute (and after a 401).
fn file_refresh(path: PathBuf) -> super::token::TokenRefresh {
    super::token::TokenRefresh::new("token file", Some(super::token::FILE_PERIOD), move || {
        read_token_file(&path).map(|t| (t, None)).map_err(Into::into)
    })
}

/// Everything needed to talk to one cluster's apiserver.
#[derive(Clone, Debug)]
pub struct ApiAccess {
    /// The apiserver URL from the kubeconfig (`https://host:port`, no trailing slash).
    pub server: String,
    /// The name the server certificate must be valid for (`tls-server-name`, else the server's host).
    pub tls_server_name: String,
    /// Trusted CA certificates (PEM); `None` uses the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// TLS verification disabled (`insecure-skip-tls-verify`): reported loudly.
    pub insecure: bool,
    pub credentials: Credentials,
    /// `proxy-url` of the cluster.
    pub proxy_url: Option<String>,
    /// Where the access came from, for the report (`kubeconfig /x (context c)`, `in-cluster service account`).
    pub origin: String,
}

/// Where to look for a kubeconfig.
#[derive(Clone, Debug, Default)]
pub struct KubeconfigOptions {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// The value of `KUBECONFIG` (passed in so that tests and callers control it).
    pub kubeconfig_env: Option<String>,
    /// The home directory (for `~/.kube/config`).
    pub home: Option<PathBuf>,
    /// In-cluster fallback: service account directory and `KUBERNETES_SERVICE_HOST`/`PORT`.
    pub in_cluster: Option<InCluster>,
    /// `HTTPS_PROXY`/`NO_PROXY`…, used when the cluster has no `proxy-url`.
    pub proxy_env: super::proxy::ProxyEnv,
}

impl KubeconfigOptions {
    /// The options as kubectl would take them from this process's environment.
    pub fn from_env(kubeconfig: Option<PathBuf>, context: Option<String>) -> KubeconfigOptions {
        let host = std::env::var("KUBERNETES_SERVICE_HOST").ok();
        let port = std::env::var("KUBERNETES_SERVICE_PORT").ok();
        KubeconfigOptions {
            kubeconfig,
            context,
            kubeconfig_env: std::env::var("KUBECONFIG").ok().filter(|s| !s.is_empty()),
            home: std::env::var_os("HOME").map(PathBuf::from),
            in_cluster: match (host, port) {
                (Some(h), Some(p)) if !h.is_empty() => Some(InCluster {
                    dir: PathBuf::from(SERVICE_ACCOUNT_DIR),
                    host: h,
                    port: p,
                }),
                _ => None,
            },
            proxy_env: super::proxy::ProxyEnv::from_process(),
        }
    }
}

/// The in-cluster service account.
#[derive(Clone, Debug)]
pub struct InCluster {
    pub dir: PathBuf,
    pub host: String,
    pub port: String,
}

/// A kubeconfig that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("`{path}`: cannot read kubeconfig: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}:{line}:{column}`: invalid kubeconfig: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "no kubeconfig found (no `--kubeconfig`, `KUBECONFIG` or `~/.kube/config`) and not running in a pod"
    )]
    NotFound,
    #[error("kubeconfig has no current context; name one with `--context`")]
    NoContext,
    #[error("context `{0}` not found in the kubeconfig")]
    ContextNotFound(String),
    #[error("context `{context}` names cluster `{cluster}`, which is not in the kubeconfig")]
    ClusterNotFound { context: String, cluster: String },
    #[error("context `{context}` names user `{user}`, which is not in the kubeconfig")]
    UserNotFound { context: String, user: String },
    #[error("cluster `{0}` has no `server`")]
    NoServer(String),
    #[error("cluster `{cluster}`: invalid server URL `{server}`")]
    BadServer { cluster: String, server: String },
    #[error("`{what}`: cannot read `{path}`: {source}")]
    ReadFile {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{0}` is not valid base64")]
    BadBase64(&'static str),
    #[error("exec credential plugin `{command}`: {message}")]
    Exec { command: String, message: String },
    #[error("user `{user}` {message}")]
    Incomplete { user: String, message: &'static str },
    #[error("user `{0}` uses basic authentication (username/password), which cptriage does not support")]
    BasicAuth(String),
    #[error("user `{user}` uses the `{provider}` auth provider, which cptriage does not support; use an exec plugin")]
    AuthProvider { user: String, provider: String },
    /// Any of the above, with the kubeconfig file(s) it was found in.
    #[error("`{files}`: {error}")]
    InFiles {
        files: String,
        error: Box<KubeconfigError>,
    },
}

#[derive(Debug, Default, Deserialize)]
struct RawConfig {
    #[serde(default)]
    clusters: Option<Vec<Named<RawCluster>>>,
    #[serde(default)]
    users: Option<Vec<Named<RawUser>>>,
    #[serde(default)]
    contexts: Option<Vec<Named<RawContext>>>,
    #[serde(default, rename = "current-context")]
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    #[serde(default = "Option::default")]
    value: Option<T>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawCluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct RawUser {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    #[serde(rename = "client-certificate")]
    client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data")]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key")]
    client_key: Option<String>,
    #[serde(rename = "client-key-data")]
    client_key_data: Option<String>,
    username: Option<String>,
    exec: Option<RawExec>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<RawAuthProvider>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct RawAuthProvider {
    name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawExec {
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<RawEnv>>,
    api_version: Option<String>,
    interactive_mode: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
struct RawEnv {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct RawContext {
    cluster: Option<String>,
    user: Option<String>,
}

/// A merged kubeconfig: each entry remembers the directory of its file.
#[derive(Default)]
struct Merged {
    clusters: BTreeMap<String, (RawCluster, PathBuf)>,
    users: BTreeMap<String, (RawUser, PathBuf)>,
    contexts: BTreeMap<String, RawContext>,
    current: Option<String>,
    files: Vec<PathBuf>,
}

fn read_config(path: &Path) -> Result<RawConfig, KubeconfigError> {
    let text = read_capped(path)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not valid UTF-8 text"))
        })
        .map_err(|e| KubeconfigError::Read {
            path: path.into(),
            source: e,
        })?;
    if text.trim().is_empty() {
        return Ok(RawConfig::default());
    }
    crate::source::yaml::from_str(&text).map_err(|e| KubeconfigError::Parse {
        path: path.into(),
        line: e.line,
        column: e.column,
        message: e.message,
    })
}

fn merge(paths: &[PathBuf]) -> Result<Merged, KubeconfigError> {
    let mut m = Merged::default();
    for p in paths {
        let c = read_config(p)?;
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        for n in c.clusters.unwrap_or_default() {
            m.clusters
                .entry(n.name)
                .or_insert_with(|| (n.value.unwrap_or_default(), dir.clone()));
        }
        for n in c.users.unwrap_or_default() {
            m.users
                .entry(n.name)
                .or_insert_with(|| (n.value.unwrap_or_default(), dir.clone()));
        }
        for n in c.contexts.unwrap_or_default() {
            m.contexts
                .entry(n.name)
                .or_insert_with(|| n.value.unwrap_or_default());
        }
        if m.current.is_none() {
            m.current = c.current_context.filter(|s| !s.is_empty());
        }
        m.files.push(p.clone());
    }
    Ok(m)
}

/// Finds the kubeconfig files to read, kubectl's way; `None` when there is none.
fn kubeconfig_files(o: &KubeconfigOptions) -> Result<Option<Vec<PathBuf>>, KubeconfigError> {
    if let Some(p) = &o.kubeconfig {
        if !p.exists() {
            return Err(KubeconfigError::Read {
                path: p.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            });
        }
        return Ok(Some(vec![p.clone()]));
    }
    if let Some(list) = &o.kubeconfig_env {
        let files: Vec<PathBuf> = list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        if !files.is_empty() {
            return Ok(Some(files));
        }
    }
    if let Some(h) = &o.home {
        let p = h.join(".kube").join("config");
        if p.is_file() {
            return Ok(Some(vec![p]));
        }
    }
    Ok(None)
}

/// Whether a kubeconfig or an in-cluster service account is available.
pub fn available(o: &KubeconfigOptions) -> bool {
    matches!(kubeconfig_files(o), Ok(Some(_)) | Err(_)) || o.in_cluster.is_some()
}

/// Resolves the apiserver access (runs an exec credential plugin when the user has one).
/// Without a `proxy-url`, the proxy environment applies as it does for kubectl.
pub fn resolve(o: &KubeconfigOptions) -> Result<ApiAccess, KubeconfigError> {
    let mut acc = match kubeconfig_files(o)? {
        Some(files) => from_files(&files, o.context.as_deref()).map_err(|e| match e {
            KubeconfigError::Read { .. } | KubeconfigError::Parse { .. } => e,
            e => KubeconfigError::InFiles {
                files: files
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":"),
                error: Box::new(e),
            },
        })?,
        None => match &o.in_cluster {
            Some(ic) => in_cluster(ic)?,
            None => return Err(KubeconfigError::NotFound),
        },
    };
    if acc.proxy_url.is_none() {
        if let Some((proxy, var)) = o.proxy_env.proxy_for(&acc.server) {
            acc.proxy_url = Some(proxy);
            acc.origin.push_str(&format!(", through the proxy in {var}"));
        }
    }
    Ok(acc)
}

fn resolve_path(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

fn read_file(what: &'static str, path: PathBuf) -> Result<Vec<u8>, KubeconfigError> {
    read_capped(&path).map_err(|e| KubeconfigError::ReadFile {
        what,
        path,
        source: e,
    })
}

fn b64(what: &'static str, s: &str) -> Result<Vec<u8>, KubeconfigError> {
    let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(clean)
        .map_err(|_| KubeconfigError::BadBase64(what))
}

fn host_of(server: &str) -> Option<String> {
    let u = reqwest::Url::parse(server).ok()?;
    let h = u.host_str()?;
    Some(h.trim_start_matches('[').trim_end_matches(']').to_string())
}

fn from_files(files: &[PathBuf], context: Option<&str>) -> Result<ApiAccess, KubeconfigError> {
    let m = merge(files)?;
    let ctx_name = match context {
        Some(c) => c.to_string(),
        None => m.current.clone().ok_or(KubeconfigError::NoContext)?,
    };
    let ctx = m
        .contexts
        .get(&ctx_name)
        .ok_or_else(|| KubeconfigError::ContextNotFound(ctx_name.clone()))?;
    let cluster_name = ctx.cluster.clone().unwrap_or_default();
    let (cluster, cdir) = m
        .clusters
        .get(&cluster_name)
        .ok_or_else(|| KubeconfigError::ClusterNotFound {
            context: ctx_name.clone(),
            cluster: cluster_name.clone(),
        })?;
    let server = cluster
        .server
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| KubeconfigError::NoServer(cluster_name.clone()))?;
    let server = server.trim_end_matches('/').to_string();
    let host = host_of(&server).ok_or_else(|| KubeconfigError::BadServer {
        cluster: cluster_name.clone(),
        server: crate::secret::scrub(&super::client::redact_url(&server)).into_owned(),
    })?;
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(d), _) if !d.is_empty() => Some(b64("certificate-authority-data", d)?),
        (_, Some(p)) if !p.is_empty() => Some(read_file("certificate-authority", resolve_path(cdir, p))?),
        _ => None,
    };
    let user_name = ctx.user.clone().unwrap_or_default();
    let credentials = match m.users.get(&user_name) {
        Some((u, udir)) => user_credentials(&user_name, u, udir, &server, cluster)?,
        None if user_name.is_empty() => Credentials::default(),
        None => {
            return Err(KubeconfigError::UserNotFound {
                context: ctx_name,
                user: user_name,
            })
        }
    };
    let files_text = m
        .files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    Ok(ApiAccess {
        server,
        tls_server_name: cluster
            .tls_server_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(host),
        ca_pem,
        insecure: cluster.insecure_skip_tls_verify,
        credentials,
        proxy_url: cluster.proxy_url.clone().filter(|s| !s.is_empty()),
        origin: format!("kubeconfig {files_text} (context {ctx_name})"),
    })
}

fn user_credentials(
    name: &str,
    u: &RawUser,
    dir: &Path,
    server: &str,
    cluster: &RawCluster,
) -> Result<Credentials, KubeconfigError> {
    let mut c = Credentials::default();
    if let Some(t) = u.token.as_deref().filter(|t| !t.is_empty()) {
        c.token = Some(Secret::new(t.trim().as_bytes()));
    } else if let Some(f) = u.token_file.as_deref().filter(|t| !t.is_empty()) {
        let path = resolve_path(dir, f);
        let t = read_file("tokenFile", path.clone())?;
        c.token = Some(Secret::new(String::from_utf8_lossy(&t).trim().as_bytes()));
        c.refresh = Some(file_refresh(path));
    }
    c.client_cert_pem = match (&u.client_certificate_data, &u.client_certificate) {
        (Some(d), _) if !d.is_empty() => Some(b64("client-certificate-data", d)?),
        (_, Some(p)) if !p.is_empty() => Some(read_file("client-certificate", resolve_path(dir, p))?),
        _ => None,
    };
    c.client_key_pem = match (&u.client_key_data, &u.client_key) {
        (Some(d), _) if !d.is_empty() => Some(Secret::new(b64("client-key-data", d)?)),
        (_, Some(p)) if !p.is_empty() => Some(Secret::new(read_file("client-key", resolve_path(dir, p))?)),
        _ => None,
    };
    match (&c.client_cert_pem, &c.client_key_pem) {
        (Some(_), None) => {
            return Err(KubeconfigError::Incomplete {
                user: name.to_string(),
                message: "has a client certificate but no `client-key` or `client-key-data`",
            })
        }
        (None, Some(_)) => {
            return Err(KubeconfigError::Incomplete {
                user: name.to_string(),
                message: "has a client key but no `client-certificate` or `client-certificate-data`",
            })
        }
        _ => {}
    }
    if let Some(e) = &u.exec {
        let got = run_exec(e, dir, server, cluster)?;
        if got.token.is_some() {
            c.token = got.token;
            c.token_expiry = got.token_expiry;
            let (e, dir, server, cluster) =
                (e.clone(), dir.to_path_buf(), server.to_string(), cluster.clone());
            c.refresh = Some(super::token::TokenRefresh::new("exec plugin", None, move || {
                let got = run_exec(&e, &dir, &server, &cluster)?;
                match got.token {
                    Some(t) => Ok((t, got.token_expiry)),
                    None => Err("the plugin returned no token".into()),
                }
            }));
        }
        if got.client_cert_pem.is_some() {
            c.client_cert_pem = got.client_cert_pem;
            c.client_key_pem = got.client_key_pem;
        }
    }
    if c.token.is_none() && c.client_cert_pem.is_none() {
        if u.username.is_some() {
            return Err(KubeconfigError::BasicAuth(name.to_string()));
        }
        if let Some(p) = &u.auth_provider {
            return Err(KubeconfigError::AuthProvider {
                user: name.to_string(),
                provider: p.name.clone().unwrap_or_default(),
            });
        }
    }
    Ok(c)
}

#[derive(Deserialize)]
struct ExecCredential {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    token: Option<String>,
    expiration_timestamp: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

/// Runs a plugin's command with a time limit, its output capped; its
/// standard output, or why it failed (its standard error scrubbed of
/// anything that looks like a secret).
fn run_plugin(mut cmd: Command) -> Result<Vec<u8>, String> {
    let mut child = cmd.spawn().map_err(|x| format!("cannot start: {x}"))?;
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(p) = out_pipe {
            let _ = p.take(EXEC_MAX_OUTPUT).read_to_end(&mut out);
        }
        out
    });
    let ereader = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(p) = err_pipe {
            let _ = p.take(EXEC_MAX_OUTPUT).read_to_end(&mut out);
        }
        out
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > EXEC_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("did not finish within {}s", EXEC_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(x) => return Err(format!("cannot wait for it: {x}")),
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = ereader.join().unwrap_or_default();
    if !status.success() {
        // A plugin may print its token (or a key) on failure: keep only what
        // does not look like one.
        let msg = crate::secret::scrub(String::from_utf8_lossy(&stderr).trim()).into_owned();
        let msg: String = msg.chars().take(300).collect();
        return Err(format!(
            "exited with {status}{}",
            if msg.is_empty() {
                String::new()
            } else {
                format!(": {msg}")
            }
        ));
    }
    Ok(stdout)
}

/// The credentials in an exec plugin's output (an `ExecCredential` of
/// `api_version`): a token (with its expiry) or a client certificate and key.
fn credentials(stdout: &[u8], api_version: &str) -> Result<Credentials, String> {
    let cred: ExecCredential = serde_json::from_slice(stdout)
        .map_err(|x| format!("output is not an ExecCredential: {}", strip_json_detail(&x)))?;
    if cred.kind.as_deref() != Some("ExecCredential") {
        return Err("output is not an ExecCredential (`kind` differs)".into());
    }
    if let Some(v) = &cred.api_version {
        if v != api_version {
            let shown = if crate::secret::is_plain_identifier(v) {
                format!("`{v}`")
            } else {
                "(a value not shown)".to_string()
            };
            return Err(format!("output has apiVersion {shown}, expected `{api_version}`"));
        }
    }
    let st = cred.status.ok_or_else(|| "output has no `status`".to_string())?;
    let mut c = Credentials::default();
    if let Some(t) = st.token.filter(|t| !t.is_empty()) {
        c.token = Some(Secret::new(t.into_bytes()));
    }
    if let Some(ts) = st.expiration_timestamp.filter(|t| !t.is_empty()) {
        let t = chrono::DateTime::parse_from_rfc3339(&ts)
            .map_err(|_| "`expirationTimestamp` in its output is not an RFC 3339 time".to_string())?;
        let secs = t.timestamp().max(0) as u64;
        c.token_expiry = Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
    }
    match (st.client_certificate_data, st.client_key_data) {
        (Some(cert), Some(key)) if !cert.is_empty() && !key.is_empty() => {
            c.client_cert_pem = Some(cert.into_bytes());
            c.client_key_pem = Some(Secret::new(key.into_bytes()));
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err("output has only one of `clientCertificateData` and `clientKeyData`".into())
        }
        _ => {}
    }
    if c.token.is_none() && c.client_cert_pem.is_none() {
        return Err("output has neither a token nor a client certificate".into());
    }
    Ok(c)
}

/// Runs an exec credential plugin (`client.authentication.k8s.io/v1` or
/// `v1beta1`), never interactively: its stdin is closed.
fn run_exec(
    e: &RawExec,
    dir: &Path,
    server: &str,
    _cluster: &RawCluster,
) -> Result<Credentials, KubeconfigError> {
    let command = e.command.clone().unwrap_or_default();
    let err = |message: String| KubeconfigError::Exec {
        command: command.clone(),
        message,
    };
    if command.is_empty() {
        return Err(err("no `command`".into()));
    }
    let api_version = e
        .api_version
        .clone()
        .unwrap_or_else(|| "client.authentication.k8s.io/v1".into());
    if !matches!(
        api_version.as_str(),
        "client.authentication.k8s.io/v1" | "client.authentication.k8s.io/v1beta1"
    ) {
        return Err(err(format!(
            "unsupported apiVersion `{api_version}` (expected client.authentication.k8s.io/v1 or v1beta1)"
        )));
    }
    if e.interactive_mode.as_deref() == Some("Always") {
        return Err(err(
            "the plugin needs an interactive terminal (`interactiveMode: Always`); cptriage runs plugins non-interactively".into(),
        ));
    }
    // A command with a path separator is relative to the kubeconfig's directory.
    let program = if command.contains('/') {
        resolve_path(dir, &command)
    } else {
        PathBuf::from(&command)
    };
    let info = serde_json::json!({
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": false, "cluster": {"server": server}},
    });
    let mut cmd = Command::new(&program);
    cmd.args(e.args.clone().unwrap_or_default())
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in e.env.clone().unwrap_or_default() {
        cmd.env(v.name, v.value);
    }
    let stdout = run_plugin(cmd).map_err(err)?;
    credentials(&stdout, &api_version).map_err(err)
}

/// serde_json errors may quote input (a token); keep only the position.
fn strip_json_detail(e: &serde_json::Error) -> String {
    format!("invalid JSON at line {} column {}", e.line(), e.column())
}

/// The in-cluster service account access.
pub fn in_cluster(ic: &InCluster) -> Result<ApiAccess, KubeconfigError> {
    let token = read_file("service account token", ic.dir.join("token"))?;
    let ca = read_file("service account CA", ic.dir.join("ca.crt"))?;
    let host = if ic.host.contains(':') && !ic.host.starts_with('[') {
        format!("[{}]", ic.host)
    } else {
        ic.host.clone()
    };
    Ok(ApiAccess {
        server: format!("https://{host}:{}", ic.port),
        // Every apiserver certificate is valid for the service's name; node
        // addresses of the replicas may not be.
        tls_server_name: IN_CLUSTER_NAME.into(),
        ca_pem: Some(ca),
        insecure: false,
        credentials: Credentials {
            token: Some(Secret::new(String::from_utf8_lossy(&token).trim().as_bytes())),
            // The kubelet rotates the projected token: read it again as client-go does.
            refresh: Some(file_refresh(ic.dir.join("token"))),
            ..Default::default()
        },
        proxy_url: None,
        origin: format!("in-cluster service account {}", ic.dir.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const A: &str = "apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c1
  cluster:
    server: https://api.example.com:6443/
    certificate-authority: ca.crt
    proxy-url: http://127.0.0.1:3128
contexts:
- name: a
  context: {cluster: c1, user: u1}
- name: b
  context: {cluster: c1, user: u2}
users:
- name: u1
  user:
    token: tok-a
- name: u2
  user:
    tokenFile: tok.txt
";

    #[test]
    fn kubectl_merge_first_wins_and_relative_paths() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "ca.crt", "CA-PEM");
        write(d.path(), "tok.txt", "tok-from-file\n");
        let a = write(d.path(), "a.yaml", A);
        let b = write(
            d.path(),
            "b.yaml",
            "current-context: b\nusers:\n- name: u1\n  user: {token: other}\n",
        );
        let o = KubeconfigOptions {
            kubeconfig_env: Some(format!("{}:/nonexistent:{}", a.display(), b.display())),
            ..Default::default()
        };
        let acc = resolve(&o).unwrap();
        assert_eq!(acc.server, "https://api.example.com:6443");
        assert_eq!(acc.tls_server_name, "api.example.com");
        assert_eq!(acc.ca_pem.as_deref(), Some(&b"CA-PEM"[..]));
        assert_eq!(acc.credentials.token.as_ref().unwrap().expose(), b"tok-a");
        assert_eq!(acc.proxy_url.as_deref(), Some("http://127.0.0.1:3128"));
        let o2 = KubeconfigOptions {
            context: Some("b".into()),
            ..o.clone()
        };
        let acc = resolve(&o2).unwrap();
        assert_eq!(acc.credentials.token.as_ref().unwrap().expose(), b"tok-from-file");
        assert!(!format!("{acc:?}").contains("tok-from-file"));
        let o3 = KubeconfigOptions {
            context: Some("zz".into()),
            ..o
        };
        let e = resolve(&o3).unwrap_err().to_string();
        assert!(
            e.starts_with("`") && e.contains("a.yaml:") && e.contains("b.yaml`: "),
            "{e}"
        );
        assert!(e.ends_with("`: context `zz` not found in the kubeconfig"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "k", "clusters: [\n");
        let o = KubeconfigOptions {
            kubeconfig: Some(p.clone()),
            ..Default::default()
        };
        let e = resolve(&o).unwrap_err().to_string();
        assert!(e.starts_with(&format!("`{}:", p.display())), "{e}");
        assert!(e.contains("invalid kubeconfig"), "{e}");
        let o = KubeconfigOptions::default();
        assert!(matches!(resolve(&o), Err(KubeconfigError::NotFound)));
    }

    #[test]
    fn a_certificate_without_its_key_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "k",
            "current-context: a\nclusters: [{name: c, cluster: {server: 'https://h:1'}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {client-certificate-data: Q0VSVA==}}]\n",
        );
        let o = KubeconfigOptions {
            kubeconfig: Some(p),
            ..Default::default()
        };
        let e = resolve(&o).unwrap_err().to_string();
        assert!(
            e.ends_with("/k`: user `u` has a client certificate but no `client-key` or `client-key-data`"),
            "{e}"
        );
    }

    #[test]
    fn home_kube_config_is_the_fallback_and_in_cluster_the_last_resort() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".kube")).unwrap();
        write(&d.path().join(".kube"), "config", A);
        write(d.path(), "ca.crt", "CA");
        let sa = tempfile::tempdir().unwrap();
        write(sa.path(), "token", "sa");
        write(sa.path(), "ca.crt", "CA");
        let o = KubeconfigOptions {
            kubeconfig_env: Some("/nonexistent/a:/nonexistent/b".into()),
            home: Some(d.path().into()),
            in_cluster: Some(InCluster {
                dir: sa.path().into(),
                host: "10.96.0.1".into(),
                port: "443".into(),
            }),
            ..Default::default()
        };
        // ca.crt is relative to ~/.kube: missing there, and the error says which file.
        let e = resolve(&o).unwrap_err().to_string();
        assert!(
            e.contains("certificate-authority") && e.contains(".kube/ca.crt"),
            "{e}"
        );
        write(&d.path().join(".kube"), "ca.crt", "CA");
        assert!(resolve(&o).unwrap().origin.contains(".kube/config"));
        let o = KubeconfigOptions { home: None, ..o };
        let a = resolve(&o).unwrap();
        assert_eq!(a.tls_server_name, IN_CLUSTER_NAME);
        assert!(a.origin.starts_with("in-cluster"));
    }

    #[test]
    fn in_cluster_service_account() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "token", "sa-token\n");
        write(d.path(), "ca.crt", "CA");
        let o = KubeconfigOptions {
            in_cluster: Some(InCluster {
                dir: d.path().into(),
                host: "10.96.0.1".into(),
                port: "443".into(),
            }),
            ..Default::default()
        };
        let a = resolve(&o).unwrap();
        assert_eq!(a.server, "https://10.96.0.1:443");
        assert_eq!(a.credentials.token.unwrap().expose(), b"sa-token");
    }
}
