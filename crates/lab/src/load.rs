//! Bounded client load on a cluster through etcd's gRPC JSON gateway
//! (`/v3/kv/put`, `/v3/kv/range`, `/v3/watch`), as an apiserver would drive
//! it: steady puts and gets spread over the members, and one watch per member.
//! Every loop stops at its deadline or when the load is stopped.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use crate::util::{now_ms, LabError};

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// The key prefix of all lab data.
const PREFIX: &str = "/lab/";
/// The end of the prefix's range (`/lab0`: `/` + 1).
const PREFIX_END: &str = "/lab0";

/// Counts of what the load did.
#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub puts_ok: AtomicU64,
    pub puts_err: AtomicU64,
    pub gets_ok: AtomicU64,
    pub gets_err: AtomicU64,
    pub watch_events: AtomicU64,
    pub watch_reconnects: AtomicU64,
    pub nospace: AtomicU64,
}

impl Counters {
    pub(crate) fn line(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "puts ok {} err {} (nospace {}), gets ok {} err {}, watch events {} (reconnects {})",
            g(&self.puts_ok),
            g(&self.puts_err),
            g(&self.nospace),
            g(&self.gets_ok),
            g(&self.gets_err),
            g(&self.watch_events),
            g(&self.watch_reconnects)
        )
    }
}

/// The members' client URLs, skipping for a few seconds one that failed (as a
/// client balancer does).
struct Endpoints {
    urls: Vec<String>,
    down_until: Mutex<Vec<Option<Instant>>>,
    next: AtomicUsize,
}

impl Endpoints {
    fn new(urls: Vec<String>) -> Endpoints {
        let n = urls.len();
        Endpoints {
            urls,
            down_until: Mutex::new(vec![None; n]),
            next: AtomicUsize::new(0),
        }
    }

    fn pick(&self) -> usize {
        let down = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let n = self.urls.len();
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % n;
            if down[i].is_none_or(|t| t <= now) {
                return i;
            }
        }
        self.next.fetch_add(1, Ordering::Relaxed) % n
    }

    fn failed(&self, i: usize) {
        self.down_until.lock().unwrap_or_else(|e| e.into_inner())[i] =
            Some(Instant::now() + Duration::from_secs(5));
    }
}

/// A gateway client for one call shape.
#[derive(Clone)]
pub(crate) struct Gateway {
    http: reqwest::blocking::Client,
}

/// An answer from etcd: the JSON body, or etcd's error text.
pub(crate) type Answer = Result<Value, String>;

impl Gateway {
    pub(crate) fn new(timeout: Duration) -> Gateway {
        Gateway {
            http: reqwest::blocking::Client::builder()
                .timeout(timeout)
                .build()
                .expect("HTTP client without TLS"),
        }
    }

    fn post(&self, url: &str, path: &str, body: &Value) -> Answer {
        let r = self
            .http
            .post(format!("{url}{path}"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let text = r.text().map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&text).map_err(|_| format!("HTTP {status}: {text}"))?;
        if !status.is_success() || v.get("error").is_some() {
            return Err(v
                .get("error")
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("HTTP {status}: {text}")));
        }
        Ok(v)
    }

    pub(crate) fn put(&self, url: &str, key: &str, value: &[u8]) -> Answer {
        self.post(
            url,
            "/v3/kv/put",
            &json!({"key": b64(key.as_bytes()), "value": b64(value)}),
        )
    }

    pub(crate) fn get(&self, url: &str, key: &str, serializable: bool) -> Answer {
        self.post(
            url,
            "/v3/kv/range",
            &json!({"key": b64(key.as_bytes()), "serializable": serializable}),
        )
    }

    /// The cluster's current revision as seen by `url`.
    pub(crate) fn revision(&self, url: &str) -> Result<i64, String> {
        let v = self.get(url, PREFIX, false)?;
        v.pointer("/header/revision")
            .and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or_else(|| r.as_i64()))
            .ok_or_else(|| format!("no revision in {v}"))
    }

    pub(crate) fn compact(&self, url: &str, revision: i64) -> Answer {
        self.post(
            url,
            "/v3/kv/compaction",
            &json!({"revision": revision.to_string(), "physical": true}),
        )
    }

    pub(crate) fn defragment(&self, url: &str) -> Answer {
        self.post(url, "/v3/maintenance/defragment", &json!({}))
    }
}

