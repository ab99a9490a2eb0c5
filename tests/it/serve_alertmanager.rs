//! `cptriage serve` behind a real Alertmanager (Debian
//! `prometheus-alertmanager` 0.25), over a real Prometheus holding two
//! clusters (scenario captures backfilled with promtool, as the fleet test
//! does, dated to end a few minutes after now): alerts posted to Alertmanager's API v2
//! are routed to serve's webhook (with a bearer token), and each cluster's
//! triage must carry its scenario's verdict. Alertmanager's repeated
//! notifications reuse the triages; resolving the alerts re-judges each
//! cluster and marks the firing triage recovered. The reports are on disk,
//! `/metrics` counts it all, and SIGTERM stops the service.

use std::path::Path;
use std::time::Duration;

use crate::support::serve::{Alertmanager, ChatSink, Serve};
use crate::support::{promrun, wait_for};

use cptriage::rules::load::RuleSet;
use cptriage::source::ingest::Keep;
use cptriage::source::Dataset;
use cptriage_testkit::{openmetrics, scenario};

/// (cluster, scenario, expected status, expected root cause).
const CLUSTERS: [(&str, &str, &str, Option<&str>); 2] = [
    ("prod-a", "healthy", "healthy", None),
    (
        "prod-b",
        "etcd-disk-slow-one-member",
        "degraded",
        Some("etcd/disk"),
    ),
];
/// The scenarios' fault starts this long after their start.
const ONSET_MS: i64 = 4 * 60_000;
const TOKEN: &str = "serve-e2e-Token-4f1c9a7b2d";
/// The secret part of the chat webhook's URL.
const HOOK_SECRET: &str = "hOoKsEcReT8d6a";

/// A scenario dated to start at `start` (unix ms).
fn generate(name: &str, start: i64, rules: &RuleSet) -> Dataset {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/scenarios")
        .join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&p).expect("scenario");
    let when = chrono::DateTime::from_timestamp_millis(start)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let text = text.replace("start: 2026-01-01T00:00:00Z", &format!("start: {when}"));
    let spec = scenario::parse_spec(&text, &p.display().to_string(), p.parent())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    scenario::dataset(spec, name, &Keep::Names(rules.referenced_metrics())).expect("generate")
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The triages serve lists now.
fn triages(s: &Serve) -> Vec<serde_json::Value> {
    let (code, v) = s.get_json("/v1/triage");
    assert_eq!(code, 200);
    v["triages"].as_array().expect("triages").clone()
}

/// Waits (at most `limit`) until `pred` holds for the list of triages.
#[track_caller]
fn wait_triages(
    s: &Serve,
    limit: Duration,
    what: &str,
    pred: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    wait_for(limit, || {
        let t = triages(s);
        pred(&t).then_some(t)
    })
    .unwrap_or_else(|| {
        panic!(
            "{what}: not within {limit:?}\ntriages: {:#?}\nserve log:\n{}",
            triages(s),
            s.log_text()
        )
    })
}

fn done_of(t: &[serde_json::Value], status: &str) -> Vec<serde_json::Value> {
    t.iter()
        .filter(|x| x["phase"] == "done" && x["alert_status"] == status)
        .cloned()
        .collect()
}

