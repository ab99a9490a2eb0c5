//! Deterministic audit-log generator (`audit.k8s.io/v1` events, one JSON
//! object per line, as kube-apiserver's log backend writes them): a healthy
//! background of kubelets, controllers, the scheduler and kubectl, and a
//! fault from a given time whose effect is the one kube-apiserver records in
//! the `apiserver.latency.k8s.io/*` annotations of requests slower than
//! 500 ms, or in the response codes. Used by the tests (a log per axis) and
//! by the audit-reader benchmark. Same inputs, same bytes: no clock, a
//! seeded generator.

use std::fmt::Write as _;
use std::io::{self, Write};

use cptriage::store::Millis;

/// What goes wrong from `fault_from` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditFault {
    /// Nothing: the healthy background only.
    None,
    /// etcd answers slowly: requests spend 0.8–2.6 s in `etcd`.
    EtcdSlow,
    /// Requests wait 0.8–2.6 s in APF queues (`apf-queue-wait`), and a share
    /// of them is rejected with 429.
    ApfQueue,
    /// Admission webhooks take 0.8–2.6 s on pod writes (`mutating-webhook`,
    /// `validating-webhook`).
    Webhook,
    /// A client's credentials expired: a flood of 401s (logged at stage
    /// ResponseStarted, as failed authentications are) and RBAC 403s.
    AuthStorm,
    /// As `EtcdSlow`, from an apiserver that writes no latency annotations
    /// (before 1.24).
    EtcdSlowUnannotated,
    /// A client starts LISTing every pod of the cluster, slowly (1–3 s each):
    /// most requests of the fault period are its LISTs (user agent
    /// [`STORM_AGENT`]).
    ListStorm,
}

/// The user agent of [`AuditFault::ListStorm`]'s client.
pub const STORM_AGENT: &str = "inventory-sync/0.9.1";

impl AuditFault {
    pub fn parse(s: &str) -> Option<AuditFault> {
        Some(match s {
            "none" => AuditFault::None,
            "etcd" => AuditFault::EtcdSlow,
            "apf" => AuditFault::ApfQueue,
            "webhook" => AuditFault::Webhook,
            "auth" => AuditFault::AuthStorm,
            "etcd-unannotated" => AuditFault::EtcdSlowUnannotated,
            "list-storm" => AuditFault::ListStorm,
            _ => return None,
        })
    }
}

/// One generated log.
#[derive(Clone, Debug)]
pub struct AuditGen {
    /// First request's arrival.
    pub start: Millis,
    pub duration: Millis,
    /// Requests per second (each logs RequestReceived and ResponseComplete).
    pub rate: f64,
    pub fault: AuditFault,
    pub fault_from: Millis,
    pub seed: u64,
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[(self.next() % v.len() as u64) as usize]
    }
}

/// A kind of request of the background.
struct Kind {
    weight: f64,
    verb: &'static str,
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    sub: &'static str,
    namespaced: bool,
    named: bool,
    user: &'static str,
    agent: &'static str,
    /// Median latency in seconds.
    median: f64,
}

