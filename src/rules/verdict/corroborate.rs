//! Corroboration of the root cause by audit logs and by etcd and
//! kube-apiserver logs: the signals of role `audit` or `logs` a leaf lists as
//! `evidence` (or asks in its own question) confirm the axis the tree named
//! when they are lit during its episode ("the logs confirm etcd/leader:
//! heartbeats the leader logged as sent late 11/s on m2 from 11:47:58"), and
//! contradict it when they are read and unlit while another axis's signal of
//! the same source is lit ("apf-queue-wait owned 70% of slow requests' time,
//! not etcd"). Without that source nothing is said; when it cannot tell,
//! that is said.

use super::judge::Judged;
use super::AssessInput;
use crate::rules::load::RuleSet;
use crate::rules::model::SignalRole;
use crate::rules::report::{Availability, Corroboration, CorroborationKind, RootCause, StepState};
use crate::timefmt::format_time;

/// The evidence signals of leaf `l` of one source role (`audit` or `logs`):
/// its `evidence`, then the ones of its own question.
pub(super) fn source_signals(rules: &RuleSet, l: usize, role: SignalRole) -> Vec<usize> {
    let mut out: Vec<usize> = rules.leaves[l]
        .evidence
        .iter()
        .filter_map(|s| rules.signal(s))
        // Log signals decide too (the leaf's own question asks them).
        .chain(if role == SignalRole::Logs {
            super::axes::own_signals(rules, l)
        } else {
            Vec::new()
        })
        .filter(|&k| rules.signals[k].def.role == role)
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|k| seen.insert(*k));
    out
}

/// What a source is called in the statements.
fn source_name(role: SignalRole) -> &'static str {
    match role {
        SignalRole::Logs => "the logs",
        _ => "the audit logs",
    }
}

fn axis_name(rules: &RuleSet, l: usize) -> String {
    let leaf = &rules.leaves[l];
    crate::rules::report::axis_id(&leaf.axis, leaf.sub_axis.as_deref())
}

/// The first lit step of signal `k` in `[a, b]`, and its largest value there.
fn lit_in(judged: &[Judged], input: &AssessInput, k: usize, a: usize, b: usize) -> Option<(usize, f64)> {
    let first = (a..=b).find(|&i| judged[k].states.get(i) == Some(&StepState::Lit))?;
    let v = max_value(input, k, first, b);
    Some((first, v.unwrap_or(f64::NAN)))
}

fn max_value(input: &AssessInput, k: usize, a: usize, b: usize) -> Option<f64> {
    let s = input.signals.get(k)?;
    s.values
        .values()
        .flat_map(|row| row.iter().skip(a).take(b + 1 - a.min(b + 1)).flatten())
        .copied()
        .filter(|v| v.is_finite())
        .reduce(f64::max)
}

/// How the audit logs and the etcd and kube-apiserver logs bear on the root
/// cause (empty without them or without their evidence for that axis).
pub(super) fn corroborate(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    root: Option<&RootCause>,
    at: usize,
) -> Vec<Corroboration> {
    let mut out = by_source(rules, input, judged, root, at, SignalRole::Audit);
    out.extend(by_source(rules, input, judged, root, at, SignalRole::Logs));
    out
}

/// The instances a signal is lit on in `[a, b]`, for the statement.
fn lit_on(judged: &[Judged], k: usize, a: usize, b: usize) -> Vec<String> {
    judged[k]
        .lit
        .iter()
        .filter(|(_, l)| (a..=b).any(|i| l.get(i).copied().flatten() == Some(true)))
        .map(|(inst, _)| inst.clone())
        .collect()
}

