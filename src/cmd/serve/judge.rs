//! One triage judged: the `diagnose --prometheus` of one `--by` value over
//! the triage's window, rendered as the JSON and HTML reports. This is the
//! only place `serve` reaches the diagnosis.

use super::store::{Bodies, Job, Outcome, Triage};
use crate::cli::{PromArgs, ServeArgs};
use crate::error::CliError;
use crate::pipeline;
use crate::plan::{Plan, PromSource};
use crate::report::{html, json};
use crate::rules::report::Report;
use crate::rules::RuleSet;
use crate::store::Millis;

/// What every triage of a `serve` shares.
pub(crate) struct Judge {
    pub rules: RuleSet,
    pub prom: PromArgs,
    pub by: Option<String>,
    pub rules_path: Option<std::path::PathBuf>,
    pub step: Option<Millis>,
    pub debounce: u32,
}

impl Judge {
    pub(crate) fn new(a: &ServeArgs, rules: RuleSet) -> Judge {
        Judge {
            rules,
            prom: a.prom.clone(),
            by: a.by.clone(),
            rules_path: a.rules.clone(),
            step: a.step,
            debounce: a.debounce,
        }
    }

    /// The plan of a triage: `serve`'s Prometheus flags (secrets read
    /// afresh, so a rotated token file is picked up), the `--by` value as
    /// one more matcher, the window.
    pub(crate) fn plan(&self, cluster: Option<&str>, from: Millis, to: Millis) -> Result<Plan, CliError> {
        let mut source = PromSource::from_args(&self.prom)?;
        if let (Some(by), Some(value)) = (&self.by, cluster) {
            source.select_label(by, value)?;
        }
        let mut plan = Plan::prometheus(source, from, to);
        plan.rules.clone_from(&self.rules_path);
        plan.window.step = self.step;
        plan.debounce = self.debounce as usize;
        Ok(plan)
    }

    /// Judges `job` up to `to`. Data that cannot be judged is an
    /// inconclusive verdict that says why, as `diagnose -o json` writes it.
    pub(crate) fn run(&self, job: &Job, to: Millis) -> (Report, Outcome) {
        let result = self
            .plan(job.cluster.as_deref(), job.from, to)
            .and_then(|plan| pipeline::run(&plan, &self.rules, &mut pipeline::Quiet));
        let (report, error) = match result {
            Ok(pipeline::Outcome::One(r) | pipeline::Outcome::Watched { report: r, .. }) => (r, None),
            Ok(pipeline::Outcome::Fleet(_)) => {
                let r = Report::unusable(
                    &self.rules,
                    "a fleet outcome",
                    Vec::new(),
                    to / 1000 * 1000,
                    self.debounce as usize,
                );
                (
                    r,
                    Some("a fleet outcome where one cluster was judged".to_string()),
                )
            }
            Err(e) => {
                let msg = crate::secret::scrub(&e.to_string()).into_owned();
                let (reason, failures) = match e.unusable() {
                    Some(u) => (u.reason.clone(), u.failures.clone()),
                    None => (
                        msg.lines()
                            .next()
                            .unwrap_or("no usable data")
                            .trim_end_matches(':')
                            .to_string(),
                        Vec::new(),
                    ),
                };
                let failures = failures
                    .iter()
                    .map(|f| crate::secret::scrub(f).into_owned())
                    .collect();
                let reason = crate::secret::scrub(&reason).into_owned();
                let r = Report::unusable(
                    &self.rules,
                    &reason,
                    failures,
                    to / 1000 * 1000,
                    self.debounce as usize,
                );
                (r, Some(super::payload::clip(&msg, 500)))
            }
        };
        let outcome = outcome(&report, error);
        (report, outcome)
    }
}

fn outcome(r: &Report, error: Option<String>) -> Outcome {
    let rc = r.verdict.root_cause.as_ref();
    Outcome {
        status: r.status.as_str().to_string(),
        headline: html::headline(r),
        root_cause: rc.map(|rc| rc.axis_id()),
        instances: rc.map(|rc| rc.instances.clone()).unwrap_or_default(),
        since: rc.and_then(|rc| rc.onset).map(crate::timefmt::format_time),
        error,
    }
}

/// The rendered reports of a judged triage.
pub(crate) fn bodies(r: &Report) -> Bodies {
    Bodies {
        verdict: json::document(r),
        html: html::document(r),
    }
}

/// A triage as `GET /v1/triage/ID` and `--reports` write it: the triage,
/// its group and alerts, and (once judged) its `cptriage/verdict/v1` document.
pub(crate) fn document(t: &Triage, verdict: Option<&serde_json::Value>) -> String {
    let mut doc = serde_json::json!({
        "triage": t,
        "group_key": t.detail.group_key,
        "alerts": t.detail.alerts,
        "more_alerts": t.detail.more_alerts,
    });
    if let Some(v) = verdict {
        doc["verdict"] = v.clone();
    }
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
