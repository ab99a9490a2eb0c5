//! The log lines shown for the root cause: of the message classes the
//! root-cause leaf's log signals count (their `class` matchers), about the
//! root cause's members, logged during its episode (from one range window
//! before its onset): the first line, and the most telling one (the longest
//! duration, or the first of the most frequent class). Lines are already
//! shortened and redacted by the source.

use crate::rules::load::RuleSet;
use crate::rules::model::SignalRole;
use crate::rules::report::Report;
use crate::source::logs::{ClassCount, LogLine};
use crate::store::Millis;

/// The `class` values an expression selects (`class="x"`, `class=~"a|b"`).
fn classes_of(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("class") {
        rest = &rest[i + 5..];
        let r = rest.trim_start();
        let r = r
            .strip_prefix("=~")
            .or_else(|| r.strip_prefix('='))
            .map(str::trim_start);
        if let Some(v) = r.and_then(|r| r.strip_prefix('"')) {
            if let Some(end) = v.find('"') {
                out.extend(v[..end].split('|').map(str::to_string));
            }
        }
    }
    out
}

/// Fills `report.logs.evidence` with the lines of the root cause.
pub fn fill(rules: &RuleSet, report: &mut Report, range: Millis) {
    let Some(logs) = report.logs.as_mut() else { return };
    let Some(rc) = report.verdict.root_cause.as_ref() else {
        return;
    };
    let Some(l) = rules.leaves.iter().position(|x| x.id == rc.leaf) else {
        return;
    };
    let classes: Vec<String> = super::corroborate::source_signals(rules, l, SignalRole::Logs)
        .into_iter()
        .flat_map(|k| classes_of(&rules.signals[k].def.expr))
        .collect();
    let from = rc.onset.map_or(Millis::MIN, |o| o - range);
    let to = rc.recovered.unwrap_or(Millis::MAX);
    let about = |c: &ClassCount| rc.instances.is_empty() || rc.instances.contains(&c.instance);
    let mut hits: Vec<&ClassCount> = logs
        .classes
        .iter()
        .filter(|c| classes.contains(&c.class) && about(c))
        .filter(|c| c.telling.time >= from && c.first.time <= to)
        .collect();
    if hits.is_empty() {
        return;
    }
    hits.sort_by_key(|c| c.first.time);
    let mut out: Vec<LogLine> = Vec::new();
    let first = hits
        .iter()
        .map(|c| &c.first)
        .filter(|l| l.time >= from && l.time <= to)
        .min_by_key(|l| l.time)
        .or_else(|| hits.iter().map(|c| &c.telling).min_by_key(|l| l.time));
    if let Some(f) = first {
        out.push(f.clone());
    }
    let telling = hits
        .iter()
        .filter(|c| c.telling.took.is_some())
        .max_by(|a, b| {
            a.telling
                .took
                .unwrap_or(0.0)
                .total_cmp(&b.telling.took.unwrap_or(0.0))
        })
        .map(|c| &c.telling)
        .or_else(|| hits.iter().max_by_key(|c| c.count).map(|c| &c.first));
    if let Some(t) = telling {
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    logs.evidence = out;
}

#[cfg(test)]
mod tests {
    use super::classes_of;

    #[test]
    fn class_matchers_of_an_expression() {
        assert_eq!(
            classes_of(
                r#"sum by (instance) (increase(x{class=~"peer_lost|peer_unhealthy"}[$window])) or y{class="nospace"}"#
            ),
            vec!["peer_lost", "peer_unhealthy", "nospace"]
        );
    }
}