/// What one evidence source (audit or logs) says about the root cause.
fn by_source(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    root: Option<&RootCause>,
    at: usize,
    role: SignalRole,
) -> Vec<Corroboration> {
    let Some(rc) = root else { return Vec::new() };
    let Some(l) = rules.leaves.iter().position(|x| x.id == rc.leaf) else {
        return Vec::new();
    };
    let own = source_signals(rules, l, role);
    if own.is_empty() {
        return Vec::new();
    }
    let avail = |k: usize| {
        input
            .signals
            .get(k)
            .map_or(Availability::Error, |s| s.availability)
    };
    if own.iter().all(|&k| avail(k) == Availability::RoleAbsent) {
        return Vec::new();
    }
    let a = rc
        .onset
        .and_then(|o| input.steps.iter().position(|&t| t >= o))
        .unwrap_or(0);
    let b = rc
        .recovered
        .and_then(|r| input.steps.iter().position(|&t| t >= r))
        .unwrap_or(at)
        .min(at);
    let r = Reading {
        rules,
        input,
        judged,
        cause: &rc.instances,
        role,
        who: source_name(role),
        l,
        axis: axis_name(rules, l),
        own,
        a: a.min(b),
        b,
    };
    if r.own.iter().all(|&k| avail(k) != Availability::Evaluated) {
        let why = r
            .own
            .iter()
            .filter_map(|&k| input.signals.get(k).and_then(|s| s.note.clone()))
            .next()
            .unwrap_or_default();
        return vec![Corroboration {
            kind: CorroborationKind::CannotTell,
            axis: r.axis.clone(),
            signal: rules.signals[r.own[0]].def.id.clone(),
            other_axis: None,
            from: None,
            value: None,
            text: format!("{} cannot confirm or contradict it: {why}", r.who),
        }];
    }
    vec![r
        .confirms()
        .or_else(|| r.elsewhere())
        .or_else(|| r.contradicts())
        .unwrap_or_else(|| r.neither())]
}

/// One source's signals read over the root cause's episode `[a, b]`.
struct Reading<'a> {
    rules: &'a RuleSet,
    input: &'a AssessInput,
    judged: &'a [Judged],
    /// The root cause's members.
    cause: &'a [String],
    role: SignalRole,
    who: &'static str,
    /// The root cause's leaf, its axis name, and the source's signals of it.
    l: usize,
    axis: String,
    own: Vec<usize>,
    a: usize,
    b: usize,
}

