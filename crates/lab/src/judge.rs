//! Judging one verdict (`cptriage diagnose -o json`, schema
//! `cptriage/verdict/v1`) against a run's ground truth, criterion by
//! criterion: status, axis, sub-axis, member (single-member faults: the root
//! cause's instances are exactly that member) and onset (within
//! [−5 s, +20 s] of the injection).

use serde::Serialize;
use serde_json::Value;

use crate::truth::Truth;

/// The earliest onset accepted, in seconds relative to the injection.
pub const ONSET_EARLIEST_S: f64 = -5.0;
/// The latest onset accepted, in seconds relative to the injection.
pub const ONSET_LATEST_S: f64 = 20.0;

/// The criteria, in table order.
pub const CRITERIA: [&str; 5] = ["status", "axis", "sub-axis", "member", "onset"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Pass,
    Fail,
    /// The criterion does not apply to this run (no fault, or several members).
    NotApplicable,
}

/// One criterion's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub criterion: &'static str,
    pub expected: String,
    pub got: String,
    pub outcome: Outcome,
}

/// What the verdict said, in the terms of the criteria.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Got {
    pub status: Option<String>,
    pub axis: Option<String>,
    pub sub_axis: Option<String>,
    pub instances: Vec<String>,
    pub onset: Option<String>,
    pub summary: Option<String>,
}

/// The judgement of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judgement {
    pub got: Got,
    /// Onset minus injection, in seconds, when both exist.
    pub onset_delta_s: Option<f64>,
    pub checks: Vec<Check>,
}

impl Judgement {
    /// Every applicable criterion passed.
    pub fn pass(&self) -> bool {
        self.checks.iter().all(|c| c.outcome != Outcome::Fail)
    }

