//! The verdict's headline: the status and the failing axis (the root cause,
//! or the axis whose cause is undecided) with its severity and title. Every
//! renderer starts from this one [`Headline`] and styles it: the first page
//! and `-o wide` in colour on a terminal, Markdown and HTML as a list of facts.

use crate::rules::report::{Report, RootCause, Status};

/// What the headline says; renderers choose the words around it.
pub struct Headline<'a> {
    pub status: Status,
    /// The axis the verdict is about (root cause, or failing with its cause
    /// undecided).
    pub failing: Option<&'a RootCause>,
    /// "cause undecided: …" when no root cause could be named.
    pub undecided: Option<&'a str>,
    /// "recovery not confirmed: …" when the incident looks over only for
    /// want of the signals that could show it continuing.
    pub recovery: Option<&'a str>,
}

/// The headline of an inconclusive verdict.
pub const CANNOT_DECIDE: &str = "the data cannot decide";

impl<'a> Headline<'a> {
    pub fn of(r: &'a Report) -> Self {
        Headline {
            status: r.status,
            failing: r.verdict.failing(),
            undecided: r.verdict.undecided.as_ref().map(|u| u.text.as_str()),
            recovery: r.verdict.recovery_unconfirmed.as_ref().map(|u| u.text.as_str()),
        }
    }

    /// `DEGRADED`.
    pub fn word(&self) -> String {
        self.status.as_str().to_uppercase()
    }

    /// What the failing axis is: `root cause`, or `failing (cause undecided)`.
    pub fn cause_word(&self) -> &'static str {
        if self.undecided.is_some() {
            "failing (cause undecided)"
        } else {
            "root cause"
        }
    }

    /// The fact's name for the failing axis: `Root cause` or `Failing`.
    pub fn fact_name(&self) -> &'static str {
        if self.undecided.is_some() {
            "Failing"
        } else {
            "Root cause"
        }
    }

    /// Why the cause is undecided, without the leading "cause undecided: ".
    pub fn undecided_reason(&self) -> Option<&'a str> {
        self.undecided.map(|t| t.trim_start_matches("cause undecided: "))
    }

    /// Why the recovery is not claimed, without the leading "recovery not
    /// confirmed: ".
    pub fn recovery_reason(&self) -> Option<&'a str> {
        self.recovery
            .map(|t| t.trim_start_matches("recovery not confirmed: "))
    }

    /// What follows the failing axis's title: why its cause is undecided,
    /// then why its recovery is not claimed.
    pub fn qualifiers(&self) -> Vec<&'a str> {
        self.undecided.into_iter().chain(self.recovery).collect()
    }
}
