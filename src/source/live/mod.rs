//! The live source: scrape `/metrics` of every kube-apiserver replica, etcd
//! member and (optionally) kube-controller-manager every interval, together
//! with their health endpoints, and turn the rounds into a [`Dataset`] through
//! the same loader as captured dumps ([`ingest::load_memory`]), so that a live
//! run and `record` followed by `--dump` see the same data.
//!
//! A target that fails is evidence, not a crash: each failure is kept with its
//! reason (connection refused, timeout, which TLS problem, 401/403) while the
//! other targets go on. Every target of a round is scraped concurrently, each
//! with its own timeout, so a round takes about one timeout at worst.
//!
//! Credentials never leave the request: they are held in
//! [`Secret`](crate::secret::Secret), sent as sensitive headers or TLS identities, and
//! appear in no URL, message, capture or manifest.

pub mod client;
pub mod discover;
pub mod families;
pub mod filter;
pub mod kubeconfig;
pub mod proxy;
mod scrape;
pub mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::source::capture::manifest::{ManifestTarget, ScrapeFailure};
use crate::source::ingest::{self, Keep, MemorySnapshot};
use crate::source::{Dataset, Role};
use crate::store::Millis;

pub use crate::secret::Secret;
pub use client::{BodyLimits, Budget, ClientSpec, FailureKind, FetchError};
pub use kubeconfig::{ApiAccess, KubeconfigOptions};
pub use scrape::scrape_rounds;

/// At most this many targets are scraped.
pub const MAX_TARGETS: usize = 100;
/// At most this many rounds.
pub const MAX_ROUNDS: usize = 100_000;

/// kubeadm's etcd paths, shown in the help.
pub const KUBEADM_ETCD_CA: &str = "/etc/kubernetes/pki/etcd/ca.crt";
pub const KUBEADM_ETCD_CERT: &str = "/etc/kubernetes/pki/etcd/healthcheck-client.crt";
pub const KUBEADM_ETCD_KEY: &str = "/etc/kubernetes/pki/etcd/healthcheck-client.key";

/// One target to scrape.
#[derive(Clone, Debug)]
pub struct TargetSpec {
    pub name: String,
    pub role: Role,
    /// Why this role ("discovered from kubeconfig", "given on the command line").
    pub role_reason: String,
    /// The URL requested for metrics (its host may be the TLS verification name).
    pub metrics_url: String,
    /// The URL shown in reports and the manifest (the address really contacted, no credentials).
    pub display_url: String,
    /// Health endpoints (full URLs), checked every round.
    pub health_urls: Vec<String>,
    pub client: ClientSpec,
    /// The bearer token (shared by the targets of one identity, renewed as it expires).
    pub token: Option<token::TokenSource>,
    /// A load-balanced address: each process that answers becomes its own
    /// target (`NAME`, `NAME.p2`, …) so that no rate spans two processes.
    pub split_by_process: bool,
}

impl TargetSpec {
    /// Whether the server's identity is verified: HTTPS with certificate
    /// verification on. A plain-HTTP target is not (it has no certificate).
    pub fn tls_verified(&self) -> bool {
        self.metrics_url.starts_with("https://") && !self.client.insecure
    }

    /// Whether certificate verification was turned off for an HTTPS target
    /// (`--insecure-skip-tls-verify`, `insecure-skip-tls-verify: true`): loud.
    pub fn tls_skipped(&self) -> bool {
        self.metrics_url.starts_with("https://") && self.client.insecure
    }
}