/// Is this etcd error the backend quota being full?
pub(crate) fn is_nospace(e: &str) -> bool {
    e.contains("database space exceeded")
}

/// What load to drive.
#[derive(Clone, Debug)]
pub(crate) struct LoadSpec {
    pub puts_per_s: f64,
    pub gets_per_s: f64,
    pub value_bytes: usize,
    pub keys: usize,
}

/// Running load; stopped (and joined) by [`Load::stop`] or on drop.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
    pub counters: Arc<Counters>,
}

/// A value of `n` bytes that differs between calls (not all zeros, so it
/// is not compressed away by anything).
pub(crate) fn value(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

/// Sleeps until `next`, or returns false when stopped or past the deadline.
fn pace(next: &mut Instant, every: Duration, stop: &AtomicBool, deadline: Instant) -> bool {
    *next += every;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else if now - *next > Duration::from_secs(2) {
        // Fell behind (a stalled member): do not burst to catch up.
        *next = now;
    }
    !stop.load(Ordering::Relaxed) && Instant::now() < deadline
}

impl Load {
    /// Starts a putter, a getter and one watcher per member, until `deadline`.
    pub(crate) fn start(urls: Vec<String>, spec: &LoadSpec, deadline: Instant) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let eps = Arc::new(Endpoints::new(urls.clone()));
        let gw = Gateway::new(Duration::from_secs(2));
        let mut handles = Vec::new();
        {
            let (stop, c, eps, gw, spec) = (
                stop.clone(),
                counters.clone(),
                eps.clone(),
                gw.clone(),
                spec.clone(),
            );
            handles.push(std::thread::spawn(move || {
                let every = Duration::from_secs_f64(1.0 / spec.puts_per_s.max(0.1));
                let mut next = Instant::now();
                let mut n: u64 = 0;
                while pace(&mut next, every, &stop, deadline) {
                    n += 1;
                    let i = eps.pick();
                    let key = format!("{PREFIX}key-{}", n % spec.keys as u64);
                    match gw.put(&eps.urls[i], &key, &value(spec.value_bytes, n)) {
                        Ok(_) => c.puts_ok.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            if is_nospace(&e) {
                                c.nospace.fetch_add(1, Ordering::Relaxed);
                            } else {
                                eps.failed(i);
                            }
                            c.puts_err.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }));
        }
        {
            let (stop, c, eps, gw, spec) = (
                stop.clone(),
                counters.clone(),
                eps.clone(),
                gw.clone(),
                spec.clone(),
            );
            handles.push(std::thread::spawn(move || {
                let every = Duration::from_secs_f64(1.0 / spec.gets_per_s.max(0.1));
                let mut next = Instant::now();
                let mut n: u64 = 0;
                while pace(&mut next, every, &stop, deadline) {
                    n += 1;
                    let i = eps.pick();
                    let key = format!("{PREFIX}key-{}", (n * 7) % spec.keys as u64);
                    // Half linearizable (through the leader), half serializable (local).
                    match gw.get(&eps.urls[i], &key, n.is_multiple_of(2)) {
                        Ok(_) => c.gets_ok.fetch_add(1, Ordering::Relaxed),
                        Err(_) => {
                            eps.failed(i);
                            c.gets_err.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }));
        }
        for url in urls {
            let (stop, c) = (stop.clone(), counters.clone());
            handles.push(std::thread::spawn(move || watch_loop(&url, &stop, deadline, &c)));
        }
        Load {
            stop,
            handles,
            counters,
        }
    }

    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One watch on the lab prefix through `url`, re-established after an error
/// or every 30 s (the request's lifetime), until stopped.
fn watch_loop(url: &str, stop: &AtomicBool, deadline: Instant, c: &Counters) {
    let Ok(http) = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
    else {
        return;
    };
    let body =
        json!({"create_request": {"key": b64(PREFIX.as_bytes()), "range_end": b64(PREFIX_END.as_bytes())}});
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let resp = http
            .post(format!("{url}/v3/watch"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send();
        match resp {
            Ok(mut r) => {
                let mut buf = [0u8; 16384];
                loop {
                    if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                        return;
                    }
                    match r.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let events = memchr_count(&buf[..n], b"\"kv\"");
                            c.watch_events.fetch_add(events, Ordering::Relaxed);
                        }
                    }
                }
            }
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
        c.watch_reconnects.fetch_add(1, Ordering::Relaxed);
    }
}

fn memchr_count(hay: &[u8], needle: &[u8]) -> u64 {
    hay.windows(needle.len()).filter(|w| *w == needle).count() as u64
}

/// Writes large values through `url` until etcd refuses with NOSPACE (the
/// backend quota is full) or `max_bytes` were written. Returns when the first
/// NOSPACE answer came (unix ms), if one did.
pub(crate) fn fill_until_nospace(
    urls: &[String],
    value_bytes: usize,
    max_bytes: usize,
) -> Result<Option<i64>, LabError> {
    let gw = Gateway::new(Duration::from_secs(10));
    let eps = Endpoints::new(urls.to_vec());
    let mut written = 0usize;
    let mut n: u64 = 0;
    let mut errors = 0;
    while written < max_bytes {
        n += 1;
        let i = eps.pick();
        match gw.put(&eps.urls[i], &format!("{PREFIX}fill-{n}"), &value(value_bytes, n)) {
            Ok(_) => written += value_bytes,
            Err(e) if is_nospace(&e) => return Ok(Some(now_ms())),
            Err(e) => {
                errors += 1;
                if errors > 50 {
                    return Err(LabError::msg(format!("filling the backend: {e}")));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(None)
}

/// Writes `count` puts of `value_bytes` over `keys` keys with a few threads
/// (a history worth compacting).
pub(crate) fn prefill(urls: &[String], count: usize, keys: usize, value_bytes: usize) -> u64 {
    let done = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let eps = Arc::new(Endpoints::new(urls.to_vec()));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (done, next, eps) = (done.clone(), next.clone(), eps.clone());
            std::thread::spawn(move || {
                let gw = Gateway::new(Duration::from_secs(5));
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= count as u64 {
                        break;
                    }
                    let i = eps.pick();
                    let key = format!("{PREFIX}hist-{}", n % keys as u64);
                    if gw.put(&eps.urls[i], &key, &value(value_bytes, n)).is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    done.load(Ordering::Relaxed)
}

/// What a write burst did.
#[derive(Debug, Default)]
pub(crate) struct Burst {
    pub puts: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// Puts `value_bytes` values over `keys` keys from `threads` threads as fast
/// as the cluster takes them, until `until` or `max_bytes` were written.
pub(crate) fn burst(
    urls: &[String],
    threads: usize,
    value_bytes: usize,
    keys: usize,
    until: Instant,
    max_bytes: u64,
) -> Burst {
    let puts = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let eps = Arc::new(Endpoints::new(urls.to_vec()));
    let max_puts = max_bytes / value_bytes.max(1) as u64;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (puts, errors, next, eps) = (puts.clone(), errors.clone(), next.clone(), eps.clone());
            std::thread::spawn(move || {
                let gw = Gateway::new(Duration::from_secs(5));
                while Instant::now() < until {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= max_puts {
                        break;
                    }
                    let i = eps.pick();
                    let key = format!("{PREFIX}burst-{}", n % keys as u64);
                    if gw.put(&eps.urls[i], &key, &value(value_bytes, n)).is_ok() {
                        puts.fetch_add(1, Ordering::Relaxed);
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    let p = puts.load(Ordering::Relaxed);
    Burst {
        puts: p,
        bytes: p * value_bytes as u64,
        errors: errors.load(Ordering::Relaxed),
    }
}
