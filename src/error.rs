//! The errors a run can end with: each stage's own error enum, carried as
//! it is to the edge, where `main` prints it once and its kind decides the
//! exit code.

use crate::exit::ExitCode;

/// A command failure: its message is printed once, by `main`, and its kind
/// decides the exit code ([`CliError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags, a bad expression, a path that does not exist.
    #[error("{0}")]
    Usage(String),
    /// The data cannot be used (nothing parsable, every source failed),
    /// with each failure.
    #[error("{0}")]
    Data(Unusable),
    /// Reading the dumps failed.
    #[error(transparent)]
    Dump(#[from] crate::source::ingest::DumpError),
    /// Reading the audit logs failed.
    #[error(transparent)]
    Audit(#[from] crate::source::audit::AuditError),
    /// Reading the etcd or kube-apiserver logs failed.
    #[error(transparent)]
    Logs(#[from] crate::source::logs::LogsError),
    /// Querying Prometheus failed (or its configuration is wrong).
    #[error(transparent)]
    Prometheus(#[from] crate::source::prometheus::PromError),
    /// A rule file is invalid.
    #[error(transparent)]
    Rules(#[from] crate::rules::load::RuleError),
    /// The rules engine could not run.
    #[error(transparent)]
    Engine(#[from] crate::rules::engine::EngineError),
    /// A time or duration is invalid.
    #[error(transparent)]
    Time(#[from] crate::timefmt::TimeError),
    /// A selector flag is invalid.
    #[error(transparent)]
    Selector(#[from] crate::eval::select::SelectorError),
    /// Writing a capture directory failed.
    #[error(transparent)]
    Write(#[from] crate::source::capture::write::WriteError),
    /// Writing the output failed (a closed pipe is not an error: see `main`).
    #[error("cannot write output: {0}")]
    Io(#[from] std::io::Error),
}

/// Why the data cannot be used, and each failure that made it so (every
/// scrape that failed, every dump that could not be read). Shown as the
/// reason, then one failure per line; a report of unusable data (`-o json`)
/// keeps them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    pub reason: String,
    pub failures: Vec<String>,
}

impl Unusable {
    /// Unusable data with a reason alone.
    pub fn new(reason: impl Into<String>) -> Unusable {
        Unusable {
            reason: reason.into(),
            failures: Vec::new(),
        }
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)?;
        if !self.failures.is_empty() {
            write!(f, ":\n  {}", self.failures.join("\n  "))?;
        }
        Ok(())
    }
}

impl CliError {
    /// Unusable data with a reason alone.
    pub fn data(reason: impl Into<String>) -> CliError {
        CliError::Data(Unusable::new(reason))
    }

    pub fn exit_code(&self) -> ExitCode {
        use crate::rules::engine::EngineError;
        use crate::source::audit::AuditError;
        use crate::source::ingest::DumpError;
        use crate::source::prometheus::PromError;
        match self {
            CliError::Data(_)
            | CliError::Io(_)
            | CliError::Write(_)
            | CliError::Dump(DumpError::NoData(_) | DumpError::Unreadable { .. })
            | CliError::Audit(AuditError::NoEvents(..))
            | CliError::Logs(crate::source::logs::LogsError::NoLines(..))
            | CliError::Engine(EngineError::NoData) => ExitCode::Data,
            CliError::Prometheus(PromError::Config(_)) => ExitCode::Usage,
            CliError::Prometheus(_) => ExitCode::Data,
            CliError::Usage(_)
            | CliError::Dump(_)
            | CliError::Audit(_)
            | CliError::Logs(_)
            | CliError::Rules(_)
            | CliError::Engine(_)
            | CliError::Time(_)
            | CliError::Selector(_) => ExitCode::Usage,
        }
    }

    /// When the data is unusable (exit 3): why, and each failure, as a
    /// report of unusable data states them.
    pub fn unusable(&self) -> Option<Unusable> {
        if self.exit_code() != ExitCode::Data || matches!(self, CliError::Io(_)) {
            return None;
        }
        Some(match self {
            CliError::Data(u) => u.clone(),
            CliError::Dump(crate::source::ingest::DumpError::NoData(ws)) => Unusable {
                reason: "no usable snapshot in the given dumps".into(),
                failures: ws
                    .iter()
                    .map(|w| format!("{}: {}", w.origin, w.message).trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect(),
            },
            e => Unusable::new(e.to_string()),
        })
    }
}
