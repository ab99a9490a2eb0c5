//! argv → plan: what one diagnosis reads, over which window, judged by which
//! rules, written how. The flags arrive typed (clap parses every time,
//! duration and size, `cli.rs`); this module resolves them once into a
//! [`Plan`], builds the Prometheus connection (auth, TLS, headers) and reads
//! its secrets. Nothing below sees a flag: `pipeline::run` takes a
//! `Plan`. A plan can also be built in code, as `cptriage serve` does for each
//! alert: [`Plan::prometheus`].

use std::path::{Path, PathBuf};

use promql_parser::label::Matcher;

use crate::cli::{ColorChoice, DiagnoseArgs, LimitArgs, LiveArgs, PromArgs, ReportFormat};
use crate::error::CliError;
use crate::rules::engine::{BaselineSpec, Options, DEFAULT_DEBOUNCE};
use crate::rules::RuleSet;
use crate::source::capture::DumpArg;
use crate::source::live::{ClientSpec, Secret};
use crate::source::prometheus::{parse_selector, ApiConfig, PromConfig, RoleSelector};
use crate::source::{Dataset, Role};
use crate::store::Millis;

/// Default length of the window diagnosed over Prometheus when its start is
/// not given.
pub const PROMETHEUS_DEFAULT_WINDOW: Millis = 3600 * 1000;

/// Everything one diagnosis needs, resolved from the flags (or built in code).
#[derive(Debug)]
pub struct Plan {
    /// Where the metrics come from.
    pub metrics: Metrics,
    /// Evidence beside the metrics.
    pub evidence: Evidence,
    /// The analysed window.
    pub window: Window,
    /// Where the baseline comes from.
    pub baseline: Baseline,
    /// Consecutive lit steps that make an onset.
    pub debounce: usize,
    /// The rule file (`None`: the shipped rules); load it with [`load_rules`].
    pub rules: Option<PathBuf>,
    /// How the outcome is written.
    pub output: Output,
}

/// Where the metrics of a diagnosis come from.
#[derive(Debug)]
pub enum Metrics {
    /// No metrics: the evidence alone (`diagnose --audit FILE`).
    None,
    /// Captured dumps (`--dump`, `diagnose DIR`), each file read up to `max_body` bytes.
    Dumps { dumps: Vec<DumpArg>, max_body: u64 },
    /// Live scrapes (`--live`, `--watch`).
    Live(Box<Live>),
    /// A Prometheus-compatible API, judged as one control plane.
    Prometheus(Box<PromSource>),
    /// A Prometheus-compatible API, each value of a label judged as its own
    /// control plane (`--by`).
    Fleet(Box<Fleet>),
}

/// Evidence read beside the metrics, over the same steps.
#[derive(Debug, Default)]
pub struct Evidence {
    /// kube-apiserver audit logs: files or directories of them.
    pub audit: Vec<PathBuf>,
    /// etcd and kube-apiserver logs: `[NAME=]PATH`, files or directories.
    pub logs: Vec<String>,
}

/// The window flags: unset bounds are the data's own (for Prometheus: it
/// ends now and lasts [`PROMETHEUS_DEFAULT_WINDOW`]).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Window {
    /// Assess at this time (default: the end of the window).
    pub at: Option<Millis>,
    pub from: Option<Millis>,
    /// Only the last this much of the window (instead of `from`).
    pub since: Option<Millis>,
    pub to: Option<Millis>,
    pub step: Option<Millis>,
}

/// Where the baseline comes from.
#[derive(Debug, Default)]
pub enum Baseline {
    /// The first quarter of the window.
    #[default]
    WindowStart,
    /// A range of the same data.
    Range { from: Millis, to: Millis },
    /// A separate healthy capture (`--baseline-dump`), each file read up to
    /// `max_body` bytes.
    Dumps { dumps: Vec<DumpArg>, max_body: u64 },
}

/// How the outcome is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub format: ReportFormat,
    pub color: ColorChoice,
}