#[test]
fn alertmanager_notifications_get_each_clusters_verdict() {
    assert!(
        promrun::available(),
        "prometheus/promtool missing: scripts/test installs them"
    );
    let rules = RuleSet::default_rules().expect("rules");
    let dir = tempfile::tempdir().expect("tempdir");
    // The data (8 minutes) ends three minutes after now, so that the
    // windows of the firing and the resolved alerts (up to now) lie inside
    // it; whole minutes keep the steps aligned.
    let now = chrono::Utc::now().timestamp_millis();
    let start = (now / 60_000) * 60_000 - 5 * 60_000;
    let sets: Vec<Dataset> = CLUSTERS
        .iter()
        .map(|(_, s, _, _)| generate(s, start, &rules))
        .collect();
    let parts: Vec<(&str, &Dataset)> = CLUSTERS.iter().zip(&sets).map(|((c, ..), d)| (*c, d)).collect();
    let om = dir.path().join("clusters.om.txt");
    openmetrics::write(&parts, Some("cluster"), &om).expect("write openmetrics");
    let tsdb = dir.path().join("tsdb");
    std::fs::create_dir_all(&tsdb).expect("mkdir");
    promrun::create_blocks(&om, &tsdb).expect("create blocks");
    std::fs::remove_file(&om).expect("rm openmetrics");
    let prom = promrun::Prometheus::start(&tsdb, "1m").expect("start prometheus");

    let reports = dir.path().join("reports");
    // The chat webhook fails the first post: it is retried.
    let chat = ChatSink::start(1);
    let hook = format!("http://127.0.0.1:{}/hooks/T0/B0/{HOOK_SECRET}", chat.port);
    let args: Vec<String> = [
        "--notify-url",
        &hook,
        "--external-url",
        "https://cptriage.example.org/",
        "--prometheus",
        &format!("http://127.0.0.1:{}", prom.port),
        "--by",
        "cluster",
        "--lookback",
        "4m",
        "--step",
        "15s",
        "--reports",
        reports.to_str().expect("path"),
        "--apiserver-selector",
        r#"{role="apiserver"}"#,
        "--etcd-selector",
        r#"{role="etcd"}"#,
        "--controller-selector",
        r#"{role="controller"}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut serve = Serve::start(dir.path(), &args, Some(TOKEN));
    let creds = dir.path().join("am-credentials");
    std::fs::write(&creds, TOKEN).expect("credentials");
    let am = Alertmanager::start(&format!(
        r#"route:
  receiver: cptriage
  group_by: [alertname]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 4s
receivers:
  - name: cptriage
    webhook_configs:
      - url: {}/v1/alertmanager
        send_resolved: true
        http_config:
          authorization:
            credentials_file: {}
"#,
        serve.url(),
        creds.display()
    ));

    // One alert per cluster, in one Alertmanager group: one notification,
    // one triage per cluster.
    let fired = start + ONSET_MS;
    let alerts = |ends: Option<i64>| {
        serde_json::Value::Array(
            CLUSTERS
                .iter()
                .map(|(c, ..)| {
                    let mut a = serde_json::json!({
                        "labels": {"alertname": "KubeAPIErrorBudgetBurn", "cluster": c, "severity": "critical"},
                        "startsAt": rfc3339(fired),
                    });
                    if let Some(e) = ends {
                        a["endsAt"] = rfc3339(e).into();
                    }
                    a
                })
                .collect(),
        )
    };
    am.post_alerts(&alerts(None));
    let t0 = std::time::Instant::now();
    let firing = wait_triages(&serve, Duration::from_secs(60), "both clusters judged", |t| {
        done_of(t, "firing").len() == CLUSTERS.len()
    });
    eprintln!(
        "judged {} clusters {:.1} s after the alerts were posted",
        CLUSTERS.len(),
        t0.elapsed().as_secs_f64()
    );
    for (cluster, scenario, status, cause) in CLUSTERS {
        let t = firing
            .iter()
            .find(|t| t["cluster"] == cluster)
            .unwrap_or_else(|| panic!("no triage of {cluster}: {firing:#?}"));
        let id = t["id"].as_str().expect("id");
        assert_eq!(t["alert_names"], serde_json::json!(["KubeAPIErrorBudgetBurn"]));
        assert_eq!(t["status"], status, "{cluster} ({scenario}): {t:#}");
        let (code, doc) = serve.get_json(&format!("/v1/triage/{id}"));
        assert_eq!(code, 200);
        let v = &doc["verdict"];
        assert_eq!(v["schema"], "cptriage/verdict/v1");
        assert_eq!(v["status"], status, "{cluster}: {:#}", v["summary"]);
        let rc = &v["root_cause"];
        let axis = rc["axis"].as_str().map(|a| match rc["sub_axis"].as_str() {
            Some(s) => format!("{a}/{s}"),
            None => a.to_string(),
        });
        assert_eq!(axis.as_deref(), cause, "{cluster}: {:#}", v["summary"]);
        assert_eq!(doc["alerts"][0]["labels"]["cluster"], cluster);
        // The window starts --lookback before the alert.
        assert_eq!(doc["triage"]["window"]["from"], fired - 4 * 60_000);
        if cause.is_some() {
            assert_eq!(rc["instances"], serde_json::json!(["etcd-2"]));
        }
        let html = serve.get(&format!("/v1/triage/{id}.html")).expect("html");
        assert_eq!(html.status(), 200);
        assert!(html.text().expect("html").contains("<html"));
        for ext in ["json", "html"] {
            assert!(
                reports.join(format!("{id}.{ext}")).is_file(),
                "{id}.{ext} not written"
            );
        }
    }

    // The chat got each verdict (after one retry for the first post).
    let sick = firing.iter().find(|t| t["cluster"] == "prod-b").expect("prod-b");
    let link = format!(
        "https://cptriage.example.org/v1/triage/{}.html",
        sick["id"].as_str().expect("id")
    );
    let posts = wait_for(Duration::from_secs(20), || {
        let b = chat.bodies();
        (b.len() > CLUSTERS.len()).then_some(b)
    })
    .unwrap_or_else(|| panic!("chat posts: {:?}\n{}", chat.bodies(), serve.log_text()));
    let texts: Vec<String> = posts
        .iter()
        .map(|b| {
            let v: serde_json::Value = serde_json::from_str(b).unwrap_or_else(|e| panic!("{e}: {b}"));
            v["text"].as_str().expect("text").to_string()
        })
        .collect();
    let post = texts
        .iter()
        .find(|t| t.contains(&link))
        .unwrap_or_else(|| panic!("no post links {link}: {texts:#?}"));
    assert!(post.starts_with("DEGRADED: etcd/disk"), "{post}");
    assert!(post.contains("cluster: prod-b"), "{post}");
    assert!(post.contains("root cause: etcd/disk on etcd-2 since "), "{post}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("HEALTHY") && t.contains("cluster: prod-a")),
        "{texts:#?}"
    );

    // Alertmanager re-sends the group every repeat_interval: the same
    // triages answer.
    let repeated = wait_triages(&serve, Duration::from_secs(30), "a repeated notification", |t| {
        t.iter()
            .filter(|x| x["repeats"].as_u64().unwrap_or(0) >= 1)
            .count()
            == CLUSTERS.len()
    });
    assert_eq!(
        repeated.len(),
        CLUSTERS.len(),
        "a repeat started a new triage: {repeated:#?}"
    );

    // Resolved: each cluster re-judged up to the end, the firing triage
    // marked recovered.
    let ended = chrono::Utc::now().timestamp_millis() / 1000 * 1000;
    am.post_alerts(&alerts(Some(ended)));
    let all = wait_triages(
        &serve,
        Duration::from_secs(60),
        "the resolved notification judged",
        |t| done_of(t, "resolved").len() == CLUSTERS.len(),
    );
    for (cluster, _, status, _) in CLUSTERS {
        let fired = all
            .iter()
            .find(|t| t["cluster"] == cluster && t["alert_status"] == "firing")
            .expect("firing triage");
        let resolved = all
            .iter()
            .find(|t| t["cluster"] == cluster && t["alert_status"] == "resolved")
            .expect("resolved triage");
        assert_eq!(fired["recovered"], true, "{fired:#}");
        assert_eq!(fired["recovered_by"], resolved["id"]);
        assert_eq!(resolved["follows"], fired["id"]);
        assert_eq!(resolved["window"]["to"], ended, "{resolved:#}");
        // The data goes on as it was: the same verdict up to the end.
        assert_eq!(resolved["status"], status, "{resolved:#}");
    }
    assert_eq!(all.len(), 2 * CLUSTERS.len(), "{all:#?}");

    let metrics = serve.get("/metrics").expect("metrics").text().expect("text");
    let value = |line: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `{line}` in:\n{metrics}"))
    };
    assert_eq!(value("cptriage_serve_triages_total{status=\"degraded\"}"), 2.0);
    assert_eq!(value("cptriage_serve_triages_total{status=\"healthy\"}"), 2.0);
    assert_eq!(value("cptriage_serve_triage_duration_seconds_count"), 4.0);
    assert!(value("cptriage_serve_triages_reused_total") >= 2.0);
    assert_eq!(
        value("cptriage_serve_rejected_total{reason=\"unauthorized\"}"),
        0.0
    );

    let log = serve.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("msg=request") && l.contains("status=202")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("msg=\"triage done\"")
            && l.contains("cluster=prod-b")
            && l.contains("root_cause=etcd/disk")),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "the token is in the log");
    assert!(!log.contains(HOOK_SECRET), "the chat webhook's URL is in the log");
    assert!(log.contains("msg=notified"), "{log}");
    let (code, took) = serve.terminate(Duration::from_secs(15));
    assert_eq!(code, Some(0), "{}", serve.log_text());
    assert!(took < Duration::from_secs(10), "stopped in {took:?}");
    drop(am);
}
