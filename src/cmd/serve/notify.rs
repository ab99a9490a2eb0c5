//! `--notify-url`: each judged triage posted to a chat incoming webhook as
//! `{"text": …}` (the shape Slack, Mattermost, Rocket.Chat and Google Chat
//! accept), from a thread of its own with a bounded backlog. A failed post is
//! retried a few times, then logged and counted; it never stops the service.
//! The URL (which often holds the webhook's secret) is never logged.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use super::log;
use super::metrics::Metrics;
use super::store::{Outcome, Triage};

/// Posts waiting to be sent; more are dropped (and logged).
const BACKLOG: usize = 64;
/// Attempts per post.
pub(crate) const ATTEMPTS: u32 = 3;
/// Timeout of one attempt.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why notifications cannot be sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotifyError {
    #[error("--notify-url: cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("--notify-url: not an http(s) URL")]
    NotHttp,
    #[error("cannot start the notification thread: {0}")]
    Thread(std::io::Error),
}

/// The sending side.
#[derive(Clone)]
pub(crate) struct Notifier {
    tx: SyncSender<(String, String)>,
}

impl Notifier {
    /// Starts the sending thread for `url`.
    pub(crate) fn start(
        url: String,
        metrics: Arc<Metrics>,
    ) -> Result<(Notifier, std::thread::JoinHandle<()>), NotifyError> {
        crate::source::live::client::install_crypto();
        let client = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .user_agent(concat!("cptriage/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Client(e.without_url()))?;
        reqwest::Url::parse(&url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or(NotifyError::NotHttp)?;
        let (tx, rx) = sync_channel(BACKLOG);
        let h = std::thread::Builder::new()
            .name("notify".into())
            .spawn(move || send_all(&client, &url, &rx, &metrics))
            .map_err(NotifyError::Thread)?;
        Ok((Notifier { tx }, h))
    }

    /// Queues the post of a judged triage.
    pub(crate) fn send(&self, id: &str, text: String) {
        match self.tx.try_send((id.to_string(), text)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                log::line(
                    "warn",
                    "notify dropped",
                    &[("id", &id), ("reason", &"backlog full")],
                );
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn send_all(
    client: &reqwest::blocking::Client,
    url: &str,
    rx: &Receiver<(String, String)>,
    metrics: &Metrics,
) {
    for (id, text) in rx {
        let body = serde_json::json!({ "text": text }).to_string();
        let mut last = String::new();
        let mut sent = false;
        for attempt in 1..=ATTEMPTS {
            let r = client
                .post(url)
                .header("content-type", "application/json")
                .body(body.clone())
                .send();
            match r {
                Ok(resp) if resp.status().is_success() => {
                    log::line("info", "notified", &[("id", &id), ("attempt", &attempt)]);
                    sent = true;
                    break;
                }
                Ok(resp) => last = format!("HTTP {}", resp.status().as_u16()),
                Err(e) => last = e.without_url().to_string(),
            }
            if attempt < ATTEMPTS {
                std::thread::sleep(Duration::from_millis(500 << attempt));
            }
        }
        if !sent {
            metrics.notify_failed();
            log::line(
                "warn",
                "notify failed",
                &[("id", &id), ("attempts", &ATTEMPTS), ("error", &last)],
            );
        }
    }
}

/// The chat text of a judged triage: headline, cluster and alerts, root
/// cause with where and since, and the link to the HTML page.
pub(crate) fn text(t: &Triage, o: &Outcome, base: &str) -> String {
    let mut s = o.headline.clone();
    if let Some(c) = &t.cluster {
        s.push_str(&format!("\ncluster: {c}"));
    }
    if !t.alert_names.is_empty() {
        s.push_str(&format!(
            "\nalerts ({}): {}",
            t.alert_status.as_str(),
            t.alert_names.join(", ")
        ));
    }
    if let Some(rc) = &o.root_cause {
        s.push_str(&format!("\nroot cause: {rc}"));
        if !o.instances.is_empty() {
            s.push_str(&format!(" on {}", o.instances.join(", ")));
        }
        if let Some(since) = &o.since {
            s.push_str(&format!(" since {since}"));
        }
    }
    if let Some(e) = &o.error {
        s.push_str(&format!("\nwhy: {}", super::payload::clip(e, 200)));
    }
    s.push_str(&format!(
        "\n{}/v1/triage/{}.html",
        base.trim_end_matches('/'),
        t.id
    ));
    s
}
