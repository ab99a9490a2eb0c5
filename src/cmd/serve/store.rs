//! The triages of a running `serve`: their records, the queue of those
//! waiting, which `--by` values are being judged, the reuse of a group's
//! triage by repeated notifications, and retention. Every bound is here:
//! records (`--keep`), queued triages (`--queue`), rendered reports kept in
//! memory ([`BODIES_IN_MEMORY`]).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde::Serialize;

use super::payload::{AlertContext, GroupStatus, Request};
use crate::store::Millis;

/// Finished triages whose rendered JSON and HTML stay in memory; older ones
/// are read back from `--reports` (or are gone without it).
pub(crate) const BODIES_IN_MEMORY: usize = 64;

/// Where a triage is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
    Queued,
    Running,
    /// Judged: the verdict is ready.
    Done,
    /// Stopped before it was judged (shutdown).
    Abandoned,
}

/// What `--keep` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retention {
    Count(usize),
    Age(Millis),
}

impl Retention {
    pub(crate) fn parse(s: &str) -> Result<Retention, String> {
        let s = s.trim();
        if let Ok(n) = s.parse::<usize>() {
            if n == 0 {
                return Err("`--keep` must keep at least one triage".into());
            }
            return Ok(Retention::Count(n));
        }
        match crate::timefmt::parse_duration(s) {
            Ok(d) if d > 0 => Ok(Retention::Age(d)),
            _ => Err(format!(
                "`--keep` takes a count (`500`) or an age (`7d`, `12h`), got {:?}",
                super::payload::clip(s, 40)
            )),
        }
    }
}

/// The rendered reports of a judged triage.
#[derive(Debug)]
pub(crate) struct Bodies {
    /// The `cptriage/verdict/v1` document.
    pub verdict: serde_json::Value,
    /// `GET /v1/triage/ID.html`.
    pub html: String,
}

/// What a judged triage says, for lists, logs and notifications.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Outcome {
    /// `healthy`, `degraded`, `recovered` or `inconclusive`.
    pub status: String,
    pub headline: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<String>,
    /// The root cause's instances.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<String>,
    /// The root cause's onset (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Why the data could not be judged (an inconclusive triage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One triage: a group's alerts of one `--by` value, judged over a window.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Triage {
    pub id: String,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub alert_names: Vec<String>,
    /// `firing`, or `resolved` (judged when the alerts resolved).
    pub alert_status: GroupStatus,
    /// Its alerts resolved since (a later triage re-judged them).
    pub recovered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered_by: Option<String>,
    /// The firing triage this resolved one re-judges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// Notifications that reused this triage.
    pub repeats: u32,
    pub received: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// The window judged; `to` is unset until it runs for a firing group (now).
    pub window: Window,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(skip)]
    pub detail: Detail,
}

/// The window of a triage.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Window {
    pub from: Millis,
    pub to: Option<Millis>,
}

/// What a triage keeps besides its summary.
#[derive(Debug, Clone, Default)]
pub(crate) struct Detail {
    pub group_key: String,
    pub firing: std::collections::BTreeSet<String>,
    pub alerts: Vec<AlertContext>,
    pub more_alerts: usize,
    pub received_ms: Millis,
    pub finished_ms: Option<Millis>,
    pub bodies: Option<Arc<Bodies>>,
}

/// A triage to run: what a worker needs.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub id: String,
    pub cluster: Option<String>,
    pub from: Millis,
    pub to: Option<Millis>,
}

/// The answer to one notification's request.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Admitted {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// An earlier triage of the same group answers this notification.
    pub reused: bool,
    pub phase: Phase,
}

/// The queue is full: the notification is refused whole.
#[derive(Debug, PartialEq)]
pub(crate) struct Full {
    pub queued: usize,
    pub wanted: usize,
}

/// All triages.
pub(crate) struct Store {
    triages: BTreeMap<String, Triage>,
    latest: HashMap<(String, Option<String>), String>,
    queue: VecDeque<String>,
    running: HashSet<Option<String>>,
    capacity: usize,
    keep: Retention,
    reuse: Millis,
    lookback: Millis,
    seq: u16,
    last_ms: Millis,
}

