//! The cause sentence of a leaf that says why (`cause:` in the rules): "m2
//! starved of CPU: its CPU use 0.03 (baseline 0.08); its peers' round trips to
//! it 26 ms". Filled from the leaf's evidence on the cause member over its
//! episode, so it agrees with the instance list and the evidence shown.
//! `{ID.top}` names the largest contributor of ID's breakdown ("pods LIST
//! cluster"), said when ID is lit on any instance in the episode (the audit
//! logs' target is not the cause member); `{ID.group}` its first label's
//! value and `{ID.shares}` the contributors of that group with their shares
//! of ID's value ("CREATE"; "validating policy-a 33%, mutating img-scan 28%").

use std::collections::{BTreeMap, BTreeSet};

use crate::rules::model::{cause_placeholders, Unit};
use crate::rules::report::{Contributor, Evidence};
use crate::store::Millis;

/// What a cause sentence is filled from.
pub(super) struct Facts<'a> {
    pub evidence: &'a [Evidence],
    /// The cause member(s).
    pub instances: &'a BTreeSet<String>,
    /// The episode's first and last step.
    pub span: (usize, usize),
    /// Signal id → the labels of its breakdown (`by`), in order.
    pub by: BTreeMap<&'a str, &'a [String]>,
    /// The time of every step.
    pub steps: &'a [Millis],
}

