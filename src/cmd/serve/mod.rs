//! `cptriage serve`: an Alertmanager webhook receiver that judges each
//! notification's clusters in the background (docs/serve.md).
//!
//! notification (`http`, `payload`) → store of triages (`store`: queue,
//! reuse, retention) → workers (here: one diagnosis per `--by` value at a
//! time, `--concurrency` at once) → the diagnosis (`judge`) → reports
//! (`reports`), chat (`notify`), `/metrics` (`metrics`), log lines (`log`).

mod http;
mod judge;
mod log;
mod metrics;
mod notify;
mod payload;
mod reports;
mod store;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::cli::ServeArgs;
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::store::Millis;

use judge::Judge;
use metrics::Metrics;
use notify::Notifier;
use reports::Reports;
use store::{Job, Phase, Retention, Store};

/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 128;
/// Time to receive a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connection is served (one request: no keep-alive).
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Shortest token accepted from `--token-file`.
const MIN_TOKEN: usize = 16;

/// What the HTTP handlers and the workers share.
pub(crate) struct Shared {
    store: Mutex<Store>,
    /// Woken when a triage is queued or finished, and at shutdown.
    wake: Condvar,
    metrics: Arc<Metrics>,
    judge: Judge,
    reports: Option<Reports>,
    notifier: Option<Notifier>,
    token: Option<Vec<u8>>,
    by: Option<String>,
    /// The base of links to triages.
    base_url: String,
    stopping: AtomicBool,
    /// Workers judging now (for the shutdown's wait).
    busy: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Now, in milliseconds.
pub(crate) fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

/// Runs the service until SIGTERM or SIGINT.
pub(crate) fn run(a: ServeArgs) -> Result<ExitCode, CliError> {
    if a.prom.prometheus.is_none() {
        return Err(CliError::Usage(
            "`serve` judges alerts over Prometheus: give `--prometheus URL`".into(),
        ));
    }
    let listen = listen_addr(&a)?;
    let token = read_token(&a)?;
    let keep = Retention::parse(&a.keep).map_err(CliError::Usage)?;
    let rules = crate::plan::load_rules(a.rules.as_deref())?;
    // Every Prometheus flag is checked now (files read, selectors parsed),
    // not at the first alert.
    let source = crate::plan::PromSource::from_args(&a.prom)?;
    if let Some(by) = &a.by {
        crate::eval::select::check_label_name("--by", by).map_err(|e| CliError::Usage(e.to_string()))?;
        source.clone().select_label(by, "x")?;
    }
    crate::pipeline::remote::connect(&source, &mut crate::pipeline::Quiet)?;
    let reports = match &a.reports {
        Some(d) => Some(Reports::open(d, keep).map_err(|e| CliError::Usage(e.to_string()))?),
        None => None,
    };
    let metrics = Arc::new(Metrics::default());
    let (notifier, notify_thread) = match &a.notify_url {
        Some(u) => {
            let (n, h) =
                Notifier::start(u.clone(), metrics.clone()).map_err(|e| CliError::Usage(e.to_string()))?;
            (Some(n), Some(h))
        }
        None => (None, None),
    };
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let sh = Arc::new(Shared {
        store: Mutex::new(Store::new(a.queue as usize, keep, a.reuse, a.lookback)),
        wake: Condvar::new(),
        metrics,
        judge: Judge::new(&a, rules),
        reports,
        notifier,
        token,
        by: a.by.clone(),
        base_url: a
            .external_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}")),
        stopping: AtomicBool::new(false),
        busy: AtomicUsize::new(0),
    });
    let workers: Vec<_> = (0..a.concurrency)
        .map(|i| {
            let sh = sh.clone();
            std::thread::Builder::new()
                .name(format!("triage-{i}"))
                .spawn(move || worker(&sh))
        })
        .collect::<Result<_, _>>()?;
    log::line(
        "info",
        "listening",
        &[
            ("addr", &bound),
            (
                "prometheus",
                &crate::source::live::client::redact_url(a.prom.prometheus.as_deref().unwrap_or("")),
            ),
            ("by", &a.by.as_deref().unwrap_or("")),
            ("concurrency", &a.concurrency),
            ("queue", &a.queue),
            ("auth", &if sh.token.is_some() { "bearer" } else { "none" }),
        ],
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(listener, sh.clone()))?;
    shut_down(&sh, workers, Duration::from_millis(a.grace as u64));
    drop(sh);
    if let Some(h) = notify_thread {
        // The thread ends when its last sender is gone; posts in flight get
        // a few seconds.
        let t0 = Instant::now();
        while !h.is_finished() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(ExitCode::Ok)
}

/// `--listen`, refused when it is not loopback and no token is set.
fn listen_addr(a: &ServeArgs) -> Result<SocketAddr, CliError> {
    let addr: SocketAddr = a.listen.parse().map_err(|_| {
        CliError::Usage(format!(
            "`--listen` takes IP:PORT (e.g. 127.0.0.1:9099), got {:?}",
            payload::clip(&a.listen, 60)
        ))
    })?;
    if !addr.ip().is_loopback() && a.token_file.is_none() {
        return Err(CliError::Usage(format!(
            "refusing to listen on {addr} without `--token-file`: any host could post alerts and read \
             verdicts. Give a token file (requests then need `Authorization: Bearer TOKEN`), or \
             listen on 127.0.0.1"
        )));
    }
    Ok(addr)
}

/// `--token-file`: its first line.
fn read_token(a: &ServeArgs) -> Result<Option<Vec<u8>>, CliError> {
    let Some(p) = &a.token_file else { return Ok(None) };
    let text = std::fs::read_to_string(p)
        .map_err(|e| CliError::Usage(format!("--token-file {}: {e}", p.display())))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.len() < MIN_TOKEN || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(CliError::Usage(format!(
            "--token-file {}: the token must be one line of at least {MIN_TOKEN} characters without spaces",
            p.display()
        )));
    }
    Ok(Some(token.as_bytes().to_vec()))
}