impl Store {
    pub(crate) fn new(capacity: usize, keep: Retention, reuse: Millis, lookback: Millis) -> Store {
        Store {
            triages: BTreeMap::new(),
            latest: HashMap::new(),
            queue: VecDeque::new(),
            running: HashSet::new(),
            capacity,
            keep,
            reuse,
            lookback,
            seq: 0,
            last_ms: 0,
        }
    }

    /// A new id: the time in milliseconds and a sequence number, in hex
    /// (ids sort as they were made).
    fn new_id(&mut self, now: Millis) -> String {
        let ms = now.max(self.last_ms);
        if ms == self.last_ms {
            self.seq = self.seq.wrapping_add(1);
        } else {
            self.seq = 0;
        }
        self.last_ms = ms;
        format!("{:012x}{:04x}", ms.max(0), self.seq)
    }

    /// The earlier triage that answers `r`, if any: a running or recent one
    /// of the same group and `--by` value, for the same alert status, that
    /// already covers every firing alert of `r`.
    fn reusable(&self, r: &Request, now: Millis) -> Option<&Triage> {
        let id = self.latest.get(&(r.group_key.clone(), r.cluster.clone()))?;
        let t = self.triages.get(id)?;
        let recent = match t.phase {
            Phase::Queued | Phase::Running => true,
            Phase::Done => t.detail.finished_ms.is_some_and(|f| now - f <= self.reuse),
            Phase::Abandoned => false,
        };
        (recent && t.alert_status == r.status && r.firing.is_subset(&t.detail.firing)).then_some(t)
    }