    /// The criteria that failed, as `criterion: expected X, got Y`.
    pub fn failures(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| c.outcome == Outcome::Fail)
            .map(|c| format!("{}: expected {}, got {}", c.criterion, c.expected, c.got))
            .collect()
    }

    pub fn check(&self, criterion: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.criterion == criterion)
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Reads the criteria's fields from a verdict document.
pub fn got(verdict: &Value) -> Got {
    let rc = verdict.get("root_cause").filter(|v| !v.is_null());
    Got {
        status: text(verdict, "status"),
        axis: rc.and_then(|r| text(r, "axis")),
        sub_axis: rc.and_then(|r| text(r, "sub_axis")),
        instances: rc
            .and_then(|r| r.get("instances"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        onset: rc.and_then(|r| text(r, "onset")),
        summary: text(verdict, "summary"),
    }
}

fn dash(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".into())
}

fn outcome(ok: bool) -> Outcome {
    if ok {
        Outcome::Pass
    } else {
        Outcome::Fail
    }
}

/// Parses an RFC 3339 time to unix ms.
pub fn rfc3339_ms(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Judges `verdict` against `truth`, the onset within
/// [[`ONSET_EARLIEST_S`], [`ONSET_LATEST_S`]].
pub fn judge(truth: &Truth, verdict: &Value) -> Judgement {
    judge_within(truth, verdict, ONSET_LATEST_S)
}

/// Judges `verdict` against `truth`, the onset within
/// [[`ONSET_EARLIEST_S`], `onset_latest_s`] (wider for a recording read at a
/// slower scrape interval: `crate::interval::onset_latest_s`).
pub fn judge_within(truth: &Truth, verdict: &Value, onset_latest_s: f64) -> Judgement {
    let got = got(verdict);
    let want = &truth.expect;
    // A fault undone before the recording ends may be over by the end of the
    // window (`recovered`) or still lit there (its effects last a rate window
    // or more): both name the incident.
    let mut accepted = vec![want.status.as_str()];
    if want.status == "degraded" && truth.cleared_at_ms.is_some() {
        accepted.push("recovered");
    }
    // Maintenance too short to degrade anything may be answered healthy.
    let healthy_ok = want.healthy_accepted && got.status.as_deref() == Some("healthy");
    if want.healthy_accepted {
        accepted.push("healthy");
    }
    let mut checks = vec![
        Check {
            criterion: "status",
            expected: accepted.join("|"),
            got: got.status.clone().unwrap_or_else(|| "(no verdict)".into()),
            outcome: outcome(got.status.as_deref().is_some_and(|s| accepted.contains(&s))),
        },
        Check {
            criterion: "axis",
            expected: dash(&want.axis),
            got: dash(&got.axis),
            outcome: outcome(got.axis == want.axis || (healthy_ok && got.axis.is_none())),
        },
        Check {
            criterion: "sub-axis",
            expected: dash(&want.sub_axis),
            got: dash(&got.sub_axis),
            outcome: outcome(got.sub_axis == want.sub_axis || (healthy_ok && got.sub_axis.is_none())),
        },
    ];
    let instances = if got.instances.is_empty() {
        "-".to_string()
    } else {
        got.instances.join(",")
    };
    checks.push(
        if truth.single_member && truth.members.len() == 1 && !healthy_ok {
            let mut have = got.instances.clone();
            have.sort();
            have.dedup();
            Check {
                criterion: "member",
                expected: truth.members[0].clone(),
                got: instances,
                outcome: outcome(have == truth.members),
            }
        } else {
            Check {
                criterion: "member",
                expected: "-".into(),
                got: instances,
                outcome: Outcome::NotApplicable,
            }
        },
    );
    checks.push(onset_check(truth, &got, healthy_ok, onset_latest_s));
    Judgement {
        onset_delta_s: onset_delta_s(truth, &got),
        got,
        checks,
    }
}

/// Onset minus injection, in seconds, when both exist.
fn onset_delta_s(truth: &Truth, got: &Got) -> Option<f64> {
    let onset_ms = got.onset.as_deref().and_then(rfc3339_ms)?;
    Some((onset_ms - truth.injected_at_ms?) as f64 / 1000.0)
}

/// The onset criterion: within [[`ONSET_EARLIEST_S`], `latest`] of the
/// injection, judged for a fault answered as one.
fn onset_check(truth: &Truth, got: &Got, healthy_ok: bool, latest: f64) -> Check {
    let delta = onset_delta_s(truth, got);
    let judged_onset = truth.injected_at_ms.is_some() && truth.expect.status != "healthy" && !healthy_ok;
    Check {
        criterion: "onset",
        expected: if judged_onset {
            onset_bound_text(latest)
        } else {
            "-".into()
        },
        got: match (delta, &got.onset) {
            (Some(d), _) => onset_text(d),
            (None, Some(o)) => o.clone(),
            (None, None) => "-".into(),
        },
        outcome: if judged_onset {
            outcome(delta.is_some_and(|d| (ONSET_EARLIEST_S..=latest).contains(&d)))
        } else {
            Outcome::NotApplicable
        },
    }
}

/// The accepted onset range, as the table and the failures say it: `-5s..+20s`.
pub fn onset_bound_text(latest: f64) -> String {
    format!("{}..{}", onset_text(ONSET_EARLIEST_S), onset_text(latest))
}

/// An onset offset in seconds, to the tenth when it is not whole: +20.1 s
/// is outside [−5 s, +20 s] and must not read "+20s".
fn onset_text(d: f64) -> String {
    if (d - d.round()).abs() < 0.05 {
        format!("{d:+.0}s")
    } else {
        format!("{d:+.1}s")
    }
}

/// Judges a verdict from the run's etcd logs alone (`diagnose --logs`):
/// logs name the axis, the member and the onset, not the sub-axis (a slow
/// leader's disk shows in its log as late heartbeats), and they never show
/// a cluster healthy. A fault: degraded (or recovered when undone), axis
/// etcd, the member of a single-member fault, the onset in range. No fault:
/// no axis raised (`inconclusive`; `healthy` would be a claim logs cannot make
/// and fails too).
pub fn judge_logs(truth: &Truth, verdict: &Value) -> Judgement {
    let mut j = judge(truth, verdict);
    let got = &j.got;
    let faulty = truth.expect.status != "healthy";
    for c in &mut j.checks {
        match c.criterion {
            "status" if !faulty => {
                c.expected = "inconclusive".into();
                c.outcome = outcome(got.status.as_deref() == Some("inconclusive"));
            }
            "sub-axis" => {
                c.expected = "-".into();
                c.outcome = Outcome::NotApplicable;
            }
            _ => {}
        }
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::truth::Expect;

    #[test]
    fn an_onset_just_past_the_bound_does_not_read_as_the_bound() {
        assert_eq!(onset_text(20.1), "+20.1s");
        assert_eq!(onset_text(20.02), "+20s");
        assert_eq!(onset_text(-55.0), "-55s");
        assert_eq!(onset_text(4.96), "+5s");
    }

    #[test]
    fn logs_alone_are_judged_on_axis_member_and_onset_and_never_healthy() {
        let t = truth("degraded", Some("disk"), &["m1"]);
        let leader = judge_logs(
            &t,
            &verdict("degraded", "leader", &["m1"], "1970-01-01T00:16:41Z"),
        );
        assert!(leader.pass(), "{:?}", leader.failures());
        let h = truth("healthy", None, &[]);
        assert!(judge_logs(
            &h,
            &serde_json::json!({"status": "inconclusive", "root_cause": null})
        )
        .pass());
        assert!(!judge_logs(&h, &serde_json::json!({"status": "healthy", "root_cause": null})).pass());
    }

    fn truth(status: &str, sub: Option<&str>, members: &[&str]) -> Truth {
        Truth {
            scenario: "s".into(),
            etcd_version: "3.4.23".into(),
            fault: "f".into(),
            members: members.iter().map(|m| m.to_string()).collect(),
            single_member: members.len() == 1,
            injected_at_ms: sub.map(|_| 1_000_000),
            cleared_at_ms: None,
            recording_from_ms: 900_000,
            recording_to_ms: 1_100_000,
            interval_seconds: 5.0,
            conditions: String::new(),
            expect: Expect {
                status: status.into(),
                axis: sub.map(|_| "etcd".into()),
                sub_axis: sub.map(str::to_string),
                healthy_accepted: false,
            },
            events: vec![],
            known_failure: None,
            known_failure_logs: None,
            known_failures_at: Default::default(),
        }
    }

    fn verdict(status: &str, sub: &str, inst: &[&str], onset: &str) -> Value {
        serde_json::json!({
            "status": status,
            "root_cause": {"axis": "etcd", "sub_axis": sub, "instances": inst, "onset": onset},
        })
    }

    #[test]
    fn single_member_fault_needs_exactly_that_member_and_onset_in_range() {
        let t = truth("degraded", Some("disk"), &["m1"]);
        // 1_000_000 ms is 1970-01-01T00:16:40Z.
        let ok = judge(&t, &verdict("degraded", "disk", &["m1"], "1970-01-01T00:16:55Z"));
        assert!(ok.pass(), "{:?}", ok.failures());
        assert_eq!(ok.onset_delta_s, Some(15.0));
        let all = judge(
            &t,
            &verdict("degraded", "disk", &["m0", "m1", "m2"], "1970-01-01T00:16:40Z"),
        );
        assert_eq!(all.failures(), vec!["member: expected m1, got m0,m1,m2"]);
        let early = judge(&t, &verdict("degraded", "disk", &["m1"], "1970-01-01T00:15:45Z"));
        assert_eq!(early.failures(), vec!["onset: expected -5s..+20s, got -55s"]);
        let late = judge(&t, &verdict("degraded", "disk", &["m1"], "1970-01-01T00:17:01Z"));
        assert!(!late.pass());
    }

    #[test]
    fn healthy_run_fails_on_any_root_cause_and_ignores_member_and_onset() {
        let t = truth("healthy", None, &[]);
        let ok = judge(&t, &serde_json::json!({"status": "healthy", "root_cause": null}));
        assert!(ok.pass());
        assert_eq!(ok.check("onset").unwrap().outcome, Outcome::NotApplicable);
        let alarm = judge(&t, &verdict("degraded", "disk", &["m0"], "1970-01-01T00:16:40Z"));
        let f = alarm.failures();
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f[0].starts_with("status: expected healthy, got degraded"));
        let inconclusive = judge(
            &t,
            &serde_json::json!({"status": "inconclusive", "root_cause": null}),
        );
        assert_eq!(
            inconclusive.failures(),
            vec!["status: expected healthy, got inconclusive"]
        );
    }

    #[test]
    fn multi_member_fault_does_not_judge_member() {
        let t = truth("degraded", Some("raft"), &["m0", "m2"]);
        let j = judge(&t, &verdict("degraded", "raft", &["m1"], "1970-01-01T00:16:41Z"));
        assert!(j.pass());
        assert_eq!(j.check("member").unwrap().outcome, Outcome::NotApplicable);
    }

    #[test]
    fn a_cleared_fault_may_be_recovered_or_still_degraded() {
        let mut t = truth("degraded", Some("raft"), &["m1"]);
        let v = verdict("recovered", "raft", &["m1"], "1970-01-01T00:16:45Z");
        assert_eq!(
            judge(&t, &v).failures(),
            vec!["status: expected degraded, got recovered"]
        );
        t.cleared_at_ms = Some(1_075_000);
        assert!(judge(&t, &v).pass());
        assert!(judge(&t, &verdict("degraded", "raft", &["m1"], "1970-01-01T00:16:45Z")).pass());
        assert!(!judge(&t, &serde_json::json!({"status": "healthy", "root_cause": null})).pass());
    }

    #[test]
    fn maintenance_may_be_answered_healthy_but_never_as_another_fault() {
        let mut t = truth("degraded", Some("maintenance"), &["m1"]);
        t.expect.healthy_accepted = true;
        let healthy = serde_json::json!({"status": "healthy", "root_cause": null});
        assert!(judge(&t, &healthy).pass(), "{:?}", judge(&t, &healthy).failures());
        assert!(judge(
            &t,
            &verdict("degraded", "maintenance", &["m1"], "1970-01-01T00:16:45Z")
        )
        .pass());
        let disk = judge(&t, &verdict("degraded", "disk", &["m1"], "1970-01-01T00:16:45Z"));
        assert_eq!(disk.failures(), vec!["sub-axis: expected maintenance, got disk"]);
        t.expect.healthy_accepted = false;
        assert!(!judge(&t, &healthy).pass());
    }

    #[test]
    fn missing_verdict_fails_status() {
        let t = truth("degraded", Some("disk"), &["m1"]);
        let j = judge(&t, &Value::Null);
        assert_eq!(j.check("status").unwrap().got, "(no verdict)");
        assert!(!j.pass());
    }
}