/// Live scraping: which targets, how often, for how long.
#[derive(Debug, Clone)]
pub struct Live {
    /// Kubeconfig file and context (default: `KUBECONFIG`, `~/.kube/config`,
    /// in-cluster).
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Scrape the apiservers of the kubeconfig.
    pub apiserver: bool,
    /// Every replica of the default/kubernetes EndpointSlice, not only the
    /// kubeconfig's server address.
    pub discover: bool,
    /// Do not verify the apiserver's certificate.
    pub insecure_skip_tls_verify: bool,
    /// etcd members, `[NAME=]URL`, and their TLS files.
    pub etcd: Vec<String>,
    pub etcd_cacert: Option<PathBuf>,
    pub etcd_cert: Option<PathBuf>,
    pub etcd_key: Option<PathBuf>,
    /// kube-controller-managers, `[NAME=]URL`.
    pub controllers: Vec<String>,
    /// node-exporters and cAdvisor endpoints, `[NAME=]URL`.
    pub nodes: Vec<String>,
    pub interval: std::time::Duration,
    /// How long to scrape (`None`: 30 s, or until Ctrl-C for a watch).
    pub duration: Option<std::time::Duration>,
    pub timeout: std::time::Duration,
    /// Largest metrics text of one response, and of one round together.
    pub max_body: u64,
    pub max_body_total: u64,
    /// Redraw the verdict after each round until stopped.
    pub watch: bool,
    /// Also write the rounds as a capture directory.
    pub save: Option<PathBuf>,
}

/// A Prometheus-compatible API: its connection (credentials read) and the
/// selectors of the roles.
#[derive(Debug, Clone)]
pub struct PromSource {
    pub config: PromConfig,
    /// Read recorded signals when the server holds compatible ones
    /// (`--prometheus-recorded auto`).
    pub recorded: bool,
}

/// Fleet mode: every value of `label` judged as its own control plane.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub source: PromSource,
    pub label: String,
    /// Most samples one query may select (0: one query set for the fleet).
    pub max_samples: u64,
    /// Whether `--clusters` narrowed the fleet (said when no cluster is found).
    pub filtered: bool,
}

impl Plan {
    /// A diagnosis of one control plane from a Prometheus-compatible API over
    /// `[from, to]`, with the shipped defaults otherwise (baseline: the start
    /// of the window; `-o json`). `cptriage serve` builds one per alert:
    ///
    /// ```no_run
    /// # use cptriage::plan::{Plan, PromSource};
    /// # fn f(source: PromSource, rules: &cptriage::rules::RuleSet) -> Result<(), cptriage::error::CliError> {
    /// let mut source = source.clone();
    /// source.select_label("cluster", "prod")?;
    /// let plan = Plan::prometheus(source, 1_767_225_600_000, 1_767_229_200_000);
    /// let outcome = cptriage::pipeline::run(&plan, rules, &mut cptriage::pipeline::Quiet)?;
    /// # Ok(()) }
    /// ```
    pub fn prometheus(source: PromSource, from: Millis, to: Millis) -> Plan {
        Plan {
            metrics: Metrics::Prometheus(Box::new(source)),
            evidence: Evidence::default(),
            window: Window {
                from: Some(from),
                to: Some(to),
                ..Window::default()
            },
            baseline: Baseline::WindowStart,
            debounce: DEFAULT_DEBOUNCE,
            rules: None,
            output: Output {
                format: ReportFormat::Json,
                color: ColorChoice::Never,
            },
        }
    }

    /// The plan of `cptriage diagnose`'s flags.
    pub fn from_args(mut a: DiagnoseArgs) -> Result<Plan, CliError> {
        // `diagnose DIR` is `diagnose --dump DIR`.
        a.dump.append(&mut a.paths);
        if a.dump.is_empty()
            && !a.live
            && a.prom.prometheus.is_none()
            && a.audit.is_empty()
            && a.logs.is_empty()
        {
            return Err(CliError::Usage(
                "no metrics to diagnose: give a capture (`cptriage diagnose DIR` or `--dump PATH`), \
                 scrape now with `--live` (with a kubeconfig and/or `--etcd URL`), or query \
                 `--prometheus URL` (and/or read audit logs with `--audit FILE`, etcd and \
                 kube-apiserver logs with `--logs PATH`)"
                    .into(),
            ));
        }
        if !a.live {
            if let Some(flag) = live_flag_given(&a.live_args) {
                return Err(CliError::Usage(format!(
                    "`{flag}` scrapes live targets and needs `--live`; it would be ignored with {}",
                    if a.prom.prometheus.is_some() {
                        "`--prometheus`"
                    } else {
                        "`--dump`"
                    }
                )));
            }
        }
        let metrics = metrics(&a)?;
        let baseline = match (a.baseline_from, a.baseline_to) {
            (Some(from), Some(to)) => Baseline::Range { from, to },
            _ if !a.baseline_dump.is_empty() => Baseline::Dumps {
                dumps: dump_args(&a.baseline_dump)?,
                max_body: a.limits.max_body.0,
            },
            _ => Baseline::WindowStart,
        };
        let format = if a.wide { ReportFormat::Wide } else { a.output };
        Ok(Plan {
            metrics,
            evidence: Evidence {
                audit: a.audit,
                logs: a.logs,
            },
            window: Window {
                at: a.at,
                from: a.from,
                since: a.since,
                to: a.to,
                step: a.step,
            },
            baseline,
            debounce: a.debounce as usize,
            rules: a.rules,
            output: Output {
                format,
                color: a.color,
            },
        })
    }