/// Accepts connections until SIGTERM or SIGINT, then lets the open ones
/// finish (bounded by [`CONNECTION_TIMEOUT`]).
async fn serve(listener: std::net::TcpListener, sh: Arc<Shared>) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        let permit = tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            p = slots.clone().acquire_owned() => p,
        };
        let Ok(permit) = permit else { break };
        let (stream, peer) = tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    log::line("warn", "accept failed", &[("error", &e)]);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req| http::handle(req, sh.clone(), peer));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .max_buf_size(64 * 1024)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if tokio::time::timeout(CONNECTION_TIMEOUT, conn).await.is_err() {
                log::line("warn", "connection timed out", &[("remote", &peer)]);
            }
        });
    }
    sh.stopping.store(true, Ordering::SeqCst);
    log::line("info", "stopping", &[("reason", &"signal")]);
    drop(listener);
    // Every connection holds a slot: all slots back means all are done.
    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, slots.acquire_many(MAX_CONNECTIONS as u32)).await;
    Ok(())
}

/// Abandons the queued triages and waits up to `grace` for the running ones.
fn shut_down(sh: &Shared, workers: Vec<std::thread::JoinHandle<()>>, grace: Duration) {
    sh.stopping.store(true, Ordering::SeqCst);
    let abandoned = sh.lock().abandon_queued();
    sh.wake.notify_all();
    let t0 = Instant::now();
    while sh.busy.load(Ordering::SeqCst) > 0 && t0.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    let running = sh.busy.load(Ordering::SeqCst);
    log::line(
        "info",
        "stopped",
        &[
            ("abandoned_queued", &abandoned.len()),
            ("abandoned_running", &running),
        ],
    );
    if running == 0 {
        for w in workers {
            let _ = w.join();
        }
    }
}

/// A worker: takes the next triage it may run, judges it, records it.
fn worker(sh: &Shared) {
    while let Some(job) = next_job(sh) {
        sh.busy.fetch_add(1, Ordering::SeqCst);
        judge_one(sh, &job);
        sh.busy.fetch_sub(1, Ordering::SeqCst);
        sh.wake.notify_all();
    }
}

/// Waits for a triage to run; `None` at shutdown.
fn next_job(sh: &Shared) -> Option<Job> {
    let mut st = sh.lock();
    loop {
        if sh.stopping() {
            return None;
        }
        if let Some(j) = st.next(now_ms()) {
            return Some(j);
        }
        st = sh
            .wake
            .wait_timeout(st, Duration::from_millis(500))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

fn judge_one(sh: &Shared, job: &Job) {
    let t0 = Instant::now();
    // A firing group is judged up to now (whole seconds).
    let to = job.to.unwrap_or_else(|| now_ms() / 1000 * 1000);
    log::line(
        "info",
        "triage started",
        &[
            ("id", &job.id),
            ("cluster", &job.cluster.as_deref().unwrap_or("")),
            ("from", &crate::timefmt::format_time(job.from)),
            ("to", &crate::timefmt::format_time(to)),
        ],
    );
    let (report, outcome) = sh.judge.run(job, to);
    let bodies = Arc::new(judge::bodies(&report));
    let secs = t0.elapsed().as_secs_f64();
    sh.metrics.judged(&outcome.status, secs);
    let now = now_ms();
    let mut st = sh.lock();
    st.finish(job, to, outcome.clone(), bodies.clone(), now);
    let t = st.get(&job.id).cloned();
    drop(st);
    let Some(t) = t else { return };
    if let Some(r) = &sh.reports {
        let doc = judge::document(&t, Some(&bodies.verdict));
        if let Err(e) = r.write(&job.id, &doc, &bodies.html) {
            sh.metrics.report_write_failed();
            log::line(
                "error",
                "report not written",
                &[("id", &job.id), ("error", &e.to_string())],
            );
        }
        r.prune(now);
    }
    log::line(
        "info",
        "triage done",
        &[
            ("id", &job.id),
            ("cluster", &job.cluster.as_deref().unwrap_or("")),
            ("alerts", &t.alert_names.join(",")),
            ("alert_status", &t.alert_status.as_str()),
            ("status", &outcome.status),
            ("root_cause", &outcome.root_cause.as_deref().unwrap_or("")),
            ("duration_ms", &((secs * 1000.0) as u64)),
            ("error", &outcome.error.as_deref().unwrap_or("")),
        ],
    );
    debug_assert_eq!(t.phase, Phase::Done);
    if let Some(n) = &sh.notifier {
        n.send(&job.id, notify::text(&t, &outcome, &sh.base_url));
    }
}