const KINDS: &[Kind] = &[
    Kind { weight: 30.0, verb: "update", group: "coordination.k8s.io", version: "v1", resource: "leases", sub: "", namespaced: true, named: true, user: "system:node:node-{n}", agent: "kubelet/v1.30.2 (linux/amd64) kubernetes/3f7a50f", median: 0.006 },
    Kind { weight: 15.0, verb: "get", group: "", version: "v1", resource: "pods", sub: "", namespaced: true, named: true, user: "system:node:node-{n}", agent: "kubelet/v1.30.2 (linux/amd64) kubernetes/3f7a50f", median: 0.004 },
    Kind { weight: 10.0, verb: "patch", group: "", version: "v1", resource: "pods", sub: "status", namespaced: true, named: true, user: "system:node:node-{n}", agent: "kubelet/v1.30.2 (linux/amd64) kubernetes/3f7a50f", median: 0.009 },
    Kind { weight: 8.0, verb: "patch", group: "", version: "v1", resource: "nodes", sub: "status", namespaced: false, named: true, user: "system:node:node-{n}", agent: "kubelet/v1.30.2 (linux/amd64) kubernetes/3f7a50f", median: 0.010 },
    Kind { weight: 8.0, verb: "update", group: "apps", version: "v1", resource: "replicasets", sub: "status", namespaced: true, named: true, user: "system:serviceaccount:kube-system:replicaset-controller", agent: "kube-controller-manager/v1.30.2 (linux/amd64) kubernetes/3f7a50f/system:serviceaccount:kube-system:replicaset-controller", median: 0.008 },
    Kind { weight: 6.0, verb: "create", group: "", version: "v1", resource: "pods", sub: "", namespaced: true, named: false, user: "system:serviceaccount:kube-system:replicaset-controller", agent: "kube-controller-manager/v1.30.2 (linux/amd64) kubernetes/3f7a50f/system:serviceaccount:kube-system:replicaset-controller", median: 0.012 },
    Kind { weight: 6.0, verb: "create", group: "", version: "v1", resource: "pods", sub: "binding", namespaced: true, named: true, user: "system:kube-scheduler", agent: "kube-scheduler/v1.30.2 (linux/amd64) kubernetes/3f7a50f/scheduler", median: 0.008 },
    Kind { weight: 5.0, verb: "create", group: "", version: "v1", resource: "events", sub: "", namespaced: true, named: false, user: "system:node:node-{n}", agent: "kubelet/v1.30.2 (linux/amd64) kubernetes/3f7a50f", median: 0.005 },
    Kind { weight: 4.0, verb: "list", group: "", version: "v1", resource: "pods", sub: "", namespaced: true, named: false, user: "alice@example.com", agent: "kubectl/v1.30.1 (linux/amd64) kubernetes/9a1c2d3", median: 0.030 },
    Kind { weight: 1.0, verb: "list", group: "", version: "v1", resource: "configmaps", sub: "", namespaced: false, named: false, user: "system:serviceaccount:monitoring:kube-state-metrics", agent: "kube-state-metrics/v2.12.0", median: 0.250 },
    Kind { weight: 6.0, verb: "watch", group: "", version: "v1", resource: "pods", sub: "", namespaced: false, named: false, user: "system:kube-scheduler", agent: "kube-scheduler/v1.30.2 (linux/amd64) kubernetes/3f7a50f/scheduler", median: 300.0 },
];

/// The LISTs of [`AuditFault::ListStorm`]'s client: every pod of the cluster.
static STORM: Kind = Kind {
    weight: 0.0,
    verb: "list",
    group: "",
    version: "v1",
    resource: "pods",
    sub: "",
    namespaced: false,
    named: false,
    user: "system:serviceaccount:tools:inventory-sync",
    agent: STORM_AGENT,
    median: 1.8,
};