    /// The window, step and baseline of a diagnosis of local data (dumps, live
    /// scrapes, audit logs): unset bounds are the data's own; `since` counts
    /// back from `to` or the last snapshot.
    pub fn local_options<'a>(
        &self,
        ds: &Dataset,
        baseline_ds: Option<&'a Dataset>,
    ) -> Result<Options<'a>, CliError> {
        let w = &self.window;
        let from = match (w.from, w.since) {
            (Some(f), _) => Some(f),
            (None, Some(d)) => {
                let end = match w.to {
                    Some(t) => t,
                    None => {
                        ds.window()
                            .ok_or_else(|| CliError::data("no snapshot in the input"))?
                            .1
                    }
                };
                Some(end - d)
            }
            (None, None) => None,
        };
        if let (Some(f), Some(t)) = (from, w.to) {
            ordered(f, t)?;
        }
        Ok(Options {
            at: w.at,
            from,
            to: w.to,
            step: w.step,
            baseline: self.baseline_spec(baseline_ds),
            debounce: self.debounce,
            window: None,
            lazy_breakdowns: false,
        })
    }

    /// The window of a Prometheus diagnosis: it ends at `to`, else `at`, else
    /// now; it starts at `from`, else `since` (default one hour) before its end.
    pub fn remote_options(&self) -> Result<Options<'static>, CliError> {
        let w = &self.window;
        let to = match (w.to, w.at) {
            (Some(t), _) => t,
            (None, Some(at)) => at,
            (None, None) => chrono::Utc::now().timestamp_millis() / 1000 * 1000,
        };
        let from = w
            .from
            .unwrap_or_else(|| to - w.since.unwrap_or(PROMETHEUS_DEFAULT_WINDOW));
        ordered(from, to)?;
        Ok(Options {
            at: w.at,
            from: Some(from),
            to: Some(to),
            step: w.step,
            baseline: self.baseline_spec(None),
            debounce: self.debounce,
            window: None,
            lazy_breakdowns: false,
        })
    }

    /// The engine's baseline: an explicit range of the same data, else a
    /// separate healthy dataset, else the start of the window.
    fn baseline_spec<'a>(&self, baseline_ds: Option<&'a Dataset>) -> BaselineSpec<'a> {
        match (&self.baseline, baseline_ds) {
            (Baseline::Range { from, to }, _) => BaselineSpec::Range { from: *from, to: *to },
            (_, Some(b)) => BaselineSpec::Dataset(b),
            _ => BaselineSpec::WindowStart,
        }
    }
}

/// The metric source of `diagnose`'s flags.
fn metrics(a: &DiagnoseArgs) -> Result<Metrics, CliError> {
    if a.prom.prometheus.is_some() {
        let mut source = PromSource::from_args(&a.prom)?;
        source.recorded = a.prometheus_recorded == crate::cli::RecordedMode::Auto;
        let Some(label) = &a.by else {
            return Ok(Metrics::Prometheus(Box::new(source)));
        };
        let label = label.trim().to_string();
        crate::eval::select::check_label_name("--by", &label)?;
        if let Some(re) = &a.clusters {
            source.select(crate::eval::select::regex_matcher("--clusters", &label, re)?);
        }
        return Ok(Metrics::Fleet(Box::new(Fleet {
            source,
            label,
            max_samples: a.prometheus_max_samples,
            filtered: a.clusters.is_some(),
        })));
    }
    if a.live {
        let mut live = Live::from_args(&a.live_args, &a.limits);
        live.watch = a.watch;
        live.save = a.save.clone();
        return Ok(Metrics::Live(Box::new(live)));
    }
    if a.dump.is_empty() {
        return Ok(Metrics::None);
    }
    Ok(Metrics::Dumps {
        dumps: dump_args(&a.dump)?,
        max_body: a.limits.max_body.0,
    })
}