/// What to scrape and how often.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    pub targets: Vec<TargetSpec>,
    pub interval: Duration,
    /// Number of rounds (at least two, so that rates exist).
    pub rounds: usize,
    /// Per request.
    pub timeout: Duration,
    /// Families to keep from each scrape (`Keep::All`: the exposition as received).
    pub keep: Keep,
    /// Keep the snapshots in [`LiveResult::snapshots`] (a recorder that writes
    /// them as they arrive turns this off to bound memory).
    pub retain_snapshots: bool,
    /// Caps on each `/metrics` body and on what all scrapes hold at once.
    pub limits: client::BodyLimits,
    /// Set (by Ctrl-C in `--watch`) to end the rounds: the round under way
    /// finishes, no new one starts.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl LiveConfig {
    /// Defaults suited to triage at 3 a.m.: 6 rounds 5 s apart, 4 s timeout.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
    pub const DEFAULT_DURATION: Duration = Duration::from_secs(30);
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(4);

    /// Rounds for a duration: one scrape every `interval` while `duration` lasts, at least two.
    pub fn rounds_for(duration: Duration, interval: Duration) -> usize {
        if interval.is_zero() {
            return 2;
        }
        let n = (duration.as_secs_f64() / interval.as_secs_f64()).ceil() as usize;
        n.clamp(2, MAX_ROUNDS)
    }
}

/// One health endpoint check.
#[derive(Clone, Debug, Serialize)]
pub struct HealthResult {
    pub target: String,
    pub round: usize,
    /// Unix milliseconds.
    pub time: Millis,
    /// The endpoint (path and query).
    pub endpoint: String,
    /// HTTP status, when a response came.
    pub status: Option<u16>,
    /// 2xx.
    pub ok: bool,
    /// The body (truncated), e.g. `/readyz?verbose` check lines or etcd's `{"health":"true"}`.
    pub body: String,
    pub error: Option<String>,
}

/// A scrape that failed, with its kind.
#[derive(Clone, Debug, Serialize)]
pub struct TargetFailure {
    pub target: String,
    pub round: usize,
    pub time: Millis,
    pub kind: FailureKind,
    pub error: String,
}

/// A different process answered between two rounds of one target (a load
/// balancer switched replicas, or the process restarted): rates across it are not valid.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReplicaSwitch {
    pub target: String,
    pub time: Millis,
    pub round: usize,
    pub before: String,
    pub after: String,
}

/// Timing of one round.
#[derive(Clone, Debug, Serialize)]
pub struct RoundStat {
    pub round: usize,
    pub started: Millis,
    pub elapsed_ms: u64,
}

/// Everything the rounds produced.
#[derive(Debug, Default)]
pub struct LiveResult {
    pub snapshots: Vec<MemorySnapshot>,
    /// Failed scrapes (the manifest's form).
    pub failures: Vec<ScrapeFailure>,
    /// The same failures with their kind and round.
    pub failure_details: Vec<TargetFailure>,
    pub health: Vec<HealthResult>,
    pub targets: Vec<ManifestTarget>,
    pub switches: Vec<ReplicaSwitch>,
    pub rounds: Vec<RoundStat>,
    /// Targets whose server certificate was not verified.
    pub unverified_tls: Vec<String>,
    /// Number of successful scrapes (also counted when snapshots are not retained).
    pub scraped: usize,
    /// Why the rounds stopped before the last one: every target failed the
    /// first round in a way a retry does not fix (nothing listening, no route,
    /// TLS or credentials refused).
    pub stopped_early: Option<String>,
}

impl LiveResult {
    /// The rounds as a [`Dataset`], loaded exactly as a capture of them would be.
    pub fn dataset(&self, keep: &Keep) -> Result<Dataset, ingest::DumpError> {
        let mut ds = ingest::load_memory(self.snapshots.clone(), self.failures.clone(), keep)?;
        // A target that never answered has no content to infer a role from:
        // it keeps the role it was given on the command line.
        for t in ds.targets.iter_mut().filter(|t| t.snapshots.is_empty()) {
            if let Some(m) = self.targets.iter().find(|m| m.name == t.name) {
                t.role = m.role;
                t.role_reason = "given on the command line".into();
            }
        }
        Ok(ds)
    }

    /// Every scrape failed.
    pub fn all_failed(&self) -> bool {
        self.scraped == 0
    }
}

