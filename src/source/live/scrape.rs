//! Scrape rounds: every target (and each of its health endpoints) in its own
//! thread, each request with its own timeout, so a round lasts about one
//! timeout at worst whatever the number of targets.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::blocking::Client;

use super::client::{self, FailureKind, FetchError, MAX_HEALTH_BODY};
use super::discover;
use super::filter;
use super::{
    ApiAccess, HealthResult, LiveConfig, LiveEvent, LiveResult, ReplicaSwitch, RoundStat, TargetFailure,
    TargetSpec,
};
use crate::secret::Secret;
use crate::source::capture::manifest::{ManifestTarget, ScrapeFailure};
use crate::source::expfmt::{self, SampleRef};
use crate::source::ingest::MemorySnapshot;
use crate::store::Millis;

const METRICS_ACCEPT: &str = "text/plain;version=0.0.4;q=1,*/*;q=0.1";

fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// Finds apiserver replicas; returns them and how they were found.
/// Why the apiserver replicas could not be discovered.
#[derive(Debug, thiserror::Error)]
pub(super) enum DiscoverError {
    #[error("{0}")]
    Client(#[from] client::ClientError),
    /// Reading the EndpointSlice or the Endpoints failed.
    #[error("{what}: {source}")]
    Fetch {
        what: &'static str,
        #[source]
        source: FetchError,
    },
    /// The object read is not what the apiserver serves (the parser's message).
    #[error("{0}")]
    Parse(String),
}

pub(super) fn discover(
    api: &ApiAccess,
    base: &str,
    resolve: Option<(String, Vec<std::net::SocketAddr>)>,
    timeout: Duration,
) -> Result<(Vec<discover::Replica>, String), DiscoverError> {
    let spec = super::api_client_spec(api, resolve);
    let c = client::build(&spec)?;
    let token = api.credentials.token.as_ref();
    let base = base.trim_end_matches('/');
    let get = |path: &str| -> Result<Vec<u8>, FetchError> {
        let url = format!("{base}{path}");
        let f = client::get(&c, &url, token, "application/json", timeout, 16 << 20)?;
        if !(200..300).contains(&f.status) {
            let p = path.split('?').next().unwrap_or(path);
            return Err(match f.status {
                401 => client::status_error(401, p),
                403 => FetchError {
                    kind: FailureKind::Forbidden,
                    message: format!("HTTP 403 Forbidden: the identity cannot read `{p}`"),
                },
                s => client::status_error(s, p),
            });
        }
        Ok(f.body)
    };
    match get(discover::ENDPOINTSLICE_PATH) {
        Ok(b) => {
            let r = discover::parse_slices(&b).map_err(DiscoverError::Parse)?;
            if !r.is_empty() {
                return Ok((r, "from the default/kubernetes EndpointSlice".into()));
            }
        }
        Err(e) if matches!(e.kind, FailureKind::HttpStatus) => {}
        Err(source) => {
            return Err(DiscoverError::Fetch {
                what: "EndpointSlice",
                source,
            })
        }
    }
    let b = get(discover::ENDPOINTS_PATH).map_err(|source| DiscoverError::Fetch {
        what: "Endpoints",
        source,
    })?;
    Ok((
        discover::parse_endpoints(&b).map_err(DiscoverError::Parse)?,
        "from the default/kubernetes Endpoints".into(),
    ))
}

/// When no target answers at all (every `/livez` probe refused, unreachable or
/// timed out, all probed at once), the first reason; `None` as soon as one
/// answers anything (even an HTTP or TLS error).
pub(super) fn none_reachable(specs: &[TargetSpec], timeout: Duration) -> Option<String> {
    if specs.is_empty() {
        return None;
    }
    let results: Vec<Result<(), FetchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = specs
            .iter()
            .map(|t| {
                s.spawn(move || {
                    let c = client::build(&t.client).map_err(|e| FetchError {
                        kind: FailureKind::Other,
                        message: e.to_string(),
                    })?;
                    let url = t.health_urls.last().unwrap_or(&t.metrics_url);
                    let token = t.token.as_ref().map(|s| s.current());
                    client::get(&c, url, token.as_ref(), "text/plain", timeout, MAX_HEALTH_BODY).map(|_| ())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(FetchError {
                        kind: FailureKind::Other,
                        message: "probe failed".into(),
                    })
                })
            })
            .collect()
    });
    let unreachable = |r: &Result<(), FetchError>| {
        matches!(r, Err(e) if matches!(e.kind, FailureKind::ConnectionRefused
                        | FailureKind::ConnectionReset
                        | FailureKind::Timeout
                        | FailureKind::Unreachable))
    };
    if results.iter().all(unreachable) {
        results.into_iter().find_map(|r| r.err()).map(|e| e.message)
    } else {
        None
    }
}