    /// Takes one notification's requests: each reuses its group's triage or
    /// is queued as a new one; none is queued when they do not all fit.
    pub(crate) fn admit(&mut self, reqs: Vec<Request>, now: Millis) -> Result<Vec<Admitted>, Full> {
        let wanted = reqs.iter().filter(|r| self.reusable(r, now).is_none()).count();
        if self.queue.len() + wanted > self.capacity {
            return Err(Full {
                queued: self.queue.len(),
                wanted,
            });
        }
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            if let Some(id) = self.reusable(&r, now).map(|t| t.id.clone()) {
                let t = self.triages.get_mut(&id).expect("reusable triage");
                t.repeats += 1;
                out.push(Admitted {
                    id,
                    cluster: r.cluster,
                    reused: true,
                    phase: t.phase,
                });
                continue;
            }
            out.push(self.queue_new(r, now));
        }
        self.retain(now);
        Ok(out)
    }

    fn queue_new(&mut self, r: Request, now: Millis) -> Admitted {
        let id = self.new_id(now);
        let key = (r.group_key.clone(), r.cluster.clone());
        // A resolved notification re-judges the group's firing triage and
        // marks it recovered.
        let follows = match (r.status, self.latest.get(&key)) {
            (GroupStatus::Resolved, Some(prev)) => self
                .triages
                .get_mut(prev)
                .filter(|p| p.alert_status == GroupStatus::Firing)
                .map(|p| {
                    p.recovered = true;
                    p.recovered_by = Some(id.clone());
                    p.id.clone()
                }),
            _ => None,
        };
        let t = Triage {
            id: id.clone(),
            phase: Phase::Queued,
            cluster: r.cluster.clone(),
            alert_names: r.names,
            alert_status: r.status,
            recovered: false,
            recovered_by: None,
            follows,
            repeats: 0,
            received: crate::timefmt::format_time(now),
            started: None,
            finished: None,
            window: Window {
                from: r.started - self.lookback,
                to: r.ended,
            },
            outcome: None,
            detail: Detail {
                group_key: r.group_key,
                firing: r.firing,
                alerts: r.alerts,
                more_alerts: r.more_alerts,
                received_ms: now,
                finished_ms: None,
                bodies: None,
            },
        };
        self.triages.insert(id.clone(), t);
        self.latest.insert(key, id.clone());
        self.queue.push_back(id.clone());
        Admitted {
            id,
            cluster: r.cluster,
            reused: false,
            phase: Phase::Queued,
        }
    }

    /// The next triage a worker may start: the oldest queued one whose
    /// `--by` value is not being judged.
    pub(crate) fn next(&mut self, now: Millis) -> Option<Job> {
        let pos = self.queue.iter().position(|id| {
            self.triages
                .get(id)
                .is_some_and(|t| !self.running.contains(&t.cluster))
        })?;
        let id = self.queue.remove(pos)?;
        let t = self.triages.get_mut(&id)?;
        t.phase = Phase::Running;
        t.started = Some(crate::timefmt::format_time(now));
        self.running.insert(t.cluster.clone());
        Some(Job {
            id,
            cluster: t.cluster.clone(),
            from: t.window.from,
            to: t.window.to,
        })
    }

    /// Records a judged triage.
    pub(crate) fn finish(
        &mut self,
        job: &Job,
        to: Millis,
        outcome: Outcome,
        bodies: Arc<Bodies>,
        now: Millis,
    ) {
        self.running.remove(&job.cluster);
        if let Some(t) = self.triages.get_mut(&job.id) {
            t.phase = Phase::Done;
            t.window.to = Some(to);
            t.finished = Some(crate::timefmt::format_time(now));
            t.detail.finished_ms = Some(now);
            t.outcome = Some(outcome);
            t.detail.bodies = Some(bodies);
        }
        self.retain(now);
    }

    /// Marks every queued triage abandoned (shutdown); returns their ids.
    pub(crate) fn abandon_queued(&mut self) -> Vec<String> {
        let ids: Vec<String> = self.queue.drain(..).collect();
        for id in &ids {
            if let Some(t) = self.triages.get_mut(id) {
                t.phase = Phase::Abandoned;
            }
        }
        ids
    }

    /// Drops what `--keep` does not keep (never a queued or running triage),
    /// and the rendered bodies beyond [`BODIES_IN_MEMORY`].
    fn retain(&mut self, now: Millis) {
        let removable = |t: &Triage| matches!(t.phase, Phase::Done | Phase::Abandoned);
        let drop: Vec<String> = match self.keep {
            Retention::Count(n) => {
                let excess = self.triages.len().saturating_sub(n);
                self.triages
                    .values()
                    .filter(|t| removable(t))
                    .take(excess)
                    .map(|t| t.id.clone())
                    .collect()
            }
            Retention::Age(age) => self
                .triages
                .values()
                .filter(|t| removable(t) && now - t.detail.received_ms > age)
                .map(|t| t.id.clone())
                .collect(),
        };
        for id in drop {
            if let Some(t) = self.triages.remove(&id) {
                let key = (t.detail.group_key, t.cluster);
                if self.latest.get(&key) == Some(&id) {
                    self.latest.remove(&key);
                }
            }
        }
        let mut with_bodies = 0;
        for t in self.triages.values_mut().rev() {
            if t.detail.bodies.is_some() {
                with_bodies += 1;
                if with_bodies > BODIES_IN_MEMORY {
                    t.detail.bodies = None;
                }
            }
        }
    }

    /// Every triage, newest first.
    pub(crate) fn list(&self) -> Vec<Triage> {
        self.triages.values().rev().cloned().collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Triage> {
        self.triages.get(id)
    }

    /// (queued, running).
    pub(crate) fn load(&self) -> (usize, usize) {
        (self.queue.len(), self.running.len())
    }
}