/// What happens during the rounds (for progress display and recorders).
#[derive(Debug)]
pub enum LiveEvent<'a> {
    RoundStarted {
        round: usize,
        rounds: usize,
        targets: usize,
    },
    Snapshot(&'a MemorySnapshot),
    Failed(&'a TargetFailure),
    Switch(&'a ReplicaSwitch),
    RoundDone(&'a RoundStat),
}

/// A target list that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}")]
    Kubeconfig(#[from] kubeconfig::KubeconfigError),
    #[error("`{url}`: {message}")]
    BadUrl { url: String, message: String },
    #[error("target `{target}`: {source}")]
    Client {
        target: String,
        #[source]
        source: client::ClientError,
    },
    #[error("`{what}`: cannot read `{path}`: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{0}`: invalid target name (use letters, digits, `.`, `_` and `-`)")]
    BadName(String),
    #[error("target name `{0}` is used twice")]
    DuplicateName(String),
    #[error("too many targets ({0}; at most {MAX_TARGETS})")]
    TooMany(usize),
    #[error("no target to scrape: give `--etcd`, `--controller`, or a kubeconfig")]
    NoTargets,
}

/// TLS files for etcd (`--etcd-cacert/--etcd-cert/--etcd-key`).
#[derive(Clone, Debug, Default)]
pub struct EtcdTls {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub insecure: bool,
}

/// Everything that decides the target list.
#[derive(Clone, Debug, Default)]
pub struct TargetOptions {
    /// The apiserver access, when apiservers are scraped.
    pub apiserver: Option<ApiAccess>,
    /// Find every replica from the `default/kubernetes` EndpointSlice (else the kubeconfig's address only).
    pub discover: bool,
    /// `--etcd [NAME=]URL`.
    pub etcd: Vec<String>,
    pub etcd_tls: EtcdTls,
    /// `--controller [NAME=]URL` (scraped with the kubeconfig's credentials).
    pub controllers: Vec<String>,
    /// `--node [NAME=]URL`: node-exporters and cAdvisor endpoints (plain).
    pub nodes: Vec<String>,
    /// Timeout of the discovery request.
    pub timeout: Duration,
}

/// The `--node` targets: node-exporters and cAdvisor endpoints, scraped
/// without credentials, named `node-<host>` by default.
fn node_specs(
    o: &TargetOptions,
    specs: &mut Vec<TargetSpec>,
    alt: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<(), LiveError> {
    for arg in &o.nodes {
        let NamedTarget { name, metrics, .. } = named_target(arg, "http", "node", alt, warnings)?;
        specs.push(TargetSpec {
            name,
            role: Role::Node,
            role_reason: "given on the command line (--node)".into(),
            display_url: metrics.clone(),
            metrics_url: metrics,
            health_urls: Vec::new(),
            client: ClientSpec::default(),
            token: None,
            split_by_process: false,
        });
    }
    Ok(())
}

/// The target list and what planning it had to say.
#[derive(Debug, Default)]
pub struct Plan {
    pub targets: Vec<TargetSpec>,
    pub warnings: Vec<String>,
    /// How apiserver replicas were found, for the report.
    pub discovery: Option<String>,
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n != "health"
        && n != "manifest.yaml"
        && !n.starts_with('.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

/// A target given on the command line as `[NAME=]URL`.
struct NamedTarget {
    /// The given name, or `<prefix>-<host>`.
    name: String,
    url: reqwest::Url,
    /// The URL's path, or `/metrics` when it has none.
    metrics: String,
}

/// Reads a `[NAME=]URL` target argument; pushes onto `alt` the name to use
/// when two unnamed targets share a host (`<prefix>-<host>-<port>`, empty
/// for a named one).
fn named_target(
    arg: &str,
    default_scheme: &str,
    prefix: &str,
    alt: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<NamedTarget, LiveError> {
    let (name, url) = split_named(arg, default_scheme, warnings)?;
    let metrics = if url.path() == "/" || url.path().is_empty() {
        with_path(&url, "/metrics")
    } else {
        with_path(&url, url.path())
    };
    let host = host_label(&url);
    let port = url.port_or_known_default().unwrap_or(0);
    alt.push(if name.is_some() {
        String::new()
    } else {
        format!("{prefix}-{host}-{port}")
    });
    Ok(NamedTarget {
        name: name.unwrap_or_else(|| format!("{prefix}-{host}")),
        url,
        metrics,
    })
}

/// Splits `[NAME=]URL`. A `HOST:PORT` without a scheme (as etcdctl's
/// `--endpoints` takes it) gets `default_scheme`, and a note says so.
fn split_named(
    arg: &str,
    default_scheme: &str,
    warnings: &mut Vec<String>,
) -> Result<(Option<String>, reqwest::Url), LiveError> {
    let (name, url) = match arg.split_once('=') {
        Some((n, u)) if !n.contains("://") && !n.contains('/') => (Some(n.to_string()), u),
        _ => (None, arg),
    };
    let with_scheme;
    let url = if !url.contains("://") && !url.is_empty() {
        with_scheme = format!("{default_scheme}://{url}");
        warnings.push(format!(
            "`{}` has no scheme: using {default_scheme}:// (write http:// or https:// to choose)",
            client::redact_url(url)
        ));
        with_scheme.as_str()
    } else {
        url
    };
    let url = reqwest::Url::parse(url).map_err(|e| LiveError::BadUrl {
        url: client::redact_url(url),
        message: format!("not a URL: {e}"),
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(LiveError::BadUrl {
            url: client::redact_url(url.as_str()),
            message: "expected http://HOST:PORT or https://HOST:PORT".into(),
        });
    }
    if let Some(n) = &name {
        if !valid_name(n) {
            return Err(LiveError::BadName(n.clone()));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        warnings.push(format!(
            "`{}`: the user name and password in the URL are ignored and never stored (use client certificates)",
            client::redact_url(url.as_str())
        ));
    }
    Ok((name, url))
}

/// `base` with `path` (and query) replacing its path.
fn with_path(base: &reqwest::Url, path: &str) -> String {
    let mut u = base.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    let (p, q) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    u.set_path(p);
    u.set_query(q);
    u.to_string()
}

fn host_label(u: &reqwest::Url) -> String {
    sanitize(u.host_str().unwrap_or("unknown"))
}

fn read(what: &'static str, p: &PathBuf) -> Result<Vec<u8>, LiveError> {
    std::fs::read(p).map_err(|e| LiveError::Read {
        what,
        path: p.clone(),
        source: e,
    })
}

/// Names each `(default name, host-port name)`: the default unless two targets share it.
fn assign_names(specs: &mut [TargetSpec], alt: &[String]) -> Result<(), LiveError> {
    let mut counts = std::collections::HashMap::new();
    for s in specs.iter() {
        *counts.entry(s.name.clone()).or_insert(0usize) += 1;
    }
    for (s, a) in specs.iter_mut().zip(alt) {
        if counts.get(&s.name).copied().unwrap_or(0) > 1 && !a.is_empty() {
            s.name = a.clone();
        }
    }
    let mut seen = std::collections::HashSet::new();
    for s in specs.iter() {
        if !seen.insert(s.name.clone()) {
            return Err(LiveError::DuplicateName(s.name.clone()));
        }
    }
    Ok(())
}

/// Builds the target list: apiserver replicas (discovered, else the kubeconfig's
/// address with a warning), etcd members and controllers.
pub fn plan_targets(o: &TargetOptions) -> Result<Plan, LiveError> {
    // One token source for every target of the kubeconfig's identity.
    let api_token = o.apiserver.as_ref().and_then(|a| a.credentials.token_source());
    let mut plan = Plan::default();
    let mut specs: Vec<TargetSpec> = Vec::new();
    // Per target: the name used when its default name is shared (empty: user-chosen).
    let mut alt: Vec<String> = Vec::new();
    if let Some(api) = &o.apiserver {
        apiserver_targets(api, &api_token, o, &mut plan, &mut specs, &mut alt)?;
    }
    let etcd_client = {
        let opt = |flag, p: &Option<PathBuf>| p.as_ref().map(|p| read(flag, p)).transpose();
        let ca = opt("--etcd-cacert", &o.etcd_tls.ca)?;
        let cert = opt("--etcd-cert", &o.etcd_tls.cert)?;
        let key = opt("--etcd-key", &o.etcd_tls.key)?;
        ClientSpec {
            ca_pem: ca,
            insecure: o.etcd_tls.insecure,
            client_cert_pem: cert,
            client_key_pem: key.map(Secret::new),
            resolve: None,
            proxy_url: None,
        }
    };
    // etcdctl's rule for an endpoint without a scheme: TLS when TLS files are given.
    let etcd_scheme = if o.etcd_tls.ca.is_some() || o.etcd_tls.cert.is_some() {
        "https"
    } else {
        "http"
    };
    for arg in &o.etcd {
        let NamedTarget { name, url, metrics } =
            named_target(arg, etcd_scheme, "etcd", &mut alt, &mut plan.warnings)?;
        let plain = url.scheme() == "http";
        specs.push(TargetSpec {
            name,
            role: Role::Etcd,
            role_reason: "given on the command line (--etcd)".into(),
            display_url: metrics.clone(),
            metrics_url: metrics,
            health_urls: vec![with_path(&url, "/health")],
            client: if plain {
                ClientSpec::default()
            } else {
                etcd_client.clone()
            },
            token: None,
            split_by_process: false,
        });
    }
    for arg in &o.controllers {
        let NamedTarget { name, url, metrics } =
            named_target(arg, "https", "controller", &mut alt, &mut plan.warnings)?;
        let (cspec, token) = match &o.apiserver {
            Some(a) => (
                ClientSpec {
                    ca_pem: a.ca_pem.clone(),
                    insecure: a.insecure,
                    client_cert_pem: a.credentials.client_cert_pem.clone(),
                    client_key_pem: a.credentials.client_key_pem.clone(),
                    resolve: None,
                    proxy_url: None,
                },
                api_token.clone(),
            ),
            None => (ClientSpec::default(), None),
        };
        specs.push(TargetSpec {
            name,
            role: Role::Controller,
            role_reason: "given on the command line (--controller)".into(),
            display_url: metrics.clone(),
            metrics_url: metrics,
            health_urls: vec![with_path(&url, "/healthz")],
            client: cspec,
            token,
            split_by_process: false,
        });
    }
    node_specs(o, &mut specs, &mut alt, &mut plan.warnings)?;
    assign_names(&mut specs, &alt)?;
    if specs.is_empty() {
        return Err(LiveError::NoTargets);
    }
    if specs.len() > MAX_TARGETS {
        return Err(LiveError::TooMany(specs.len()));
    }
    for s in &specs {
        if !valid_name(&s.name) {
            return Err(LiveError::BadName(s.name.clone()));
        }
        client::build(&s.client).map_err(|source| LiveError::Client {
            target: s.name.clone(),
            source,
        })?;
        if s.tls_skipped() {
            plan.warnings.push(format!(
                "TLS verification is OFF for `{}` ({}): its identity is not checked",
                s.name, s.display_url
            ));
        }
    }
    plan.targets = specs;
    Ok(plan)
}

fn api_client_spec(api: &ApiAccess, resolve: Option<(String, Vec<SocketAddr>)>) -> ClientSpec {
    ClientSpec {
        ca_pem: api.ca_pem.clone(),
        insecure: api.insecure,
        client_cert_pem: api.credentials.client_cert_pem.clone(),
        client_key_pem: api.credentials.client_key_pem.clone(),
        resolve,
        proxy_url: api.proxy_url.clone(),
    }
}

/// The health endpoints of an apiserver.
const APISERVER_HEALTH: [&str; 2] = ["/readyz?verbose", "/livez?verbose"];

fn apiserver_targets(
    api: &ApiAccess,
    api_token: &Option<token::TokenSource>,
    o: &TargetOptions,
    plan: &mut Plan,
    specs: &mut Vec<TargetSpec>,
    alt: &mut Vec<String>,
) -> Result<(), LiveError> {
    let server = reqwest::Url::parse(&api.server).map_err(|e| LiveError::BadUrl {
        url: client::redact_url(&api.server),
        message: format!("not a URL: {e}"),
    })?;
    let host = server
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let (lb_req, lb_resolve) = lb_address(api, &server, &host, plan);
    let lb = || {
        let metrics = with_path(&server, "/metrics");
        TargetSpec {
            name: format!("apiserver-{}", host_label(&server)),
            role: Role::Apiserver,
            role_reason: format!("the kubeconfig's server ({})", api.origin),
            display_url: metrics,
            metrics_url: with_path(&lb_req, "/metrics"),
            health_urls: APISERVER_HEALTH.iter().map(|h| with_path(&lb_req, h)).collect(),
            client: api_client_spec(api, lb_resolve.clone()),
            token: api_token.clone(),
            split_by_process: true,
        }
    };
    if !o.discover {
        specs.push(lb());
        alt.push(String::new());
        plan.discovery = Some("replica discovery off: scraping the kubeconfig's server address".into());
        return Ok(());
    }
    if api.proxy_url.is_some() {
        // Through a proxy, the name resolves wherever the proxy sends it: a
        // replica cannot be addressed by the name its certificate is valid for.
        specs.push(lb());
        alt.push(String::new());
        plan.warnings.push(format!(
            "the kubeconfig sets `proxy-url`: replicas cannot be scraped one by one through the proxy; scraping the load-balanced address {}: successive scrapes may reach different replicas",
            client::redact_url(&api.server)
        ));
        return Ok(());
    }
    let replicas = match scrape::discover(api, lb_req.as_str(), lb_resolve.clone(), o.timeout) {
        Ok((r, how)) if !r.is_empty() => {
            plan.discovery = Some(how);
            r
        }
        Ok((_, how)) => {
            plan.warnings.push(format!(
                "apiserver replica discovery found no replica ({how}); scraping the load-balanced address {}: successive scrapes may reach different replicas",
                client::redact_url(&api.server)
            ));
            specs.push(lb());
            alt.push(String::new());
            return Ok(());
        }
        Err(e) => {
            plan.warnings.push(format!(
                "apiserver replica discovery failed ({e}); scraping the load-balanced address {}: successive scrapes may reach different replicas",
                client::redact_url(&api.server)
            ));
            specs.push(lb());
            alt.push(String::new());
            return Ok(());
        }
    };
    let (found, found_alt) = replica_specs(api, api_token, replicas, plan)?;
    // From a laptop, replica addresses are often unreachable while the load
    // balancer is not: then the load-balanced address is better than nothing.
    if let Some(why) = scrape::none_reachable(&found, o.timeout) {
        plan.warnings.push(format!(
            "no apiserver replica is reachable at its own address ({why}); scraping the load-balanced address {}: successive scrapes may reach different replicas",
            client::redact_url(&api.server)
        ));
        specs.push(lb());
        alt.push(String::new());
        return Ok(());
    }
    specs.extend(found);
    alt.extend(found_alt);
    Ok(())
}

/// The load-balanced address of the kubeconfig's server, and what its name
/// resolves to: verified for `tls-server-name` when it differs from the
/// server's host (and no proxy decides where the name goes).
fn lb_address(
    api: &ApiAccess,
    server: &reqwest::Url,
    host: &str,
    plan: &mut Plan,
) -> (reqwest::Url, Option<(String, Vec<SocketAddr>)>) {
    let mut lb_req = server.clone();
    let mut lb_resolve = None;
    if api.tls_server_name != host && api.proxy_url.is_none() {
        use std::net::ToSocketAddrs;
        let port = server.port_or_known_default().unwrap_or(443);
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map(|a| a.collect())
            .unwrap_or_default();
        match addrs {
            a if !a.is_empty() && lb_req.set_host(Some(&api.tls_server_name)).is_ok() => {
                lb_resolve = Some((api.tls_server_name.clone(), a));
            }
            _ => {
                lb_req = server.clone();
                plan.warnings.push(format!(
                    "cannot resolve `{host}`; the server certificate is verified for `{host}` instead of `{}`",
                    api.tls_server_name
                ));
            }
        }
    }
    (lb_req, lb_resolve)
}

/// The targets of the discovered apiserver replicas, each verified for the
/// cluster's name, and their alternative names; a replica listed as not
/// ready is a warning of the plan.
fn replica_specs(
    api: &ApiAccess,
    api_token: &Option<token::TokenSource>,
    replicas: Vec<discover::Replica>,
    plan: &mut Plan,
) -> Result<(Vec<TargetSpec>, Vec<String>), LiveError> {
    let name_is_ip = api.tls_server_name.parse::<std::net::IpAddr>().is_ok();
    let mut found: Vec<TargetSpec> = Vec::new();
    let mut found_alt: Vec<String> = Vec::new();
    for r in replicas {
        let ip = r.addr.ip().to_string();
        let direct = match r.addr {
            SocketAddr::V4(a) => format!("https://{a}"),
            SocketAddr::V6(a) => format!("https://[{}]:{}", a.ip(), a.port()),
        };
        let direct_url = reqwest::Url::parse(&direct).map_err(|e| LiveError::BadUrl {
            url: direct.clone(),
            message: e.to_string(),
        })?;
        // Verify the replica's certificate for the cluster's name: request the
        // name and resolve it to the replica's address. When the name is an IP
        // address, the replica's own address is verified instead.
        let (req_base, resolve) = if name_is_ip {
            (direct_url.clone(), None)
        } else {
            let mut u = direct_url.clone();
            u.set_host(Some(&api.tls_server_name))
                .map_err(|e| LiveError::BadUrl {
                    url: api.tls_server_name.clone(),
                    message: e.to_string(),
                })?;
            (u, Some((api.tls_server_name.clone(), vec![r.addr])))
        };
        if r.not_ready {
            plan.warnings.push(format!(
                "apiserver replica {direct} is listed as not ready; scraped anyway"
            ));
        }
        found.push(TargetSpec {
            name: format!("apiserver-{}", sanitize(&ip)),
            role: Role::Apiserver,
            role_reason: "discovered from the default/kubernetes endpoints".into(),
            metrics_url: with_path(&req_base, "/metrics"),
            display_url: with_path(&direct_url, "/metrics"),
            health_urls: APISERVER_HEALTH.iter().map(|h| with_path(&req_base, h)).collect(),
            client: api_client_spec(api, resolve),
            token: api_token.clone(),
            split_by_process: false,
        });
        found_alt.push(format!("apiserver-{}-{}", sanitize(&ip), r.addr.port()));
    }
    Ok((found, found_alt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_targets_are_named_by_host_then_port_when_shared() {
        let o = TargetOptions {
            etcd: vec![
                "http://127.0.0.1:2381".into(),
                "https://127.0.0.1:2379/".into(),
                "m3=https://10.0.0.3:2379".into(),
            ],
            ..Default::default()
        };
        let p = plan_targets(&o).unwrap();
        let names: Vec<&str> = p.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["etcd-127.0.0.1-2381", "etcd-127.0.0.1-2379", "m3"]);
        assert_eq!(p.targets[0].metrics_url, "http://127.0.0.1:2381/metrics");
        assert_eq!(p.targets[0].health_urls, ["http://127.0.0.1:2381/health"]);
        assert!(p.targets.iter().all(|t| t.role == Role::Etcd));
    }

    #[test]
    fn bad_targets_are_usage_errors() {
        let o = TargetOptions {
            etcd: vec!["ftp://x".into()],
            ..Default::default()
        };
        assert!(plan_targets(&o)
            .unwrap_err()
            .to_string()
            .contains("expected http://"));
        let o = TargetOptions {
            etcd: vec!["a/b=http://x:1".into()],
            ..Default::default()
        };
        assert!(plan_targets(&o).is_err());
        let o = TargetOptions {
            etcd: vec!["m=http://x:1".into(), "m=http://y:1".into()],
            ..Default::default()
        };
        assert_eq!(
            plan_targets(&o).unwrap_err().to_string(),
            "target name `m` is used twice"
        );
        assert!(matches!(
            plan_targets(&TargetOptions::default()),
            Err(LiveError::NoTargets)
        ));
    }

    #[test]
    fn credentials_in_urls_are_dropped() {
        let o = TargetOptions {
            etcd: vec!["http://user:hunter2@127.0.0.1:2381".into()],
            ..Default::default()
        };
        let p = plan_targets(&o).unwrap();
        assert!(!format!("{:?}", p.targets).contains("hunter2"));
        assert!(!format!("{:?}", p.warnings).contains("hunter2"));
        assert!(p.warnings[0].contains("user name and password in the URL are ignored"));
    }

    fn access() -> ApiAccess {
        ApiAccess {
            server: "https://api.example.com:6443".into(),
            tls_server_name: "api.example.com".into(),
            ca_pem: None,
            insecure: false,
            credentials: kubeconfig::Credentials {
                token: Some(Secret::new("t0k3n")),
                ..Default::default()
            },
            proxy_url: Some("http://127.0.0.1:3128".into()),
            origin: "test".into(),
        }
    }

    #[test]
    fn without_discovery_the_kubeconfig_server_is_scraped_and_controllers_use_its_credentials() {
        let o = TargetOptions {
            apiserver: Some(access()),
            discover: false,
            controllers: vec!["https://10.0.0.9:10257".into()],
            nodes: Vec::new(),
            ..Default::default()
        };
        let p = plan_targets(&o).unwrap();
        let names: Vec<&str> = p.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["apiserver-api.example.com", "controller-10.0.0.9"]);
        let api = &p.targets[0];
        assert_eq!(api.metrics_url, "https://api.example.com:6443/metrics");
        assert_eq!(
            api.health_urls,
            [
                "https://api.example.com:6443/readyz?verbose",
                "https://api.example.com:6443/livez?verbose"
            ]
        );
        assert_eq!(api.client.proxy_url.as_deref(), Some("http://127.0.0.1:3128"));
        let c = &p.targets[1];
        assert_eq!(c.role, Role::Controller);
        assert_eq!(
            c.token.as_ref().map(|t| t.current().expose().to_vec()),
            Some(b"t0k3n".to_vec())
        );
        assert_eq!(c.health_urls, ["https://10.0.0.9:10257/healthz"]);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert!(!format!("{p:?}").contains("t0k3n"));
    }

    #[test]
    fn insecure_targets_are_warned_about() {
        let mut a = access();
        a.insecure = true;
        let p = plan_targets(&TargetOptions {
            apiserver: Some(a),
            ..Default::default()
        })
        .unwrap();
        assert!(!p.targets[0].tls_verified());
        assert!(
            p.warnings.iter().any(|w| w.contains("TLS verification is OFF")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn rounds_cover_the_duration_and_are_at_least_two() {
        assert_eq!(
            LiveConfig::rounds_for(Duration::from_secs(30), Duration::from_secs(5)),
            6
        );
        assert_eq!(
            LiveConfig::rounds_for(Duration::from_secs(1), Duration::from_secs(5)),
            2
        );
        assert_eq!(
            LiveConfig::rounds_for(Duration::from_secs(31), Duration::from_secs(5)),
            7
        );
    }
}

#[cfg(test)]
mod client_setup_tests {
    use super::*;

    #[test]
    fn an_unusable_ca_file_is_a_planning_error() {
        let d = tempfile::tempdir().unwrap();
        let ca = d.path().join("ca.crt");
        std::fs::write(&ca, "not a certificate").unwrap();
        let o = TargetOptions {
            etcd: vec!["https://127.0.0.1:2379".into()],
            etcd_tls: EtcdTls {
                ca: Some(ca),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = plan_targets(&o).unwrap_err().to_string();
        assert!(e.starts_with("target `etcd-127.0.0.1`: the CA bundle"), "{e}");
    }
}