/// `--dump` arguments, `[role:][NAME=]PATH` each.
pub fn dump_args(args: &[String]) -> Result<Vec<DumpArg>, CliError> {
    Ok(args.iter().map(|a| DumpArg::parse(a)).collect::<Result<_, _>>()?)
}

impl Live {
    /// The live flags (shared by `record` and `diagnose --live`).
    pub fn from_args(a: &LiveArgs, limits: &LimitArgs) -> Live {
        Live {
            kubeconfig: a.kubeconfig.clone(),
            context: a.context.clone(),
            apiserver: !a.no_apiserver,
            discover: !a.no_discovery,
            insecure_skip_tls_verify: a.insecure_skip_tls_verify,
            etcd: a.etcd.clone(),
            etcd_cacert: a.etcd_cacert.clone(),
            etcd_cert: a.etcd_cert.clone(),
            etcd_key: a.etcd_key.clone(),
            controllers: a.controller.clone(),
            nodes: a.node.clone(),
            interval: a.interval.std(),
            duration: a.duration.map(|d| d.std()),
            timeout: a.timeout.std(),
            max_body: limits.max_body.0,
            max_body_total: a.max_body_total.0,
            watch: false,
            save: None,
        }
    }
}

/// The first live-scraping flag given (other than at its default), if any.
fn live_flag_given(l: &LiveArgs) -> Option<&'static str> {
    use crate::cli::Duration;
    use crate::source::live::LiveConfig;
    [
        (l.kubeconfig.is_some(), "--kubeconfig"),
        (l.context.is_some(), "--context"),
        (l.no_apiserver, "--no-apiserver"),
        (l.no_discovery, "--no-discovery"),
        (l.insecure_skip_tls_verify, "--insecure-skip-tls-verify"),
        (!l.etcd.is_empty(), "--etcd"),
        (l.etcd_cacert.is_some(), "--etcd-cacert"),
        (l.etcd_cert.is_some(), "--etcd-cert"),
        (l.etcd_key.is_some(), "--etcd-key"),
        (!l.controller.is_empty(), "--controller"),
        (!l.node.is_empty(), "--node"),
        (
            l.interval != Duration::from_std(LiveConfig::DEFAULT_INTERVAL),
            "--interval",
        ),
        (l.duration.is_some(), "--duration"),
        (
            l.timeout != Duration::from_std(LiveConfig::DEFAULT_TIMEOUT),
            "--timeout",
        ),
    ]
    .into_iter()
    .find(|(given, _)| *given)
    .map(|(_, flag)| flag)
}

impl PromSource {
    /// The connection of `--prometheus` and its flags: selectors parsed,
    /// headers split, the token, password and client key read.
    pub fn from_args(a: &PromArgs) -> Result<PromSource, CliError> {
        let url = a
            .prometheus
            .clone()
            .ok_or_else(|| CliError::Usage("missing `--prometheus URL`".into()))?;
        // A role selector must select: `{}` would make every series of every job that role.
        let roles = vec![
            RoleSelector::parse(Role::Apiserver, "--apiserver-selector", &a.apiserver_selector)?,
            RoleSelector::parse(Role::Etcd, "--etcd-selector", &a.etcd_selector)?,
            RoleSelector::parse(Role::Controller, "--controller-selector", &a.controller_selector)?,
            RoleSelector::parse(Role::Node, "--node-selector", &a.node_selector)?,
        ];
        let extra = match &a.selector {
            Some(s) => parse_selector("--selector", s)?,
            None => Vec::new(),
        };
        let config = PromConfig {
            api: ApiConfig {
                url,
                client: client_spec(a)?,
                token: a
                    .prometheus_token_file
                    .as_deref()
                    .map(|p| read_secret("the token file", p))
                    .transpose()?,
                basic: match (&a.prometheus_user, &a.prometheus_password_file) {
                    (Some(u), Some(p)) => Some((u.clone(), read_secret("the password file", p)?)),
                    _ => None,
                },
                headers: headers(&a.prometheus_header)?,
                timeout: a.prometheus_timeout.std(),
                max_response: a.prometheus_max_response.0,
            },
            roles,
            extra,
            instance_label: a.instance_label.trim().to_string(),
            concurrency: usize::from(a.prometheus_concurrency),
            max_points: a.prometheus_max_points as usize,
        };
        if config.instance_label.is_empty() {
            return Err(CliError::Usage("`--instance-label` must not be empty".into()));
        }
        Ok(PromSource {
            config,
            recorded: true,
        })
    }

