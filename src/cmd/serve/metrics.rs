//! `GET /metrics`: the service's own metrics in the Prometheus text format.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds (seconds) of the triage duration histogram.
const BUCKETS: [f64; 10] = [0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0];

/// The verdict statuses, in the order they are written.
pub(crate) const STATUSES: [&str; 4] = ["healthy", "degraded", "recovered", "inconclusive"];

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// The queue was full (503).
    QueueFull,
    /// A bad request (4xx): body, content type, payload, path.
    BadRequest,
    /// A missing or wrong bearer token (401).
    Unauthorized,
    /// Shutting down (503).
    ShuttingDown,
}

impl Rejection {
    const ALL: [Rejection; 4] = [
        Rejection::QueueFull,
        Rejection::BadRequest,
        Rejection::Unauthorized,
        Rejection::ShuttingDown,
    ];

    fn label(self) -> &'static str {
        match self {
            Rejection::QueueFull => "queue_full",
            Rejection::BadRequest => "bad_request",
            Rejection::Unauthorized => "unauthorized",
            Rejection::ShuttingDown => "shutting_down",
        }
    }
}

#[derive(Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Counters of a running `serve`.
#[derive(Default)]
pub(crate) struct Metrics {
    triages: [AtomicU64; STATUSES.len()],
    rejected: [AtomicU64; 4],
    notifications: AtomicU64,
    reused: AtomicU64,
    notify_failures: AtomicU64,
    report_write_failures: AtomicU64,
    duration: Mutex<Histogram>,
}

impl Metrics {
    /// A triage judged with this status in `seconds`.
    pub(crate) fn judged(&self, status: &str, seconds: f64) {
        if let Some(i) = STATUSES.iter().position(|s| *s == status) {
            self.triages[i].fetch_add(1, Ordering::Relaxed);
        }
        let mut h = self
            .duration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        h.count += 1;
        h.sum += seconds;
        for (b, le) in h.buckets.iter_mut().zip(BUCKETS) {
            if seconds <= le {
                *b += 1;
            }
        }
    }

    pub(crate) fn rejected(&self, why: Rejection) {
        if let Some(i) = Rejection::ALL.iter().position(|r| *r == why) {
            self.rejected[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A notification accepted, with how many of its triages were reused.
    pub(crate) fn notification(&self, reused: usize) {
        self.notifications.fetch_add(1, Ordering::Relaxed);
        self.reused.fetch_add(reused as u64, Ordering::Relaxed);
    }

    pub(crate) fn notify_failed(&self) {
        self.notify_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn report_write_failed(&self) {
        self.report_write_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The text exposition, with the queue's current (queued, running).
    pub(crate) fn render(&self, (queued, running): (usize, usize)) -> String {
        let mut s = String::new();
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.push_str("# HELP cptriage_serve_triages_total Triages judged, by verdict status.\n");
        s.push_str("# TYPE cptriage_serve_triages_total counter\n");
        for (st, n) in STATUSES.iter().zip(&self.triages) {
            let _ = writeln!(s, "cptriage_serve_triages_total{{status=\"{st}\"}} {}", c(n));
        }
        s.push_str("# HELP cptriage_serve_triages_in_flight Triages being judged now.\n");
        s.push_str("# TYPE cptriage_serve_triages_in_flight gauge\n");
        let _ = writeln!(s, "cptriage_serve_triages_in_flight {running}");
        s.push_str("# HELP cptriage_serve_triages_queued Triages waiting for a worker.\n");
        s.push_str("# TYPE cptriage_serve_triages_queued gauge\n");
        let _ = writeln!(s, "cptriage_serve_triages_queued {queued}");
        s.push_str("# HELP cptriage_serve_rejected_total Requests refused, by reason.\n");
        s.push_str("# TYPE cptriage_serve_rejected_total counter\n");
        for (r, n) in Rejection::ALL.iter().zip(&self.rejected) {
            let _ = writeln!(
                s,
                "cptriage_serve_rejected_total{{reason=\"{}\"}} {}",
                r.label(),
                c(n)
            );
        }
        s.push_str("# HELP cptriage_serve_notifications_total Alertmanager notifications accepted.\n");
        s.push_str("# TYPE cptriage_serve_notifications_total counter\n");
        let _ = writeln!(s, "cptriage_serve_notifications_total {}", c(&self.notifications));
        s.push_str("# HELP cptriage_serve_triages_reused_total Notifications answered by an earlier triage of their group.\n");
        s.push_str("# TYPE cptriage_serve_triages_reused_total counter\n");
        let _ = writeln!(s, "cptriage_serve_triages_reused_total {}", c(&self.reused));
        s.push_str(
            "# HELP cptriage_serve_notify_failures_total Chat notifications given up after their retries.\n",
        );
        s.push_str("# TYPE cptriage_serve_notify_failures_total counter\n");
        let _ = writeln!(
            s,
            "cptriage_serve_notify_failures_total {}",
            c(&self.notify_failures)
        );
        s.push_str("# HELP cptriage_serve_report_write_failures_total Reports that could not be written to --reports.\n");
        s.push_str("# TYPE cptriage_serve_report_write_failures_total counter\n");
        let _ = writeln!(
            s,
            "cptriage_serve_report_write_failures_total {}",
            c(&self.report_write_failures)
        );
        let h = self
            .duration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.push_str("# HELP cptriage_serve_triage_duration_seconds Time to judge one triage.\n");
        s.push_str("# TYPE cptriage_serve_triage_duration_seconds histogram\n");
        for (b, le) in h.buckets.iter().zip(BUCKETS) {
            let _ = writeln!(
                s,
                "cptriage_serve_triage_duration_seconds_bucket{{le=\"{le}\"}} {b}"
            );
        }
        let _ = writeln!(
            s,
            "cptriage_serve_triage_duration_seconds_bucket{{le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(s, "cptriage_serve_triage_duration_seconds_sum {}", h.sum);
        let _ = writeln!(s, "cptriage_serve_triage_duration_seconds_count {}", h.count);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_parses_and_counts() {
        let m = Metrics::default();
        m.judged("degraded", 1.5);
        m.judged("healthy", 0.1);
        m.rejected(Rejection::QueueFull);
        let text = m.render((3, 1));
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let parsed = prometheus_parse::Scrape::parse(lines.into_iter().map(Ok)).unwrap();
        let get = |name: &str, label: Option<(&str, &str)>| {
            parsed
                .samples
                .iter()
                .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v)
                    | prometheus_parse::Value::Gauge(v)
                    | prometheus_parse::Value::Untyped(v) => v,
                    _ => f64::NAN,
                })
        };
        assert_eq!(
            get("cptriage_serve_triages_total", Some(("status", "degraded"))),
            Some(1.0)
        );
        assert_eq!(
            get("cptriage_serve_rejected_total", Some(("reason", "queue_full"))),
            Some(1.0)
        );
        assert_eq!(get("cptriage_serve_triages_queued", None), Some(3.0));
        assert!(text.contains("cptriage_serve_triage_duration_seconds_bucket{le=\"2\"} 2"));
        assert!(text.contains("cptriage_serve_triage_duration_seconds_bucket{le=\"1\"} 1"));
        assert!(text.contains("cptriage_serve_triage_duration_seconds_count 2"));
    }
}