impl Facts<'_> {
    fn signal(&self, id: &str) -> Option<&Evidence> {
        self.evidence.iter().find(|e| e.signal == id)
    }

    /// Whether `id` is lit on a cause member at some step of the episode.
    fn lit(&self, id: &str) -> bool {
        let Some(e) = self.signal(id) else {
            return false;
        };
        let (a, b) = self.span;
        self.instances.iter().any(|inst| {
            e.instance_lit
                .get(inst)
                .is_some_and(|l| (a..=b).any(|i| l.get(i).copied().flatten() == Some(true)))
        })
    }

    /// The signal's value on the first cause member: at its last lit step of
    /// the episode, else the last value of the episode.
    fn value(&self, id: &str) -> Option<String> {
        let e = self.signal(id)?;
        Some(e.threshold.format_value(e.unit, self.number(id)?))
    }

    /// [`Facts::value`] as a number.
    fn number(&self, id: &str) -> Option<f64> {
        self.number_at(id).map(|(_, v)| v)
    }

    /// [`Facts::number`] with the step it was read at.
    fn number_at(&self, id: &str) -> Option<(usize, f64)> {
        let e = self.signal(id)?;
        let inst = self.instances.iter().next()?;
        let series = e.instance_series.get(inst)?;
        let lit = e.instance_lit.get(inst);
        let (a, b) = self.span;
        let is_lit = |i: usize| lit.and_then(|l| l.get(i).copied().flatten()) == Some(true);
        let known = |i: usize| {
            series
                .get(i)
                .copied()
                .flatten()
                .filter(|v| !v.is_nan())
                .map(|v| (i, v))
        };
        (a..=b)
            .rev()
            .filter(|&i| is_lit(i))
            .find_map(known)
            .or_else(|| (a..=b).rev().find_map(known))
    }

    /// What the cause member's value was judged against where no instance
    /// had a baseline (`relative.peers`): the median of the other
    /// instances' values at the step [`Facts::value`] reads. `None` where the
    /// member has a baseline (`{ID.baseline}` says it) or fewer than two
    /// others had a value there.
    fn peers(&self, id: &str) -> Option<String> {
        let e = self.signal(id)?;
        if !e.threshold.relative.as_ref().is_some_and(|r| r.peers) {
            return None;
        }
        let inst = self.instances.iter().next()?;
        let mine = e.instances.iter().find(|i| &i.instance == inst);
        if mine.is_some_and(|i| i.baseline.is_some()) {
            return None;
        }
        let (at, _) = self.number_at(id)?;
        let others = e
            .instance_series
            .iter()
            .filter(|(other, _)| *other != inst)
            .map(|(_, s)| s.get(at).copied().flatten());
        Some(e.unit.format(super::judge::peer_median(others)?))
    }

    /// The signal's contributors, largest first, when it is lit on some
    /// instance in the episode, with the labels of its breakdown (`by`).
    fn contributors(&self, id: &str) -> Option<(&[Contributor], &[String])> {
        let e = self.signal(id)?;
        let (a, b) = self.span;
        let lit = e
            .instance_lit
            .values()
            .any(|l| (a..=b).any(|i| l.get(i).copied().flatten() == Some(true)));
        let by = self.by.get(id)?;
        (lit && !e.contributors.is_empty()).then_some((e.contributors.as_slice(), *by))
    }

    /// The largest contributor of the signal's breakdown at its reference
    /// step, its label values in `by` order ("pods LIST cluster"), when the
    /// signal is lit on some instance in the episode.
    fn top(&self, id: &str) -> Option<String> {
        let (cs, by) = self.contributors(id)?;
        let parts = label_values(&cs[0], by);
        (!parts.is_empty()).then(|| parts.join(" "))
    }

    /// The largest contributor's value of the first `by` label (`CREATE`
    /// for webhooks by operation, type and name): the group
    /// [`Facts::shares`] lists.
    fn group(&self, id: &str) -> Option<String> {
        let (cs, by) = self.contributors(id)?;
        cs[0].labels.get(by.first()?).filter(|v| !v.is_empty()).cloned()
    }

    /// The contributors of the largest one's group (the same first `by`
    /// label), largest first, each named by its other labels with its share
    /// of the signal's value on the cause member: "validating policy-a 33%,
    /// mutating img-scan 28%" (the webhooks of a request's path and their
    /// share of its time).
    fn shares(&self, id: &str) -> Option<String> {
        let (cs, by) = self.contributors(id)?;
        let total = self.number(id).filter(|t| *t > 0.0)?;
        let (first, rest) = by.split_first()?;
        let group = cs[0].labels.get(first);
        let parts: Vec<String> = cs
            .iter()
            .filter(|c| c.labels.get(first) == group)
            .filter_map(|c| {
                let name = label_values(c, rest).join(" ");
                let share = c.value? / total;
                (!name.is_empty()).then(|| format!("{name} {}", Unit::Ratio.format(share)))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// When the signal's lit run on a cause member that reaches into the
    /// episode began (the restart before the clients felt it): a clock time,
    /// with the date when the window spans days.
    fn since(&self, id: &str) -> Option<String> {
        let e = self.signal(id)?;
        let (a, b) = self.span;
        let start = self
            .instances
            .iter()
            .filter_map(|inst| {
                let l = e.instance_lit.get(inst)?;
                let lit = |i: usize| l.get(i).copied().flatten() == Some(true);
                let mut s = (a..=b).find(|&i| lit(i))?;
                while s > 0 && lit(s - 1) {
                    s -= 1;
                }
                Some(s)
            })
            .min()?;
        let t = *self.steps.get(start)?;
        let last = self.steps.last().copied().unwrap_or(t);
        Some(crate::timefmt::format_clock(
            t,
            !crate::timefmt::same_day(t, last),
        ))
    }

    /// The signal's worst value on the members that are not the cause and
    /// were lit on it in the episode (each at its last lit step): what the
    /// others felt. `None` when none of them was lit.
    fn on_others(&self, id: &str) -> Option<String> {
        let e = self.signal(id)?;
        let (a, b) = self.span;
        let below = super::evidence::is_below(&e.threshold);
        let vals = e
            .instance_lit
            .iter()
            .filter(|(inst, _)| !self.instances.contains(*inst))
            .filter_map(|(inst, l)| {
                let i = (a..=b)
                    .rev()
                    .find(|&i| l.get(i).copied().flatten() == Some(true))?;
                e.instance_series.get(inst)?.get(i).copied().flatten()
            });
        let v = super::evidence::worst(below, vals)?;
        Some(e.threshold.format_value(e.unit, v))
    }

    fn baseline(&self, id: &str) -> Option<String> {
        let e = self.signal(id)?;
        let inst = self.instances.iter().next()?;
        let b = e.instances.iter().find(|i| &i.instance == inst)?.baseline?;
        Some(e.unit.format(b))
    }

    /// The members with data on the leaf's evidence that are not the cause.
    fn others(&self) -> Vec<String> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        for e in self.evidence.iter().filter(|e| !e.context) {
            for i in e.instance_series.keys() {
                if !self.instances.contains(i) {
                    out.insert(i.clone());
                }
            }
        }
        out.into_iter().collect()
    }
}

/// A contributor's non-empty values of `labels`, in their order.
fn label_values<'c>(c: &'c Contributor, labels: &[String]) -> Vec<&'c str> {
    labels
        .iter()
        .filter_map(|l| c.labels.get(l))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .collect()
}