    /// Adds a matcher to every selector, in place of the extra selector's
    /// matcher of the same label.
    pub fn select(&mut self, m: Matcher) {
        self.config.extra.retain(|x| x.name != m.name);
        self.config.extra.push(m);
    }

    /// Selects the series whose `label` is `value` (e.g. one cluster of a
    /// shared Prometheus).
    pub fn select_label(&mut self, label: &str, value: &str) -> Result<(), CliError> {
        crate::eval::select::check_label_name("the label", label)?;
        let text = format!(
            "{{{label}=\"{}\"}}",
            value.replace('\\', "\\\\").replace('"', "\\\"")
        );
        for m in parse_selector("the label", &text)? {
            self.select(m);
        }
        Ok(())
    }

    /// Whether the server's certificate goes unverified.
    pub fn insecure(&self) -> bool {
        self.config.api.client.insecure
    }
}

/// The TLS settings of the Prometheus connection, with the files read.
fn client_spec(a: &PromArgs) -> Result<ClientSpec, CliError> {
    Ok(ClientSpec {
        ca_pem: a
            .prometheus_ca
            .as_deref()
            .map(|p| read_file("the CA file", p))
            .transpose()?,
        insecure: a.prometheus_insecure_skip_tls_verify,
        client_cert_pem: a
            .prometheus_cert
            .as_deref()
            .map(|p| read_file("the client certificate", p))
            .transpose()?,
        client_key_pem: a
            .prometheus_key
            .as_deref()
            .map(|p| read_secret("the client key", p))
            .transpose()?,
        ..ClientSpec::default()
    })
}

/// `--prometheus-header NAME: VALUE`, each value kept as a secret.
fn headers(flags: &[String]) -> Result<Vec<(String, Secret)>, CliError> {
    let mut headers = Vec::new();
    for h in flags {
        let Some((name, value)) = h.split_once(':') else {
            return Err(CliError::Usage(format!(
                "`--prometheus-header` expects `NAME: VALUE`, got a value without `:` (header `{}`)",
                h.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>()
            )));
        };
        headers.push((
            name.trim().to_string(),
            Secret::new(value.trim().as_bytes().to_vec()),
        ));
    }
    Ok(headers)
}

fn read_secret(what: &str, p: &Path) -> Result<Secret, CliError> {
    let bytes = read_file(what, p)?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(Secret::new(
        text.trim_end_matches(['\n', '\r']).as_bytes().to_vec(),
    ))
}

fn read_file(what: &str, p: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(p).map_err(|e| CliError::Usage(format!("cannot read {what} `{}`: {e}", p.display())))
}

/// `--rules FILE`, or the shipped rules.
pub fn load_rules(path: Option<&Path>) -> Result<RuleSet, CliError> {
    Ok(match path {
        Some(p) => crate::rules::load::load_file(p)?,
        None => RuleSet::default_rules()?,
    })
}

/// `--to` must not be before `--from`.
pub fn ordered(from: Millis, to: Millis) -> Result<(), CliError> {
    if to < from {
        return Err(CliError::Usage("`--to` is before `--from`".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        prom: PromArgs,
    }

    fn selected(selector: Option<&str>, label: &str, value: &str) -> String {
        use clap::Parser;
        let mut argv = vec!["t", "--prometheus", "http://127.0.0.1:9"];
        argv.extend(selector.map(|s| ["--selector", s]).into_iter().flatten());
        let mut s = PromSource::from_args(&Flags::parse_from(argv).prom).unwrap();
        s.select_label(label, value).unwrap();
        crate::eval::select::selector_text(&s.config.extra)
    }

    #[test]
    fn a_selected_label_replaces_its_matcher_and_is_escaped() {
        assert_eq!(selected(None, "cluster", "a"), r#"{cluster="a"}"#);
        assert_eq!(
            selected(Some(r#"{env="prod",cluster="x"}"#), "cluster", "b"),
            r#"{env="prod",cluster="b"}"#
        );
        let tricky = "a\"}) or vector(1) # \\";
        let back =
            crate::eval::select::parse_selector("--selector", &selected(None, "cluster", tricky)).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].value, tricky);
    }
}