/// What identifies the process behind a target.
#[derive(Clone, Debug, Default, PartialEq)]
struct Identity {
    process_start: Option<f64>,
    version: Option<String>,
}

impl Identity {
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = &self.version {
            parts.push(format!("version {v}"));
        }
        if let Some(s) = self.process_start {
            parts.push(format!("process started at {s}"));
        }
        parts.join(", ")
    }
}

/// Notes what a sample says about the process behind a target.
fn identity_sample(id: &mut Identity, s: &SampleRef<'_>) {
    match s.name {
        "process_start_time_seconds" => id.process_start = Some(s.value),
        "kubernetes_build_info" | "etcd_server_version" => {
            if let Some(v) =
                crate::source::version_of(s.name, s.labels.iter().map(|l| (l.name, l.value.as_ref())))
            {
                id.version = Some(v.to_string());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
fn identity(body: &[u8]) -> Identity {
    let mut id = Identity::default();
    let mut keep = |f: &str| crate::source::ingest::ALWAYS_KEEP.contains(&f);
    let mut sink = |s: &SampleRef<'_>| identity_sample(&mut id, s);
    let _ = expfmt::parse(body, &mut keep, &mut sink);
    id
}

enum JobResult {
    Metrics {
        target: usize,
        time: Millis,
        result: Result<(Vec<u8>, Identity), FetchError>,
    },
    Health(HealthResult),
}

/// Scrapes one target's `/metrics`: the body is filtered as it arrives (only
/// the kept families are held), within the per-target cap, the deadline and
/// the shared budget of [`LiveConfig::limits`].
fn scrape_metrics(t: &TargetSpec, c: &Client, cfg: &LiveConfig) -> Result<(Vec<u8>, Identity), FetchError> {
    let token = t.token.as_ref().map(|s| s.current());
    let open = |token: Option<&Secret>| client::open(c, &t.metrics_url, token, METRICS_ACCEPT, cfg.timeout);
    let mut resp = open(token.as_ref())?;
    // A 401 with a renewable token (expired or revoked): renew once and retry, as kubectl does.
    if resp.status().as_u16() == 401 {
        if let (Some(src), Some(used)) = (&t.token, &token) {
            if let Some(fresh) = src.after_unauthorized(used) {
                resp = open(Some(&fresh))?;
            }
        }
    }
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        let path = reqwest::Url::parse(&t.metrics_url)
            .map(|u| u.path().to_string())
            .unwrap_or_else(|_| "/metrics".into());
        return Err(client::status_error(status, &path));
    }
    let held = client::Held::new(&cfg.limits.budget);
    let mut body = client::Body::new(resp, cfg.limits.max_body, Some(&held), cfg.timeout);
    let mut id = Identity::default();
    let mut grow = |parsed: usize, kept: usize| {
        held.give(parsed as u64);
        held.take(kept as u64)
    };
    let kept = filter::filter_reader(
        &mut body,
        &cfg.keep,
        &mut |s| identity_sample(&mut id, s),
        &mut grow,
    )
    .map_err(|e| match e {
        expfmt::StreamError::Read(e) => {
            let mut f = client::read_failure(&e, cfg.timeout);
            match client::BodyError::of(&e) {
                Some(client::BodyError::TooLarge(_)) => f.message.push_str(" (see --max-body)"),
                Some(client::BodyError::TooSlow(_)) => f.message.push_str(" (see --timeout)"),
                _ => {}
            }
            f
        }
        expfmt::StreamError::Parse(e) => FetchError {
            kind: FailureKind::Other,
            message: format!("the response is not a Prometheus text exposition: {e}"),
        },
    })?;
    let mut bytes = kept.bytes;
    // A server that reflects the request's token into its metrics must not
    // put it into a capture.
    if let Some(tok) = &token {
        let mut known = crate::secret::KnownSecrets::new();
        known.add(tok.expose());
        known.scrub_bytes(&mut bytes);
    }
    Ok((bytes, id))
}

fn check_health(t: &TargetSpec, c: &Client, url: &str, round: usize, cfg: &LiveConfig) -> HealthResult {
    let endpoint = reqwest::Url::parse(url)
        .map(|u| match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        })
        .unwrap_or_else(|_| url.to_string());
    let token = t.token.as_ref().map(|s| s.current());
    let r = client::get(
        c,
        url,
        token.as_ref(),
        "text/plain,application/json",
        cfg.timeout,
        MAX_HEALTH_BODY,
    );
    let time = now_ms();
    match r {
        Ok(f) => {
            let ok = (200..300).contains(&f.status);
            HealthResult {
                target: t.name.clone(),
                round,
                time,
                endpoint,
                status: Some(f.status),
                ok,
                body: health_body(&f.body, token.as_ref()),
                error: if ok {
                    None
                } else {
                    Some(client::status_error(f.status, url_path(url)).message)
                },
            }
        }
        Err(e) => HealthResult {
            target: t.name.clone(),
            round,
            time,
            endpoint,
            status: None,
            ok: false,
            body: String::new(),
            error: Some(e.message),
        },
    }
}

/// The health body as kept: at most 8192 characters, without the token that
/// was sent (a server may reflect it) or anything that looks like a credential.
fn health_body(body: &[u8], token: Option<&Secret>) -> String {
    let mut known = crate::secret::KnownSecrets::new();
    if let Some(t) = token {
        known.add(t.expose());
    }
    let text: String = String::from_utf8_lossy(body).chars().take(8192).collect();
    known.scrub_str(&text)
}

fn url_path(url: &str) -> &str {
    url.split("://")
        .nth(1)
        .and_then(|r| r.find('/').map(|i| &r[i..]))
        .map(|p| p.split('?').next().unwrap_or(p))
        .unwrap_or("/")
}

/// What the rounds remember about each target (by index) from one scrape to
/// the next.
#[derive(Default)]
struct Tracking {
    versions: HashMap<usize, Option<String>>,
    last_id: HashMap<usize, Identity>,
    /// Per split target: the processes seen, in order of first appearance.
    processes: HashMap<usize, Vec<Identity>>,
    extra: Vec<(usize, ManifestTarget)>,
}

/// Scrapes every target `cfg.rounds` times, `cfg.interval` apart. Never fails:
/// a target that cannot be reached (or whose client cannot be set up) is a
/// failure in the result, and the others go on.
pub fn scrape_rounds(cfg: &LiveConfig, on_event: &mut dyn FnMut(LiveEvent<'_>)) -> LiveResult {
    let mut res = LiveResult::default();
    let rounds = cfg.rounds.clamp(1, super::MAX_ROUNDS);
    let clients: Vec<Result<Client, client::ClientError>> =
        cfg.targets.iter().map(|t| client::build(&t.client)).collect();
    let mut track = Tracking::default();
    for t in &cfg.targets {
        if t.tls_skipped() {
            res.unverified_tls.push(t.name.clone());
        }
    }
    let start = Instant::now();
    for round in 0..rounds {
        let due = u32::try_from(round)
            .ok()
            .and_then(|r| cfg.interval.checked_mul(r))
            .and_then(|d| start.checked_add(d));
        if wait_for_round(cfg, due) {
            break;
        }
        let round_start = Instant::now();
        let started = now_ms();
        on_event(LiveEvent::RoundStarted {
            round,
            rounds,
            targets: cfg.targets.len(),
        });
        run_round(cfg, &clients, round, started, &mut track, &mut res, on_event);
        let stat = RoundStat {
            round,
            started,
            elapsed_ms: round_start.elapsed().as_millis() as u64,
        };
        on_event(LiveEvent::RoundDone(&stat));
        res.rounds.push(stat);
        if round == 0 && rounds > 1 {
            if let Some(why) = hopeless_first_round(&res, cfg.targets.len()) {
                res.stopped_early = Some(why);
                break;
            }
        }
    }
    finish(cfg, &track, &mut res);
    res
}

/// Waits for the round's time (`due`) in short naps, so that a stop is quick;
/// true when the rounds were stopped.
fn wait_for_round(cfg: &LiveConfig, due: Option<Instant>) -> bool {
    let stopped = || {
        cfg.stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    };
    while let Some(due) = due.filter(|d| *d > Instant::now()) {
        if stopped() {
            break;
        }
        std::thread::sleep((due - Instant::now()).min(Duration::from_millis(100)));
    }
    stopped()
}

/// One round: every target's metrics and health endpoints in their own
/// threads; the results are recorded as they arrive.
fn run_round(
    cfg: &LiveConfig,
    clients: &[Result<Client, client::ClientError>],
    round: usize,
    started: Millis,
    track: &mut Tracking,
    res: &mut LiveResult,
    on_event: &mut dyn FnMut(LiveEvent<'_>),
) {
    let (tx, rx) = mpsc::channel::<JobResult>();
    std::thread::scope(|s| {
        for (i, t) in cfg.targets.iter().enumerate() {
            let c = match &clients[i] {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(JobResult::Metrics {
                        target: i,
                        time: started,
                        result: Err(FetchError {
                            kind: FailureKind::Other,
                            message: e.to_string(),
                        }),
                    });
                    continue;
                }
            };
            let txm = tx.clone();
            s.spawn(move || {
                let result = scrape_metrics(t, c, cfg);
                let _ = txm.send(JobResult::Metrics {
                    target: i,
                    time: now_ms(),
                    result,
                });
            });
            for url in &t.health_urls {
                let txh = tx.clone();
                s.spawn(move || {
                    let _ = txh.send(JobResult::Health(check_health(t, c, url, round, cfg)));
                });
            }
        }
        drop(tx);
        for jr in rx {
            match jr {
                JobResult::Health(h) => res.health.push(h),
                JobResult::Metrics { target, time, result } => match result {
                    Ok((bytes, id)) => {
                        record_scrape(cfg, target, time, round, bytes, id, track, res, on_event);
                    }
                    Err(e) => record_failure(&cfg.targets[target], time, round, e, res, on_event),
                },
            }
        }
    });
}

/// A target's metrics arrived: notes a replica switch, names the series (one
/// per process behind a load balancer) and keeps the snapshot.
#[allow(clippy::too_many_arguments)]
fn record_scrape(
    cfg: &LiveConfig,
    target: usize,
    time: Millis,
    round: usize,
    bytes: Vec<u8>,
    id: Identity,
    track: &mut Tracking,
    res: &mut LiveResult,
    on_event: &mut dyn FnMut(LiveEvent<'_>),
) {
    let t = &cfg.targets[target];
    res.scraped += 1;
    if let Some(prev) = track.last_id.get(&target) {
        let changed = (prev.process_start.is_some()
            && id.process_start.is_some()
            && prev.process_start != id.process_start)
            || (prev.version.is_some() && id.version.is_some() && prev.version != id.version);
        if changed {
            let sw = ReplicaSwitch {
                target: t.name.clone(),
                time,
                round,
                before: prev.describe(),
                after: id.describe(),
            };
            on_event(LiveEvent::Switch(&sw));
            res.switches.push(sw);
        }
    }
    if id.version.is_some() {
        track.versions.insert(target, id.version.clone());
    }
    let name = series_name(t, target, &id, track);
    track.last_id.insert(target, id);
    let snap = MemorySnapshot {
        target: name,
        role: Some(t.role),
        role_reason: t.role_reason.clone(),
        time,
        origin: t.display_url.clone(),
        bytes: Arc::new(bytes),
    };
    on_event(LiveEvent::Snapshot(&snap));
    if cfg.retain_snapshots {
        res.snapshots.push(snap);
    }
}

/// The series name of a scrape. Behind a load balancer, each process gets its
/// own series (`NAME`, `NAME.p2`, …): no rate spans two processes.
fn series_name(t: &TargetSpec, target: usize, id: &Identity, track: &mut Tracking) -> String {
    if !(t.split_by_process && id.process_start.is_some()) {
        return t.name.clone();
    }
    let seen = track.processes.entry(target).or_default();
    let k = match seen.iter().position(|p| p == id) {
        Some(k) => k,
        None => {
            seen.push(id.clone());
            seen.len() - 1
        }
    };
    if k == 0 {
        return t.name.clone();
    }
    let n = format!("{}.p{}", t.name, k + 1);
    if !track.extra.iter().any(|(_, m)| m.name == n) {
        track.extra.push((
            target,
            ManifestTarget {
                name: n.clone(),
                role: t.role,
                url: Some(t.display_url.clone()),
                version: id.version.clone(),
                node: None,
            },
        ));
    }
    n
}

/// A target's scrape failed: reported and kept (as a manifest failure and in
/// detail).
fn record_failure(
    t: &TargetSpec,
    time: Millis,
    round: usize,
    e: FetchError,
    res: &mut LiveResult,
    on_event: &mut dyn FnMut(LiveEvent<'_>),
) {
    let f = TargetFailure {
        target: t.name.clone(),
        round,
        time,
        kind: e.kind,
        error: e.message,
    };
    on_event(LiveEvent::Failed(&f));
    res.failures.push(ScrapeFailure {
        target: f.target.clone(),
        time: f.time,
        error: f.error.clone(),
    });
    res.failure_details.push(f);
}

/// After the rounds: snapshots and health results in a stable order, and the
/// manifest's targets (each split target followed by its extra processes).
fn finish(cfg: &LiveConfig, track: &Tracking, res: &mut LiveResult) {
    res.snapshots
        .sort_by(|a, b| (a.time, &a.target).cmp(&(b.time, &b.target)));
    res.health
        .sort_by(|a, b| (&a.target, a.round, &a.endpoint).cmp(&(&b.target, b.round, &b.endpoint)));
    for (i, t) in cfg.targets.iter().enumerate() {
        // The first process of a split target keeps the name (and its version).
        let version = match track.processes.get(&i).and_then(|p| p.first()) {
            Some(first) => first.version.clone(),
            None => track.versions.get(&i).cloned().flatten(),
        };
        res.targets.push(ManifestTarget {
            name: t.name.clone(),
            role: t.role,
            url: Some(t.display_url.clone()),
            version,
            node: None,
        });
        res.targets.extend(
            track
                .extra
                .iter()
                .filter(|(k, _)| *k == i)
                .map(|(_, m)| m.clone()),
        );
    }
}

/// After the first round: when every target failed in a way that waiting
/// does not fix, the reason to stop now rather than after `--duration`.
/// Timeouts, resets and HTTP errors may pass (a busy or restarting process),
/// so they never stop the rounds.
fn hopeless_first_round(res: &LiveResult, targets: usize) -> Option<String> {
    if res.scraped > 0 || targets == 0 {
        return None;
    }
    let permanent = |k: FailureKind| {
        matches!(
            k,
            FailureKind::ConnectionRefused
                | FailureKind::Unreachable
                | FailureKind::TlsUnknownCa
                | FailureKind::TlsExpired
                | FailureKind::TlsNameMismatch
                | FailureKind::TlsClientCertificateRejected
                | FailureKind::Unauthorized
                | FailureKind::Forbidden
        )
    };
    let first: Vec<&TargetFailure> = res.failure_details.iter().filter(|f| f.round == 0).collect();
    if first.len() < targets || !first.iter().all(|f| permanent(f.kind)) {
        return None;
    }
    Some(
        if first.iter().all(|f| f.kind == FailureKind::ConnectionRefused) {
            "every target refused the first round's connection (nothing listening)".into()
        } else {
            "every target failed the first round in a way that waiting does not fix".into()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_reads_start_time_and_version() {
        let id = identity(
            b"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.5e+09\n# TYPE kubernetes_build_info gauge\nkubernetes_build_info{git_version=\"v1.30.1\"} 1\n# TYPE x counter\nx 1\n",
        );
        assert_eq!(id.process_start, Some(1.5e9));
        assert_eq!(id.version.as_deref(), Some("v1.30.1"));
        assert_eq!(url_path("https://h:1/readyz?verbose"), "/readyz");
    }
}