/// Fills `clauses`: each is said when every signal it names (`{ID}`, or
/// `{if:ID}`, which prints nothing) is lit on the cause member in the episode
/// and every value it needs exists. The first clause said leads, the others
/// follow it after a colon. `None` without a cause member or a clause said.
pub(super) fn sentence(clauses: &[String], f: &Facts) -> Option<String> {
    if f.instances.is_empty() {
        return None;
    }
    let mut said: Vec<String> = Vec::new();
    for clause in clauses {
        let mut text = clause.clone();
        let mut ok = true;
        for ph in cause_placeholders(clause) {
            let value = match ph {
                "instance" => Some(f.instances.iter().cloned().collect::<Vec<_>>().join(", ")),
                "others" => {
                    let o = f.others();
                    (!o.is_empty()).then(|| o.join(", "))
                }
                _ => {
                    if let Some(id) = ph.strip_prefix("if:") {
                        f.lit(id).then(String::new)
                    } else if let Some(id) = ph.strip_suffix(".baseline") {
                        f.baseline(id)
                    } else if let Some(id) = ph.strip_suffix(".top") {
                        f.top(id)
                    } else if let Some(id) = ph.strip_suffix(".group") {
                        f.group(id)
                    } else if let Some(id) = ph.strip_suffix(".shares") {
                        f.shares(id)
                    } else if let Some(id) = ph.strip_suffix(".since") {
                        f.since(id)
                    } else if let Some(id) = ph.strip_suffix(".others") {
                        f.on_others(id)
                    } else if let Some(id) = ph.strip_suffix(".peers") {
                        f.peers(id)
                    } else {
                        f.value(ph).filter(|_| f.lit(ph))
                    }
                }
            };
            match value {
                Some(v) => text = text.replacen(&format!("{{{ph}}}"), &v, 1),
                None => ok = false,
            }
        }
        if ok {
            said.push(text);
        }
    }
    let (head, rest) = said.split_first()?;
    let mut s = head.clone();
    if !rest.is_empty() {
        s.push_str(": ");
        s.push_str(&rest.join("; "));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::model::{Combine, Threshold, Unit};
    use crate::rules::report::{Availability, InstanceValue};

    /// An instance's values and lit states per step.
    type Row<'a> = (&'a str, Vec<Option<f64>>, Vec<Option<bool>>);

    fn ev(id: &str, unit: Unit, values: &[Row]) -> Evidence {
        Evidence {
            contributors: Vec::new(),
            contributors_note: None,
            signal: id.into(),
            description: id.into(),
            role: "etcd".into(),
            unit,
            availability: Availability::Evaluated,
            alternative: Some(0),
            expression: None,
            threshold: Threshold {
                above: None,
                below: None,
                relative: None,
                combine: Combine::Any,
            },
            threshold_text: String::new(),
            value: None,
            value_at: None,
            baseline: None,
            lit: None,
            instances: values
                .iter()
                .map(|(i, _, _)| InstanceValue {
                    instance: i.to_string(),
                    value: None,
                    baseline: Some(0.08),
                    lit: None,
                })
                .collect(),
            series: Vec::new(),
            instance_series: values
                .iter()
                .map(|(i, v, _)| (i.to_string(), v.clone()))
                .collect(),
            instance_lit: values
                .iter()
                .map(|(i, _, l)| (i.to_string(), l.clone()))
                .collect(),
            threshold_lines: Vec::new(),
            localisation: None,
            note: None,
            since_start: false,
            context: false,
        }
    }

    #[test]
    fn clauses_are_said_only_when_their_signals_are_lit_on_the_cause_member() {
        let evidence = vec![
            ev(
                "cpu",
                Unit::PerSecond,
                &[
                    (
                        "m2",
                        vec![Some(0.08), Some(0.03), Some(0.03)],
                        vec![Some(false), Some(true), Some(true)],
                    ),
                    (
                        "m0",
                        vec![Some(0.05), Some(0.05), Some(0.05)],
                        vec![Some(false); 3],
                    ),
                ],
            ),
            ev(
                "rtt",
                Unit::Seconds,
                &[(
                    "m2",
                    vec![None, Some(f64::NAN), Some(0.001)],
                    vec![None, Some(false), Some(false)],
                )],
            ),
        ];
        let inst: BTreeSet<String> = ["m2".to_string()].into();
        let f = Facts {
            evidence: &evidence,
            instances: &inst,
            span: (1, 2),
            by: BTreeMap::new(),
            steps: &[0, 15_000, 30_000],
        };
        let clauses: Vec<String> = vec![
            "{if:rtt}{instance} slow to reach".into(),
            "{instance} starved of CPU".into(),
            "its CPU use {cpu} (baseline {cpu.baseline})".into(),
            "its peers' round trips to it {rtt}".into(),
            "unlike {others}".into(),
        ];
        assert_eq!(
            sentence(&clauses, &f).unwrap(),
            "m2 starved of CPU: its CPU use 0.03/s (baseline 0.08/s); unlike m0"
        );
        // When the cause member's lit run began (before the episode), and
        // what the others lit on a signal felt.
        let f = Facts {
            evidence: &evidence,
            instances: &inst,
            span: (2, 2),
            steps: &[0, 15_000, 30_000],
            by: BTreeMap::new(),
        };
        let clauses: Vec<String> = vec![
            "{instance} from {cpu.since}".into(),
            "{cpu.others} on the others".into(),
        ];
        assert_eq!(sentence(&clauses, &f).unwrap(), "m2 from 00:00:15Z");
        let m0_lit = ev(
            "cpu",
            Unit::PerSecond,
            &[
                ("m2", vec![Some(0.08); 3], vec![Some(false); 3]),
                (
                    "m0",
                    vec![Some(0.05), Some(0.5), Some(0.7)],
                    vec![Some(false), Some(true), Some(true)],
                ),
            ],
        );
        let f = Facts {
            evidence: std::slice::from_ref(&m0_lit),
            instances: &inst,
            span: (1, 2),
            steps: &[0, 15_000, 30_000],
            by: BTreeMap::new(),
        };
        assert_eq!(
            sentence(
                &["{instance} restarted".into(), "{cpu.others} on the others".into()],
                &f
            )
            .unwrap(),
            "m2 restarted: 0.7/s on the others"
        );
        let none: BTreeSet<String> = BTreeSet::new();
        let f = Facts {
            evidence: &evidence,
            instances: &none,
            span: (1, 2),
            by: BTreeMap::new(),
            steps: &[0, 15_000, 30_000],
        };
        assert_eq!(sentence(&clauses, &f), None);
    }

    /// Webhooks that add up: the group is the largest contributor's first
    /// label, and each webhook of that group is named by its other labels
    /// with its share of the signal's value (the path); a contributor of
    /// another group (UPDATE) is left out.
    #[test]
    fn shares_list_the_largest_contributors_group_with_their_share_of_the_value() {
        let contributor = |op: &str, ty: &str, name: &str, v: f64| Contributor {
            labels: [("operation", op), ("type", ty), ("name", name)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            unit: Unit::Seconds,
            value: Some(v),
            share: None,
            baseline: None,
        };
        let mut path = ev(
            "path",
            Unit::Seconds,
            &[("a0", vec![Some(0.1), Some(40.0)], vec![Some(false), Some(true)])],
        );
        path.contributors = vec![
            contributor("CREATE", "validating", "policy", 16.0),
            contributor("CREATE", "mutating", "scan", 14.0),
            contributor("UPDATE", "mutating", "scan", 11.0),
            contributor("CREATE", "mutating", "inject", 10.0),
        ];
        let evidence = vec![path];
        let inst: BTreeSet<String> = ["a0".to_string()].into();
        let by = ["operation".to_string(), "type".to_string(), "name".to_string()];
        let f = Facts {
            evidence: &evidence,
            instances: &inst,
            span: (1, 1),
            by: [("path", &by[..])].into_iter().collect(),
            steps: &[0, 15_000],
        };
        let clauses: Vec<String> = vec![
            "webhooks on {path.group} add up to {path}".into(),
            "{path.shares}".into(),
        ];
        assert_eq!(
            sentence(&clauses, &f).unwrap(),
            "webhooks on CREATE add up to 40 s: validating policy 40%, mutating scan 35%, mutating inject 25%"
        );
        // Unlit in the episode: neither is said.
        let f = Facts { span: (0, 0), ..f };
        assert_eq!(sentence(&clauses, &f), None);
    }
}
