//! The errors a command can end with, each mapped to an exit code.

use crate::exit::ExitCode;

/// A command failure: its message is printed once, by `main`, and its kind
/// decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags, a bad expression, a bad rule file, a path that does not exist.
    #[error("{0}")]
    Usage(String),
    /// The data cannot be used (nothing parsable, every source failed).
    #[error("{0}")]
    Data(String),
    /// Writing the output failed (a closed pipe is not an error: see `main`).
    #[error("cannot write output: {0}")]
    Io(#[from] std::io::Error),
}

impl CliError {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::Usage,
            CliError::Data(_) | CliError::Io(_) => ExitCode::Data,
        }
    }
}

impl From<crate::source::ingest::DumpError> for CliError {
    fn from(e: crate::source::ingest::DumpError) -> Self {
        use crate::source::ingest::DumpError as D;
        match e {
            D::NoData(_) | D::Unreadable { .. } => CliError::Data(e.to_string()),
            D::NotFound(_) | D::BadArgument { .. } | D::Manifest { .. } => CliError::Usage(e.to_string()),
        }
    }
}

impl From<crate::timefmt::TimeError> for CliError {
    fn from(e: crate::timefmt::TimeError) -> Self {
        CliError::Usage(e.to_string())
    }
}

impl From<crate::rules::engine::EngineError> for CliError {
    fn from(e: crate::rules::engine::EngineError) -> Self {
        match e {
            crate::rules::engine::EngineError::NoData => CliError::Data(e.to_string()),
            _ => CliError::Usage(e.to_string()),
        }
    }
}

impl From<crate::source::audit::AuditError> for CliError {
    fn from(e: crate::source::audit::AuditError) -> Self {
        match e {
            crate::source::audit::AuditError::NoEvents(..) => CliError::Data(e.to_string()),
            _ => CliError::Usage(e.to_string()),
        }
    }
}

impl From<crate::eval::select::SelectorError> for CliError {
    fn from(e: crate::eval::select::SelectorError) -> Self {
        CliError::Usage(e.to_string())
    }
}

impl From<crate::source::capture::write::WriteError> for CliError {
    fn from(e: crate::source::capture::write::WriteError) -> Self {
        CliError::Data(e.to_string())
    }
}