impl Reading<'_> {
    fn desc(&self, k: usize) -> &str {
        &self.rules.signals[k].def.description
    }

    fn unit(&self, k: usize) -> crate::rules::model::Unit {
        self.rules.signals[k].def.unit
    }

    /// Whether signal `k`'s members can be told against the root cause's:
    /// a log signal with a series named like one of the cause members (the
    /// logs and the metrics name the members alike). Otherwise where it is
    /// lit is not compared.
    fn comparable(&self, k: usize) -> bool {
        self.role == SignalRole::Logs
            && self
                .input
                .signals
                .get(k)
                .is_some_and(|s| s.values.keys().any(|i| self.cause.contains(i)))
    }

    /// Whether own signal `k`, lit during the episode, is lit on a cause
    /// member (or cannot be compared).
    fn on_cause(&self, k: usize) -> bool {
        !self.comparable(k)
            || lit_on(self.judged, k, self.a, self.b)
                .iter()
                .any(|i| self.cause.contains(i))
    }

    /// The first own signal lit during the episode whose lit members are
    /// (`on_cause`) or are not the cause's: its index, first lit step and
    /// largest value there.
    fn first_lit(&self, on_cause: bool) -> Option<(usize, usize, f64)> {
        let (judged, input, (a, b)) = (self.judged, self.input, (self.a, self.b));
        self.own
            .iter()
            .filter(|&&k| self.on_cause(k) == on_cause)
            .find_map(|&k| lit_in(judged, input, k, a, b).map(|(i, v)| (k, i, v)))
    }

    /// A statement about own signal `k` lit from step `i` with value `v`.
    fn statement(&self, kind: CorroborationKind, k: usize, i: usize, v: f64, text: String) -> Corroboration {
        Corroboration {
            kind,
            axis: self.axis.clone(),
            signal: self.rules.signals[k].def.id.clone(),
            other_axis: None,
            from: Some(self.input.steps[i]),
            value: v.is_finite().then_some(v),
            text,
        }
    }

    /// Confirmed: an own signal lit during the episode, on the cause member
    /// where the logs name the members as the metrics do.
    fn confirms(&self) -> Option<Corroboration> {
        let (k, i, v) = self.first_lit(true)?;
        let on = lit_on(self.judged, k, self.a, self.b);
        let members = if self.role == SignalRole::Logs && !on.is_empty() && on.iter().all(|i| i != "(all)") {
            format!(" on {}", on.join(", "))
        } else {
            String::new()
        };
        let text = format!(
            "{} confirm {}: {} {}{members} from {}",
            self.who,
            self.axis,
            self.desc(k),
            self.unit(k).format(v),
            format_time(self.input.steps[i])
        );
        Some(self.statement(CorroborationKind::Confirms, k, i, v, text))
    }

    /// Not confirmed on the cause member: an own log signal lit during the
    /// episode on other members only ("the logs do not confirm etcd/cpu on
    /// m1: … 57% on m0").
    fn elsewhere(&self) -> Option<Corroboration> {
        let (k, i, v) = self.first_lit(false)?;
        let on = lit_on(self.judged, k, self.a, self.b).join(", ");
        let cause = self.cause.join(", ");
        let text = format!(
            "{} do not confirm {} on {cause}: {} {} on {on} from {}, not on {cause}",
            self.who,
            self.axis,
            self.desc(k),
            self.unit(k).format(v),
            format_time(self.input.steps[i]),
        );
        Some(self.statement(CorroborationKind::DoesNotConfirm, k, i, v, text))
    }

    /// Contradicted: another axis's signal of this source lit instead.
    fn contradicts(&self) -> Option<Corroboration> {
        let (rules, judged, input, (a, b)) = (self.rules, self.judged, self.input, (self.a, self.b));
        let other = rules
            .leaf_order
            .iter()
            .filter(|&&m| rules.leaves[m].axis != rules.leaves[self.l].axis)
            .flat_map(|&m| {
                source_signals(rules, m, self.role)
                    .into_iter()
                    .map(move |k| (m, k))
            })
            .filter(|(_, k)| !self.own.contains(k))
            .find_map(|(m, k)| lit_in(judged, input, k, a, b).map(|x| (m, k, x)));
        let (m, k, (i, v)) = other?;
        let mine = self
            .own
            .iter()
            .filter_map(|&o| max_value(input, o, a, b).map(|x| (o, x)))
            .next();
        let axis = &self.axis;
        Some(Corroboration {
            kind: CorroborationKind::Contradicts,
            axis: axis.clone(),
            signal: rules.signals[k].def.id.clone(),
            other_axis: Some(axis_name(rules, m)),
            from: Some(input.steps[i]),
            value: v.is_finite().then_some(v),
            text: format!(
                "{} disagree with the metrics: they point at {} ({} {} from {}){}",
                self.who,
                axis_name(rules, m),
                self.desc(k),
                self.unit(k).format(v),
                format_time(input.steps[i]),
                match mine {
                    Some((o, x)) => format!(
                        ", not at {axis} ({} at most {})",
                        self.desc(o),
                        self.unit(o).format(x)
                    ),
                    None => format!(", not at {axis}"),
                }
            ),
        })
    }

    /// Read, and neither confirming nor pointing elsewhere.
    fn neither(&self) -> Corroboration {
        let (judged, input, (a, b)) = (self.judged, self.input, (self.a, self.b));
        let known = self
            .own
            .iter()
            .any(|&k| (a..=b).any(|i| judged[k].states.get(i).is_some_and(|s| *s != StepState::Unknown)));
        // The largest value at the steps judged unlit (a share over too few slow
        // requests is not judged, and not quoted).
        let mine = self
            .own
            .iter()
            .filter_map(|&o| {
                (a..=b)
                    .filter(|&i| judged[o].states.get(i) == Some(&StepState::Unlit))
                    .filter_map(|i| max_value(input, o, i, i))
                    .reduce(f64::max)
                    .map(|x| (o, x))
            })
            .next();
        let (who, axis, logs) = (self.who, &self.axis, self.role == SignalRole::Logs);
        Corroboration {
            kind: if known {
                CorroborationKind::DoesNotConfirm
            } else {
                CorroborationKind::CannotTell
            },
            axis: axis.clone(),
            signal: self.rules.signals[self.own[0]].def.id.clone(),
            other_axis: None,
            from: None,
            value: mine.map(|(_, x)| x),
            text: match (known, mine) {
                (true, Some((o, x))) => format!(
                    "{who} do not confirm {axis}: {} at most {} during its episode ({})",
                    self.desc(o),
                    self.unit(o).format(x),
                    self.rules.signals[o].def.threshold.text(self.unit(o))
                ),
                (true, None) if logs => format!(
                    "{who} do not confirm {axis}: nothing of it was logged during its episode (a quiet log is not proof either way)"
                ),
                (true, None) => format!(
                    "the audit logs do not confirm {axis}: no request slower than 500 ms with latency annotations during its episode"
                ),
                (false, _) if logs => format!(
                    "{who} cannot confirm or contradict {axis}: they do not cover its episode"
                ),
                (false, _) => format!(
                    "the audit logs cannot confirm or contradict {axis}: too few slow requests with latency annotations during its episode"
                ),
            },
        }
    }
}