/// A latency layer of one request: (annotation key suffix, seconds).
type Layers = Vec<(&'static str, f64)>;

fn go_duration(secs: f64) -> String {
    // time.Duration.String(): "1.234567s", "512.3ms", "850µs", "1m2.5s".
    let trim = |v: f64, decimals: usize| {
        let s = format!("{v:.decimals$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        s
    };
    if secs >= 60.0 {
        let m = (secs / 60.0).floor();
        format!("{}m{}s", m as i64, trim(secs - m * 60.0, 6))
    } else if secs >= 1.0 {
        format!("{}s", trim(secs, 6))
    } else if secs >= 1e-3 {
        format!("{}ms", trim(secs * 1e3, 3))
    } else {
        format!("{}µs", trim(secs * 1e6, 0))
    }
}

fn micro_time(t_us: i64) -> String {
    let secs = t_us.div_euclid(1_000_000);
    let us = t_us.rem_euclid(1_000_000);
    let dt = chrono::DateTime::from_timestamp(secs, 0).unwrap_or_default();
    format!("{}.{us:06}Z", dt.format("%Y-%m-%dT%H:%M:%S"))
}

impl AuditGen {
    /// Writes the log; returns the number of ResponseComplete (or failed
    /// authentication) events written.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<u64> {
        let mut rng = Rng(self.seed.max(1));
        let total_w: f64 = KINDS.iter().map(|k| k.weight).sum();
        let n = ((self.duration as f64 / 1000.0) * self.rate) as u64;
        let mut line = String::with_capacity(2048);
        let mut counted = 0;
        // Events are written in the order kube-apiserver writes them: by the
        // time they are logged (a request's RequestReceived, then later its
        // ResponseComplete). A small buffer of pending completions keeps that.
        let mut pending: Vec<(i64, String)> = Vec::new();
        for i in 0..n {
            let arrival_us =
                self.start * 1000 + (i as f64 * 1e6 / self.rate) as i64 + (rng.f() * 1e6 / self.rate) as i64;
            let mut w = rng.f() * total_w;
            let mut kind = &KINDS[0];
            for k in KINDS {
                if w < k.weight {
                    kind = k;
                    break;
                }
                w -= k.weight;
            }
            let faulty = arrival_us / 1000 >= self.fault_from;
            if self.fault == AuditFault::ListStorm && faulty && rng.f() < 0.6 {
                kind = &STORM;
            }
            let node = rng.next() % 50;
            let id = format!(
                "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                rng.next() as u32,
                rng.next() as u16,
                rng.next() % 0xfff,
                rng.next() % 0xfff,
                rng.next() % 0xffff_ffff_ffff
            );
            let user = kind.user.replace("{n}", &node.to_string());
            let ns = *rng.pick(&["default", "kube-system", "shop", "payments", "monitoring"]);
            let name = format!(
                "{}-{:x}",
                kind.resource.trim_end_matches('s'),
                rng.next() % 0xfffff
            );
            let mut path = String::from(if kind.group.is_empty() { "/api/" } else { "/apis/" });
            if !kind.group.is_empty() {
                path.push_str(kind.group);
                path.push('/');
            }
            path.push_str(kind.version);
            if kind.namespaced
                && (kind.named || kind.verb == "create" || kind.verb == "list")
                && kind.verb != "watch"
            {
                let _ = write!(path, "/namespaces/{ns}");
            }
            let _ = write!(path, "/{}", kind.resource);
            if kind.named {
                let _ = write!(path, "/{name}");
            }
            if !kind.sub.is_empty() {
                let _ = write!(path, "/{}", kind.sub);
            }
            if kind.verb == "watch" {
                path.push_str("?allowWatchBookmarks=true&resourceVersion=1200345&timeout=5m&watch=true");
            } else if kind.verb == "list" {
                path.push_str("?limit=500");
            }
            // Background latency: log-normal around the kind's median.
            let z = (-2.0 * (rng.f().max(1e-12)).ln()).sqrt() * (2.0 * std::f64::consts::PI * rng.f()).cos();
            let mut secs = kind.median * (0.6 * z).exp();
            let mut code = 200;
            if kind.verb == "create" {
                code = 201;
            }
            let mut layers: Layers = Vec::new();
            let long = kind.verb == "watch";
            let mut fail_authn = false;
            let mut forbid = false;
            if !long {
                let etcd_share = if kind.verb == "list" { 0.85 } else { 0.6 };
                layers.push(("etcd", secs * etcd_share));
                layers.push(("serialize-response-object", secs * 0.05));
                layers.push(("response-write", secs * 0.02));
                if kind.verb == "list" {
                    layers.push(("transform-response-object", secs * 0.03));
                }
                let extra = 0.8 + 1.8 * rng.f();
                match self.fault {
                    AuditFault::EtcdSlow | AuditFault::EtcdSlowUnannotated if faulty => {
                        layers[0].1 += extra;
                        secs += extra;
                    }
                    AuditFault::ApfQueue if faulty => {
                        if rng.f() < 0.3 {
                            code = 429;
                            secs = 0.001;
                            layers.clear();
                        } else {
                            layers.push(("apf-queue-wait", extra));
                            secs += extra;
                        }
                    }
                    AuditFault::Webhook
                        if faulty
                            && kind.resource == "pods"
                            && (kind.verb == "create" && kind.sub.is_empty() || kind.verb == "patch") =>
                    {
                        layers.push(("mutating-webhook", extra * 0.4));
                        layers.push(("validating-webhook", extra * 0.6));
                        secs += extra;
                    }
                    AuditFault::AuthStorm if faulty => {
                        let r = rng.f();
                        if r < 0.5 {
                            fail_authn = true;
                        } else if r < 0.6 {
                            forbid = true;
                        }
                    }
                    _ => {}
                }
            }
            if long {
                // Watches end within the log (its last rotation).
                let left = (self.start + self.duration) as f64 / 1e3 - arrival_us as f64 / 1e6;
                secs = (60.0 + rng.f() * 60.0).min(left.max(0.001));
            }
            let end_us = arrival_us + (secs * 1e6) as i64;
            let annotate =
                !long && secs > 0.5 && self.fault != AuditFault::EtcdSlowUnannotated && !layers.is_empty();
            let user_json = |u: &str| format!(r#"{{"username":"{u}","groups":["system:authenticated"]}}"#);
            let object_ref = {
                let mut o = format!(r#"{{"resource":"{}""#, kind.resource);
                if kind.namespaced && kind.verb != "watch" {
                    let _ = write!(o, r#","namespace":"{ns}""#);
                }
                if kind.named {
                    let _ = write!(o, r#","name":"{name}""#);
                }
                if !kind.group.is_empty() {
                    let _ = write!(o, r#","apiGroup":"{}""#, kind.group);
                }
                let _ = write!(o, r#","apiVersion":"{}""#, kind.version);
                if !kind.sub.is_empty() {
                    let _ = write!(o, r#","subresource":"{}""#, kind.sub);
                }
                o.push('}');
                o
            };
            if fail_authn {
                // Failed authentication: one event, stage ResponseStarted, no user.
                line.clear();
                let _ = write!(
                    line,
                    r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"ResponseStarted","requestURI":"{path}","verb":"{}","user":{{}},"sourceIPs":["10.0.{}.{}"],"userAgent":"ci-deployer/2.3.1","responseStatus":{{"metadata":{{}},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}"}}"#,
                    kind.verb,
                    node % 4,
                    node,
                    micro_time(arrival_us),
                    micro_time(arrival_us + 300)
                );
                pending.push((arrival_us + 300, line.clone()));
                counted += 1;
                self.flush(out, &mut pending, arrival_us)?;
                continue;
            }
            let (user_field, agent) = if forbid {
                (
                    user_json("system:serviceaccount:ci:deployer"),
                    "ci-deployer/2.3.1",
                )
            } else {
                (user_json(&user), kind.agent)
            };
            if forbid {
                code = 403;
            }
            let end_us = if forbid { arrival_us + 2000 } else { end_us };
            // RequestReceived.
            line.clear();
            let _ = write!(
                line,
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"RequestReceived","requestURI":"{path}","verb":"{}","user":{user_field},"sourceIPs":["10.0.{}.{}"],"userAgent":"{agent}","objectRef":{object_ref},"requestReceivedTimestamp":"{t}","stageTimestamp":"{t}"}}"#,
                kind.verb,
                node % 4,
                node,
                t = micro_time(arrival_us)
            );
            self.flush(out, &mut pending, arrival_us)?;
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            // ResponseComplete.
            line.clear();
            let status = if code >= 400 {
                let (reason, msg) = match code {
                    403 => ("Forbidden", "pods is forbidden: User cannot create resource"),
                    _ => ("TooManyRequests", "Too many requests, please try again later."),
                };
                format!(
                    r#"{{"metadata":{{}},"status":"Failure","message":"{msg}","reason":"{reason}","code":{code}}}"#
                )
            } else {
                format!(r#"{{"metadata":{{}},"code":{code}}}"#)
            };
            let mut ann = String::from(if forbid {
                r#""authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":"""#
            } else {
                r#""authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding""#
            });
            if annotate {
                for (l, s) in &layers {
                    if *s > 0.0 {
                        let _ = write!(ann, r#","apiserver.latency.k8s.io/{l}":"{}""#, go_duration(*s));
                    }
                }
                let _ = write!(
                    ann,
                    r#","apiserver.latency.k8s.io/total":"{}""#,
                    go_duration((end_us - arrival_us) as f64 / 1e6)
                );
            }
            let _ = write!(
                line,
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"ResponseComplete","requestURI":"{path}","verb":"{}","user":{user_field},"sourceIPs":["10.0.{}.{}"],"userAgent":"{agent}","objectRef":{object_ref},"responseStatus":{status},"requestReceivedTimestamp":"{}","stageTimestamp":"{}","annotations":{{{ann}}}}}"#,
                kind.verb,
                node % 4,
                node,
                micro_time(arrival_us),
                micro_time(end_us)
            );
            pending.push((end_us, line.clone()));
            counted += 1;
        }
        self.flush(out, &mut pending, i64::MAX)?;
        Ok(counted)
    }

    /// Writes the pending completions logged before `now` (µs), in time order.
    fn flush(&self, out: &mut dyn Write, pending: &mut Vec<(i64, String)>, now: i64) -> io::Result<()> {
        if pending.iter().all(|(t, _)| *t > now) {
            return Ok(());
        }
        pending.sort_by_key(|(t, _)| *t);
        let k = pending.partition_point(|(t, _)| *t <= now);
        for (_, l) in pending.drain(..k) {
            out.write_all(l.as_bytes())?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_round_trip() {
        for (v, s) in [
            (10.06, "10.06s"),
            (0.5123, "512.3ms"),
            (62.5, "1m2.5s"),
            (0.00085, "850µs"),
        ] {
            assert_eq!(go_duration(v), s);
            let back = cptriage::source::audit::event::parse_go_duration(s).unwrap();
            assert!((back - v).abs() < 1e-9);
        }
    }

    #[test]
    fn same_seed_same_bytes() {
        let g = AuditGen {
            start: 1_767_225_600_000,
            duration: 20_000,
            rate: 20.0,
            fault: AuditFault::EtcdSlow,
            fault_from: 1_767_225_610_000,
            seed: 7,
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        g.write(&mut a).unwrap();
        g.write(&mut b).unwrap();
        assert_eq!(a, b);
        assert!(a.len() > 400 * 300);
    }
}
