//! Exit codes, documented in the README and tested.

/// The process exit status of every cptriage command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// 0: healthy (diagnose), or the command succeeded.
    Ok = 0,
    /// 1: a failing axis was named (diagnose), or a rule unit test failed (rules test).
    AxisNamed = 1,
    /// 2: usage or configuration error (bad flags, bad rule file, bad expression).
    Usage = 2,
    /// 3: the data is unusable or every source failed, or it cannot decide.
    Data = 3,
    /// 4: a failing axis was named, and everything of that incident had
    /// recovered by the end of the window (diagnose).
    Recovered = 4,
    /// 5: a failing axis was named, but its cause is undecided: an axis that
    /// could have caused it could not be read (diagnose, `verdict.undecided`).
    Undecided = 5,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        self as i32
    }
}