/// Whether `s` is a triage id as [`Store`] makes them.
pub(crate) fn is_id(s: &str) -> bool {
    s.len() == 16
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn req(group: &str, cluster: &str, status: GroupStatus, firing: &[&str]) -> Request {
        Request {
            group_key: group.into(),
            cluster: Some(cluster.into()),
            status,
            names: vec!["A".into()],
            firing: firing.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
            alerts: vec![],
            more_alerts: 0,
            started: 1_000_000,
            ended: None,
        }
    }

    fn judged(s: &mut Store, now: Millis) -> Job {
        let j = s.next(now).expect("a job");
        let o = Outcome {
            status: "healthy".into(),
            headline: "HEALTHY".into(),
            root_cause: None,
            instances: vec![],
            since: None,
            error: None,
        };
        let b = Arc::new(Bodies {
            verdict: serde_json::Value::Null,
            html: String::new(),
        });
        s.finish(&j, now, o, b, now);
        j
    }

    #[test]
    fn repeats_reuse_and_resolved_rejudges() {
        let mut s = Store::new(8, Retention::Count(100), 60_000, 600_000);
        let a = s
            .admit(vec![req("g", "c1", GroupStatus::Firing, &["f1"])], 10)
            .unwrap();
        assert!(!a[0].reused);
        assert_eq!(s.get(&a[0].id).unwrap().window.from, 1_000_000 - 600_000);
        // Repeated while queued, then while recent.
        let b = s
            .admit(vec![req("g", "c1", GroupStatus::Firing, &["f1"])], 20)
            .unwrap();
        assert_eq!((b[0].id.as_str(), b[0].reused), (a[0].id.as_str(), true));
        judged(&mut s, 30);
        let c = s
            .admit(vec![req("g", "c1", GroupStatus::Firing, &["f1"])], 50_000)
            .unwrap();
        assert!(c[0].reused);
        // A new alert in the group, or an old triage: a new one.
        let d = s
            .admit(vec![req("g", "c1", GroupStatus::Firing, &["f1", "f2"])], 50_000)
            .unwrap();
        assert!(!d[0].reused);
        judged(&mut s, 50_001);
        // Resolved: a new triage that follows the firing one, marked recovered.
        let e = s
            .admit(vec![req("g", "c1", GroupStatus::Resolved, &[])], 60_000)
            .unwrap();
        assert!(!e[0].reused);
        let prev = s.get(&d[0].id).unwrap();
        assert!(prev.recovered);
        assert_eq!(prev.recovered_by.as_deref(), Some(e[0].id.as_str()));
        assert_eq!(
            s.get(&e[0].id).unwrap().follows.as_deref(),
            Some(d[0].id.as_str())
        );
        // Another group or cluster is another triage.
        let f = s
            .admit(vec![req("g", "c2", GroupStatus::Firing, &["f1"])], 60_000)
            .unwrap();
        assert!(!f[0].reused);
    }

    #[test]
    fn one_per_cluster_and_a_bounded_queue() {
        let mut s = Store::new(3, Retention::Count(100), 60_000, 0);
        s.admit(vec![req("g1", "c1", GroupStatus::Firing, &["a"])], 1)
            .unwrap();
        s.admit(vec![req("g2", "c1", GroupStatus::Firing, &["b"])], 2)
            .unwrap();
        s.admit(vec![req("g3", "c2", GroupStatus::Firing, &["c"])], 3)
            .unwrap();
        let full = s
            .admit(vec![req("g4", "c3", GroupStatus::Firing, &["d"])], 4)
            .unwrap_err();
        assert_eq!(full, Full { queued: 3, wanted: 1 });
        let j1 = s.next(5).unwrap();
        assert_eq!(j1.cluster.as_deref(), Some("c1"));
        // c1 is being judged: the next is c2's, not c1's second.
        let j2 = s.next(5).unwrap();
        assert_eq!(j2.cluster.as_deref(), Some("c2"));
        assert!(s.next(5).is_none());
        assert_eq!(s.load(), (1, 2));
    }

    #[test]
    fn retention_keeps_the_newest_and_never_a_queued_one() {
        let mut s = Store::new(10, Retention::Count(2), 0, 0);
        for i in 0..3 {
            s.admit(vec![req(&format!("g{i}"), "c", GroupStatus::Firing, &["a"])], i)
                .unwrap();
        }
        // All queued: none dropped.
        assert_eq!(s.list().len(), 3);
        for i in 0..3 {
            judged(&mut s, 10 + i);
        }
        let ids: Vec<String> = s.list().iter().map(|t| t.id.clone()).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids[0] > ids[1], "newest first: {ids:?}");
        assert!(ids.iter().all(|i| is_id(i)));
        assert!(!is_id("../../etc/passwd"));
        assert!(!is_id("0123456789ABCDEF"));
        assert_eq!(Retention::parse("7d").unwrap(), Retention::Age(7 * 86_400_000));
        assert!(Retention::parse("0").is_err());
        assert!(Retention::parse("lots").is_err());
    }
}
