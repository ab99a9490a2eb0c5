//! A declared run of the cptriage binary: the arguments and environment, then
//! what it must end with (status, stdout, stderr), checked by [`Test::run`]:
//!
//! ```ignore
//! Test::new()
//!     .args(&["diagnose", "--dump", DEMO, "--interval", "1s"])
//!     .status(2)
//!     .stderr_has("`--interval` scrapes live targets and needs `--live`")
//!     .stdout("")
//!     .run();
//! ```
//!
//! The status defaults to 0; stdout and stderr are checked only when an
//! expectation is given. A failure shows the whole run (arguments, status,
//! both streams). The run is [`super::Cptriage`]'s: the repository root, the
//! machine's kubeconfig, proxies and terminal settings removed.

use std::process::Output;

/// What a stream must hold.
enum Expect {
    Exactly(String),
    Has(String),
    Lacks(String),
}

pub(crate) struct Test {
    args: Vec<String>,
    env: Vec<(String, String)>,
    status: i32,
    stdout: Vec<Expect>,
    stderr: Vec<Expect>,
}

impl Test {
    pub(crate) fn new() -> Test {
        Test {
            args: Vec::new(),
            env: Vec::new(),
            status: 0,
            stdout: Vec::new(),
            stderr: Vec::new(),
        }
    }

    pub(crate) fn args(mut self, args: &[&str]) -> Test {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    pub(crate) fn arg(mut self, arg: &str) -> Test {
        self.args.push(arg.to_string());
        self
    }

    pub(crate) fn env(mut self, k: &str, v: &str) -> Test {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    /// The exit status it must end with (default 0).
    pub(crate) fn status(mut self, code: i32) -> Test {
        self.status = code;
        self
    }

    /// stdout, exactly.
    pub(crate) fn stdout(mut self, text: &str) -> Test {
        self.stdout.push(Expect::Exactly(text.to_string()));
        self
    }

    /// stdout holds `text`.
    pub(crate) fn stdout_has(mut self, text: &str) -> Test {
        self.stdout.push(Expect::Has(text.to_string()));
        self
    }

    /// stderr, exactly.
    pub(crate) fn stderr(mut self, text: &str) -> Test {
        self.stderr.push(Expect::Exactly(text.to_string()));
        self
    }

    /// stderr holds `text`.
    pub(crate) fn stderr_has(mut self, text: &str) -> Test {
        self.stderr.push(Expect::Has(text.to_string()));
        self
    }

    /// stderr does not hold `text`.
    pub(crate) fn stderr_lacks(mut self, text: &str) -> Test {
        self.stderr.push(Expect::Lacks(text.to_string()));
        self
    }

    /// Runs it and checks every expectation; returns the output for checks
    /// that need to parse it (JSON).
    #[track_caller]
    pub(crate) fn run(self) -> Output {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let out = self
            .env
            .iter()
            .fold(super::Cptriage::new(&args), |c, (k, v)| c.env(k, v))
            .output();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let shown = || {
            format!(
                "cptriage {}\nstatus: {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                self.args.join(" "),
                out.status.code()
            )
        };
        assert_eq!(out.status.code(), Some(self.status), "exit status\n{}", shown());
        for (name, text, expects) in [
            ("stdout", &stdout, &self.stdout),
            ("stderr", &stderr, &self.stderr),
        ] {
            for e in expects {
                match e {
                    Expect::Exactly(want) => assert_eq!(text.as_ref(), want, "{name}\n{}", shown()),
                    Expect::Has(want) => {
                        assert!(text.contains(want.as_str()), "{name} lacks {want:?}\n{}", shown());
                    }
                    Expect::Lacks(bad) => {
                        assert!(!text.contains(bad.as_str()), "{name} holds {bad:?}\n{}", shown());
                    }
                }
            }
        }
        out
    }
}
