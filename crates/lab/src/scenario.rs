//! The scenarios: what is done to a cluster, when, and the verdict cptriage
//! should give. Each run starts a fresh 3-member cluster, drives load, records
//! it with `cptriage record`, injects its fault after a healthy lead-in and
//! logs the injection (wall clock) as ground truth.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cptriage_lab::truth::{Event, Expect, Truth, RECORDING_DIR, TRUTH_FILE};

use crate::cluster::{Cluster, ClusterSpec, EtcdBin, Wrapped};
use crate::load::{self, Gateway, Load, LoadSpec};
use crate::log::Log;
use crate::node::NodeExporter;
use crate::noise::{cores, Neighbours, NoiseSpec};
use crate::util::{now_ms, LabError};

/// Every scenario, in run order, with what it does.
pub(crate) const SCENARIOS: &[(&str, &str)] = &[
    (
        "healthy-noisy",
        "no fault; CPU-bound and fsync-heavy neighbour processes on the same cores",
    ),
    (
        "fsync-slow-leader",
        "every fdatasync/fsync of the leader delayed (strace), to the end",
    ),
    (
        "fsync-slow-follower",
        "every fdatasync/fsync of one follower delayed (strace), to the end",
    ),
    ("sigstop-leader", "the leader stopped (SIGSTOP), to the end"),
    (
        "sigkill-leader",
        "the leader killed (SIGKILL), restarted after the fault period",
    ),
    (
        "quorum-loss",
        "two of three members stopped (SIGSTOP), resumed after the fault period",
    ),
    (
        "nospace",
        "the backend filled to its small quota (--quota-backend-bytes): NOSPACE alarm, to the end",
    ),
    (
        "compaction-defrag",
        "not a fault: a large history compacted and every member defragmented",
    ),
    (
        "fsync-slow-leader-30ms",
        "fsync-slow-leader with a 30 ms delay",
    ),
    ("fsync-slow-leader-1s", "fsync-slow-leader with a 1 s delay"),
    (
        "fsync-slow-follower-30ms",
        "fsync-slow-follower with a 30 ms delay",
    ),
    (
        "fsync-slow-follower-1s",
        "fsync-slow-follower with a 1 s delay",
    ),
    (
        "cpu-starved-leader",
        "the leader limited to a few % of one core (cgroup CPU quota) for the fault period, load unchanged",
    ),
    (
        "cpu-starved-follower",
        "a follower limited to a few % of one core (cgroup CPU quota) for the fault period",
    ),
    (
        "cpu-neighbour-leader",
        "the leader pinned to one core shared with CPU-bound neighbours (taskset) for the fault period",
    ),
    (
        "partition-leader",
        "every packet of every peer connection of the leader dropped (nftables) for the fault period",
    ),
    (
        "partition-follower",
        "every packet of every peer connection of a follower dropped (nftables) for the fault period",
    ),
    (
        "peer-loss-follower",
        "a share of the packets of every peer connection of a follower dropped at random (nftables) for the fault period",
    ),
    (
        "peer-latency-leader",
        "the leader's peer traffic delayed (a delaying proxy its peers reach it through, or tc netem) for the fault period",
    ),
    (
        "peer-latency-follower",
        "a follower's peer traffic delayed (a delaying proxy its peers reach it through, or tc netem) for the fault period",
    ),
    (
        "leader-flapping",
        "whoever leads frozen (SIGSTOP) for 2 s every 6 s during the fault period",
    ),
    (
        "defrag-leader",
        "a large, compacted database defragmented on the leader, again every 20 s of the fault period",
    ),
    (
        "defrag-follower",
        "a large, compacted database defragmented on a follower, again every 20 s of the fault period",
    ),
    (
        "overload",
        "a burst of large-value writes from 8 clients for the fault period; no faulty resource",
    ),
];

/// The fsync delay of an fsync-slow scenario: from its name's suffix, else
/// the run's `--fsync-delay`.
fn fsync_delay(scenario: &str, opts: &RunOpts) -> Duration {
    if scenario.ends_with("-30ms") {
        Duration::from_millis(30)
    } else if scenario.ends_with("-1s") {
        Duration::from_secs(1)
    } else {
        opts.fsync_delay
    }
}

/// The member a single-member fault hits: the leader, or the first follower.
fn target(c: &Cluster, g: &mut Gather, scenario: &str) -> Result<(usize, &'static str), LabError> {
    let l = leader(c, g)?;
    if scenario.contains("leader") {
        Ok((l, "leader"))
    } else {
        Ok(((0..c.members.len()).find(|&i| i != l).unwrap_or(0), "follower"))
    }
}

pub(crate) fn is_scenario(name: &str) -> bool {
    SCENARIOS.iter().any(|(n, _)| *n == name)
}

/// How runs are timed and loaded.
#[derive(Clone, Debug)]
pub(crate) struct RunOpts {
    pub cptriage: PathBuf,
    pub interval: Duration,
    /// Healthy recording before the injection.
    pub lead_in: Duration,
    /// How long a fault lasts before it is undone (or the recording goes on).
    pub fault: Duration,
    /// Recording after the fault period.
    pub tail: Duration,
    /// Length of a healthy-noisy recording.
    pub healthy: Duration,
    /// Load before the recording starts.
    pub warmup: Duration,
    pub fsync_delay: Duration,
    pub quota_bytes: u64,
    /// CPU quota of a starved member, % of one core.
    pub cpu_quota_pct: f64,
    /// Share of peer packets dropped by peer-loss, %.
    pub loss_pct: u32,
    /// Delay added each way to a member's peer traffic by peer-latency.
    pub peer_delay: Duration,
    pub load: LoadSpec,
    pub noise: NoiseSpec,
    /// Where member data directories go (removed after each run).
    pub scratch: PathBuf,
}

impl RunOpts {
    /// The recording length of a scenario.
    pub(crate) fn recording(&self, scenario: &str) -> Duration {
        if scenario == "healthy-noisy" {
            self.healthy
        } else {
            self.lead_in + self.fault + self.tail
        }
    }
}

/// The truth being gathered during a run.
struct Gather {
    log: Log,
    events: Vec<Event>,
}

impl Gather {
    fn event(&mut self, what: &str) -> i64 {
        let at = self.log.say(what);
        self.events.push(Event {
            at_ms: at,
            what: what.to_string(),
        });
        at
    }

    fn event_at(&mut self, at: i64, what: &str) {
        self.log.say_at(at, what);
        self.events.push(Event {
            at_ms: at,
            what: what.to_string(),
        });
    }
}

/// Sleeps until `t`.
fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Waits for a leader among the running members (the fault needs one).
fn leader(c: &Cluster, g: &mut Gather) -> Result<usize, LabError> {
    c.wait_leader(Duration::from_secs(20)).ok_or_else(|| {
        g.event("no leader within 20 s");
        LabError::msg("no leader to inject the fault into")
    })
}

/// Runs one scenario into `run_dir` and writes its ground truth there.
pub(crate) fn run(
    opts: &RunOpts,
    bin: &EtcdBin,
    scenario: &str,
    run_dir: &Path,
    log: &Log,
) -> Result<Truth, LabError> {
    fs::create_dir_all(run_dir)?;
    log.add_file(&run_dir.join("lab.log"))?;
    let res = run_inner(opts, bin, scenario, run_dir, log);
    if let Err(e) = &res {
        log.say(&format!("run failed: {e}"));
    }
    log.pop_file();
    res
}

/// Sets the run up, lets its fault family inject (and clear) the fault,
/// then ends the recording and writes the ground truth.
fn run_inner(
    opts: &RunOpts,
    bin: &EtcdBin,
    scenario: &str,
    run_dir: &Path,
    log: &Log,
) -> Result<Truth, LabError> {
    let plan = Plan {
        opts,
        bin,
        scenario,
        dir: run_dir,
    };
    let mut g = Gather {
        log: log.clone(),
        events: Vec::new(),
    };
    let mut running = set_up(&plan, log, &mut g)?;
    let fault = fault_phase(&plan, &mut running, &mut g)?;
    finish(&plan, running, fault, g)
}

/// What one run runs, and where.
struct Plan<'a> {
    opts: &'a RunOpts,
    bin: &'a EtcdBin,
    scenario: &'a str,
    dir: &'a Path,
}

/// What a run has going once its recording started. On an error the fields
/// drop in this order, as the locals of one function would: the recording
/// process (left to end by itself), the node-exporter, the load, the
/// neighbours, the cluster last.
struct Running {
    rec: std::process::Child,
    /// Held (scraped by the recording) until the truth is written.
    _node: NodeExporter,
    load: Load,
    neighbours: Option<Neighbours>,
    cluster: Cluster,
    urls: Vec<String>,
    /// The run's scratch directory (member data, neighbours' files).
    scratch: PathBuf,
    /// Every process ends by itself at the latest this long after the start.
    life: Duration,
    /// When the recording started: wall clock (ms) and the clock the lead-in,
    /// the fault period and the recording's end are timed from.
    rec_from: i64,
    t0: Instant,
}

/// The set-up: the cluster, the neighbours, the prefill, the load through
/// the warm-up, the node-exporter, and the recording started.
fn set_up(plan: &Plan<'_>, log: &Log, g: &mut Gather) -> Result<Running, LabError> {
    let (opts, scenario) = (plan.opts, plan.scenario);
    let rec_len = opts.recording(scenario);
    // Every process ends by itself at the latest this long after now.
    let life = opts.warmup + rec_len + Duration::from_secs(300);
    g.event(&format!(
        "run {scenario} on etcd {} ({}): warm-up {:?}, recording {:?} every {:?}",
        plan.bin.version,
        plan.bin.path.display(),
        opts.warmup,
        rec_len,
        opts.interval
    ));
    let (cluster, scratch) = start_cluster(plan, life, log, g)?;
    let neighbours = if scenario == "healthy-noisy" {
        Some(Neighbours::start(
            &opts.noise,
            &scratch.join("noise"),
            opts.warmup + rec_len,
            log,
        )?)
    } else {
        None
    };
    let urls = cluster.client_urls();
    prefill(scenario, &urls, g)?;
    let load = Load::start(urls.clone(), &opts.load, Instant::now() + life);
    g.event(&format!(
        "load started: {} puts/s ({} B values over {} keys), {} gets/s (half linearizable), one watch per member",
        opts.load.puts_per_s, opts.load.value_bytes, opts.load.keys, opts.load.gets_per_s
    ));
    std::thread::sleep(opts.warmup);

    let node = NodeExporter::start(life, &plan.dir.join("node-exporter.log"))?;
    g.event(&format!("node-exporter up: {}", node.metrics_url()));
    let rec_dir = plan.dir.join(RECORDING_DIR);
    let rec = record(opts, &cluster, &node, &rec_dir, rec_len, plan.dir)?;
    let rec_from = now_ms();
    let t0 = Instant::now();
    g.event_at(rec_from, &format!("recording started: {}", rec_dir.display()));
    Ok(Running {
        rec,
        _node: node,
        load,
        neighbours,
        cluster,
        urls,
        scratch,
        life,
        rec_from,
        t0,
    })
}

/// Starts the run's 3-member cluster (with its small quota for nospace, its
/// peers behind proxies for a latency fault without netem) and waits for a
/// leader. Returns it and the run's scratch directory.
fn start_cluster(
    plan: &Plan<'_>,
    life: Duration,
    log: &Log,
    g: &mut Gather,
) -> Result<(Cluster, PathBuf), LabError> {
    let nospace = plan.scenario == "nospace";
    // A latency fault: netem where the kernel has it, else every member
    // behind a proxy (which one leads is known only once the cluster is up).
    let latency = plan.scenario.starts_with("peer-latency");
    let netem = latency && crate::proxy::netem_available();
    if latency {
        g.event(if netem {
            "tc netem available: the latency fault is a netem qdisc on the loopback"
        } else {
            "no tc netem on this kernel: each member is reached by its peers through a delaying proxy"
        });
    }
    let scratch = plan.opts.scratch.join(
        plan.dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "run".into()),
    );
    let cluster = Cluster::start(
        &ClusterSpec {
            bin: plan.bin,
            members: 3,
            quota_bytes: nospace.then_some(plan.opts.quota_bytes),
            data_dir: scratch.join("data"),
            log_dir: plan.dir.join("etcd"),
            life,
            peer_proxies: latency && !netem,
        },
        log,
    )?;
    let l0 = leader(&cluster, g)?;
    g.event(&format!("cluster up, leader m{l0}"));
    Ok((cluster, scratch))
}

/// Writes what a scenario needs in the database before the load starts: a
/// history to compact (compaction-defrag), a large compacted database
/// (defrag-*); nothing for the others.
fn prefill(scenario: &str, urls: &[String], g: &mut Gather) -> Result<(), LabError> {
    if scenario == "compaction-defrag" {
        let t = Instant::now();
        let n = load::prefill(urls, 20_000, 2_000, 1024);
        g.event(&format!(
            "history written: {n} puts of 1 KiB over 2000 keys in {:.0?}",
            t.elapsed()
        ));
    }
    if scenario.starts_with("defrag-") {
        // A large database, half of it history that the compaction frees:
        // a defragment rewrites ~100 MB and shrinks the file by about as much.
        let t = Instant::now();
        let n = load::prefill(urls, 24_000, 12_000, 8 << 10);
        g.event(&format!(
            "database written: {n} puts of 8 KiB over 12000 keys in {:.0?}",
            t.elapsed()
        ));
        let gw = Gateway::new(Duration::from_secs(120));
        let rev = gw.revision(&urls[0]).map_err(LabError::msg)?;
        match gw.compact(&urls[0], rev) {
            Ok(_) => g.event(&format!(
                "compacted at revision {rev} (physical), before the recording"
            )),
            Err(e) => g.event(&format!("compaction failed: {e}")),
        };
    }
    Ok(())
}

/// What a fault family did: the ground truth's fault fields, and what lasts
/// to the end of the recording and is undone there.
struct Injected {
    members: Vec<String>,
    injected_at: Option<i64>,
    cleared_at: Option<i64>,
    fault_text: String,
    expect: Expect,
    /// The strace delaying fsyncs, stopped at the end of the recording.
    strace: Option<Wrapped>,
    /// Members stopped to the end, resumed at the end of the recording.
    stopped: Vec<usize>,
}

impl Injected {
    fn new(
        members: Vec<String>,
        injected_at: Option<i64>,
        cleared_at: Option<i64>,
        fault_text: String,
        expect: Expect,
    ) -> Injected {
        Injected {
            members,
            injected_at,
            cleared_at,
            fault_text,
            expect,
            strace: None,
            stopped: Vec::new(),
        }
    }

    /// A fault of member `t` injected at `at`.
    fn member(t: usize, at: i64, cleared_at: Option<i64>, fault_text: String, expect: Expect) -> Injected {
        Injected::new(vec![format!("m{t}")], Some(at), cleared_at, fault_text, expect)
    }
}

/// The verdict expected of a fault of etcd's `sub` part.
fn degraded(sub: &str) -> Expect {
    Expect {
        status: "degraded".into(),
        axis: Some("etcd".into()),
        sub_axis: Some(sub.into()),
        healthy_accepted: false,
    }
}

fn healthy() -> Expect {
    Expect {
        status: "healthy".into(),
        axis: None,
        sub_axis: None,
        healthy_accepted: false,
    }
}

/// What a fault family works with, from the injection on.
struct Fault<'a> {
    scenario: &'a str,
    opts: &'a RunOpts,
    cluster: &'a mut Cluster,
    urls: &'a [String],
    g: &'a mut Gather,
    /// Every process ends by itself by then (a guard's watchdog).
    life: Duration,
    /// The end of the fault period.
    fault_end: Instant,
}

impl Fault<'_> {
    /// The member a single-member fault hits, and its role.
    fn target(&mut self) -> Result<(usize, &'static str), LabError> {
        target(self.cluster, self.g, self.scenario)
    }

    /// Logs `INJECT: what` stamped `at`; returns `at`.
    fn inject(&mut self, at: i64, what: &str) -> i64 {
        self.g.event_at(at, &format!("INJECT: {what}"));
        at
    }

    /// Logs `CLEAR: what` now; returns when.
    fn clear(&mut self, what: &str) -> i64 {
        self.g.event(&format!("CLEAR: {what}"))
    }

    /// The fault period, whole seconds.
    fn secs(&self) -> u64 {
        self.opts.fault.as_secs()
    }
}

/// A fault family: injects (and clears) one kind of fault.
type Family = fn(&mut Fault<'_>) -> Result<Injected, LabError>;

/// The fault family of a scenario; none for healthy-noisy.
fn family(scenario: &str) -> Result<Option<Family>, LabError> {
    let family: Family = match scenario {
        "healthy-noisy" => return Ok(None),
        "fsync-slow-leader"
        | "fsync-slow-follower"
        | "fsync-slow-leader-30ms"
        | "fsync-slow-leader-1s"
        | "fsync-slow-follower-30ms"
        | "fsync-slow-follower-1s" => fsync_slow,
        "sigstop-leader" => sigstop,
        "sigkill-leader" => sigkill,
        "quorum-loss" => quorum_loss,
        "nospace" => nospace,
        "compaction-defrag" => compaction_defrag,
        "cpu-starved-leader" | "cpu-starved-follower" => cpu_starved,
        "cpu-neighbour-leader" => cpu_neighbour,
        "partition-leader" | "partition-follower" | "peer-loss-follower" => drop_peer_packets,
        "peer-latency-leader" | "peer-latency-follower" => peer_latency,
        "leader-flapping" => leader_flapping,
        "defrag-leader" | "defrag-follower" => defrag_repeatedly,
        "overload" => overload,
        other => return Err(LabError::msg(format!("unknown scenario `{other}`"))),
    };
    Ok(Some(family))
}

/// The fault phase: at the end of the lead-in, the scenario's fault family
/// injects (and, for those with a fault period, clears) its fault.
fn fault_phase(plan: &Plan<'_>, run: &mut Running, g: &mut Gather) -> Result<Injected, LabError> {
    let Some(family) = family(plan.scenario)? else {
        return Ok(Injected::new(
            Vec::new(),
            None,
            None,
            "none".to_string(),
            healthy(),
        ));
    };
    let inject_at = run.t0 + plan.opts.lead_in;
    sleep_until(inject_at);
    family(&mut Fault {
        scenario: plan.scenario,
        opts: plan.opts,
        cluster: &mut run.cluster,
        urls: &run.urls,
        g,
        life: run.life,
        fault_end: inject_at + plan.opts.fault,
    })
}

/// fsync-slow-*: every fdatasync/fsync of the target delayed (strace), to
/// the end of the recording.
fn fsync_slow(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (t, role) = f.target()?;
    let delay = fsync_delay(f.scenario, f.opts);
    let before = now_ms();
    let s = f.cluster.delay_fsync(t, delay, f.life)?;
    // The delay applies from strace's attach; attaching -f to every
    // thread takes a moment, so give it until the next call returns.
    std::thread::sleep(Duration::from_millis(200));
    let pid = f.cluster.pid(t).unwrap_or(0);
    f.inject(
        before,
        &format!("strace delays every fdatasync/fsync of m{t} ({role}, pid {pid}) by {delay:?}"),
    );
    let text = format!(
        "fdatasync/fsync of m{t} ({role}) delayed by {} ms (strace inject delay_enter) from the injection to the end of the recording",
        delay.as_millis()
    );
    Ok(Injected {
        strace: Some(s),
        ..Injected::member(t, before, None, text, degraded("disk"))
    })
}

/// sigstop-leader: the leader stopped to the end of the recording.
fn sigstop(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (l, role) = f.target()?;
    let at = f.cluster.signal(l, "STOP")?;
    f.inject(at, &format!("SIGSTOP to m{l} ({role})"));
    let text = format!("m{l} ({role}) stopped with SIGSTOP from the injection to the end of the recording");
    Ok(Injected {
        stopped: vec![l],
        ..Injected::member(l, at, None, text, degraded("raft"))
    })
}

/// sigkill-leader: the leader killed, restarted with its data after the
/// fault period.
fn sigkill(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (l, role) = f.target()?;
    let at = f.cluster.kill(l)?;
    f.inject(at, &format!("SIGKILL to m{l} ({role})"));
    sleep_until(f.fault_end);
    f.cluster.start_member(l, false)?;
    let cleared = f.clear(&format!("m{l} restarted with its data"));
    if f.cluster.wait_healthy(l, Duration::from_secs(30)) {
        f.g.event(&format!("m{l} healthy again"));
    } else {
        f.g.event(&format!("m{l} not healthy within 30 s of its restart"));
    }
    let text = format!(
        "m{l} ({role}) killed with SIGKILL, restarted with its data {} s later",
        f.secs()
    );
    Ok(Injected::member(l, at, Some(cleared), text, degraded("raft")))
}

/// quorum-loss: the leader and a follower stopped for the fault period.
fn quorum_loss(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let l = leader(f.cluster, f.g)?;
    let o = (0..3).find(|&i| i != l).unwrap_or(0);
    let at = f.cluster.signal(l, "STOP")?;
    f.cluster.signal(o, "STOP")?;
    f.inject(at, &format!("SIGSTOP to m{l} (leader) and m{o}: no quorum"));
    let mut members = vec![format!("m{l}"), format!("m{o}")];
    members.sort();
    sleep_until(f.fault_end);
    f.cluster.signal(l, "CONT")?;
    f.cluster.signal(o, "CONT")?;
    let cleared = f.clear(&format!("SIGCONT to m{l} and m{o}"));
    match f.cluster.wait_leader(Duration::from_secs(30)) {
        Some(n) => f.g.event(&format!("leader again: m{n}")),
        None => f.g.event("no leader within 30 s of the resume"),
    };
    let text = format!(
        "m{l} (leader) and m{o} stopped with SIGSTOP (quorum lost) for {} s, then resumed",
        f.secs()
    );
    Ok(Injected::new(
        members,
        Some(at),
        Some(cleared),
        text,
        degraded("raft"),
    ))
}

/// nospace: the backend filled to its small quota, the alarm to the end.
fn nospace(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let quota_mib = f.opts.quota_bytes >> 20;
    let at = f.inject(
        now_ms(),
        &format!("filling the backend (quota {quota_mib} MiB) with 256 KiB values"),
    );
    match load::fill_until_nospace(f.urls, 256 << 10, (f.opts.quota_bytes as usize) * 4)? {
        Some(t) => f.g.event_at(
            t,
            &format!("first NOSPACE answer after {:.1} s", (t - at) as f64 / 1000.0),
        ),
        None => {
            f.g.event("no NOSPACE answer after writing 4× the quota");
        }
    }
    let text = format!(
        "backend quota of {quota_mib} MiB filled with large values at the injection: NOSPACE alarm to the end"
    );
    Ok(Injected::new(Vec::new(), Some(at), None, text, degraded("quota")))
}

/// compaction-defrag: not a fault; the history compacted and every member
/// defragmented.
fn compaction_defrag(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let gw = Gateway::new(Duration::from_secs(60));
    let rev = gw.revision(&f.urls[0]).map_err(LabError::msg)?;
    let at = f.g.event(&format!("compaction at revision {rev} (physical)"));
    if let Err(e) = gw.compact(&f.urls[0], rev) {
        f.g.event(&format!("compaction failed: {e}"));
    } else {
        f.g.event("compaction done");
    }
    for (i, u) in f.urls.iter().enumerate() {
        f.g.event(&format!("defragment m{i}"));
        match gw.defragment(u) {
            Ok(_) => f.g.event(&format!("defragment m{i} done")),
            Err(e) => f.g.event(&format!("defragment m{i} failed: {e}")),
        };
    }
    let text = format!("not a fault: compaction of {rev} revisions and a defragment of every member");
    Ok(Injected::new(Vec::new(), Some(at), None, text, healthy()))
}

/// cpu-starved-*: the target's cgroup CPU quota set for the fault period.
fn cpu_starved(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (t, role) = f.target()?;
    let period = crate::faults::CPU_PERIOD_US;
    let quota_us = (f.opts.cpu_quota_pct / 100.0 * period as f64).round() as u64;
    let at = now_ms();
    let file = f.cluster.cgroups.set_cpu_quota(t, Some(quota_us.max(1000)))?;
    f.inject(at, &format!("CPU quota of m{t} ({role}): {file}"));
    sleep_until(f.fault_end);
    let file = f.cluster.cgroups.set_cpu_quota(t, None)?;
    let cleared = f.clear(&format!("CPU quota of m{t} removed: {file}"));
    let text = format!(
        "m{t} ({role}) limited to {}% of one core ({quota_us} µs per {period} µs, {}) for {} s, load unchanged",
        f.opts.cpu_quota_pct,
        f.cluster.cgroups.describe(),
        f.secs()
    );
    Ok(Injected::member(t, at, Some(cleared), text, degraded("cpu")))
}

/// cpu-neighbour-leader: the target pinned to the last core with 4 spinning
/// neighbours pinned there, for the fault period.
fn cpu_neighbour(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (t, role) = f.target()?;
    let n = cores();
    let core = n - 1;
    let pid = f.cluster.pid(t).unwrap_or(0);
    let at = now_ms();
    crate::faults::pin(pid, &core.to_string())?;
    let spin = Neighbours::spinners(core, 4, f.opts.fault)?;
    f.inject(
        at,
        &format!("m{t} ({role}, pid {pid}) pinned to core {core} with 4 CPU-bound neighbours pinned there"),
    );
    sleep_until(f.fault_end);
    drop(spin);
    crate::faults::pin(pid, &format!("0-{}", n - 1))?;
    let cleared = f.clear(&format!("neighbours ended, m{t} unpinned (cores 0-{})", n - 1));
    let text = format!(
        "m{t} ({role}) pinned to core {core} shared with 4 always-spinning neighbours (taskset) for {} s",
        f.secs()
    );
    // The scheduler may give a sleeping etcd its share at once (on the
    // lab's kernel nothing slowed): healthy passes too, another fault does not.
    let expect = Expect {
        healthy_accepted: true,
        ..degraded("cpu")
    };
    Ok(Injected::member(t, at, Some(cleared), text, expect))
}

/// partition-*, peer-loss-follower: all (or a share of) the packets of the
/// target's peer connections dropped (nftables) for the fault period.
fn drop_peer_packets(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (t, role) = f.target()?;
    let share = if f.scenario.starts_with("partition") {
        100
    } else {
        f.opts.loss_pct.clamp(1, 100)
    };
    let net = crate::faults::PeerNet {
        cgroups: &f.cluster.cgroups,
        member: t,
        peer_ports: f.cluster.peer_ports(),
    };
    let at = now_ms();
    // Removes the table when dropped, on an error too.
    let mut drops = net.drop_packets(share, f.life)?;
    f.inject(
        at,
        &format!(
            "{share}% of the packets of every peer connection of m{t} ({role}) dropped; nftables:\n{}",
            drops.rules
        ),
    );
    sleep_until(f.fault_end);
    drops.remove()?;
    let cleared = f.clear(&format!(
        "nftables table removed: m{t}'s peer traffic flows again"
    ));
    let text = if share >= 100 {
        format!(
            "m{t} ({role}) cut off from its peers for {} s: every packet of every peer connection (its listener's and the ones it dialed) dropped with nftables",
            f.secs()
        )
    } else {
        format!(
            "{share}% of the packets of every peer connection of m{t} ({role}) dropped at random (nftables numgen) for {} s",
            f.secs()
        )
    };
    Ok(Injected::member(t, at, Some(cleared), text, degraded("network")))
}

/// peer-latency-*: the target's peer traffic delayed (its proxy, or netem)
/// for the fault period.
fn peer_latency(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (t, role) = f.target()?;
    // A netem guard removes its qdisc when dropped, on an error too.
    let (how, mut netem) = delay_peers(f.cluster, t, f.opts.peer_delay, f.life)?;
    let at = now_ms();
    if let Some(p) = f.cluster.proxies.get(t) {
        p.set_delay(f.opts.peer_delay);
    }
    f.inject(at, &format!("m{t} ({role}): {how}"));
    sleep_until(f.fault_end);
    if let Some(p) = f.cluster.proxies.get(t) {
        p.set_delay(Duration::ZERO);
    }
    if let Some(n) = netem.as_mut() {
        n.remove()?;
    }
    let cleared = f.clear(&format!("m{t}'s peer traffic undelayed"));
    let text = format!("m{t} ({role}): {how}, for {} s", f.secs());
    // A follower's slow link delays its own acknowledgements and the reads
    // it forwards; with 3 members the leader commits with the other
    // follower, so nothing else may degrade: healthy passes too, another
    // fault does not. A leader's slows every commit.
    let expect = Expect {
        healthy_accepted: role == "follower",
        ..degraded("network")
    };
    Ok(Injected::member(t, at, Some(cleared), text, expect))
}

/// leader-flapping: whoever leads frozen for 2 s every ~6 s of the fault
/// period.
fn leader_flapping(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let mut injected: Option<i64> = None;
    let mut frozen: Vec<usize> = Vec::new();
    let mut rounds = 0;
    while Instant::now() + Duration::from_secs(2) < f.fault_end && rounds < 100 {
        rounds += 1;
        let Some(l) = f.cluster.wait_leader(Duration::from_secs(4)) else {
            f.g.event("no leader within 4 s");
            continue;
        };
        let at = f.cluster.signal(l, "STOP")?;
        injected.get_or_insert(at);
        f.inject(at, &format!("SIGSTOP to m{l} (leader), 2 s"));
        std::thread::sleep(Duration::from_secs(2));
        f.cluster.signal(l, "CONT")?;
        f.g.event(&format!("SIGCONT to m{l}"));
        if !frozen.contains(&l) {
            frozen.push(l);
        }
        sleep_until((Instant::now() + Duration::from_secs(4)).min(f.fault_end));
    }
    let cleared = f.clear(&format!("flapping over after {rounds} freezes"));
    frozen.sort();
    let members: Vec<String> = frozen.iter().map(|i| format!("m{i}")).collect();
    let text = format!(
        "whoever led frozen (SIGSTOP) for 2 s, every ~6 s, {rounds} times in {} s (members frozen: {})",
        f.secs(),
        members.join(",")
    );
    Ok(Injected::new(
        members,
        injected,
        Some(cleared),
        text,
        degraded("raft"),
    ))
}

/// defrag-*: the target defragmented every 20 s of the fault period.
fn defrag_repeatedly(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let (t, role) = f.target()?;
    let gw = Gateway::new(Duration::from_secs(120));
    let mut injected: Option<i64> = None;
    let mut members: Vec<String> = Vec::new();
    let mut n = 0;
    while Instant::now() + Duration::from_secs(5) < f.fault_end && n < 10 {
        n += 1;
        let at = f.g.event(&format!("defragment m{t} ({role}), #{n}"));
        if n == 1 {
            injected = Some(at);
            members.push(format!("m{t}"));
        }
        let t0 = Instant::now();
        match gw.defragment(&f.urls[t]) {
            Ok(_) => {
                f.g.event(&format!("defragment m{t} done in {:.1?}", t0.elapsed()))
            }
            Err(e) => {
                f.g.event(&format!("defragment m{t} failed after {:.1?}: {e}", t0.elapsed()))
            }
        };
        sleep_until((t0 + Duration::from_secs(20)).min(f.fault_end));
    }
    let cleared = f.clear("last defragment over");
    let text = format!(
        "maintenance, not a resource fault: m{t} ({role}) defragmented {n} times (every 20 s) in {} s, its ~200 MB database half history",
        f.secs()
    );
    // A stall of seconds may degrade nothing a scrape sees: healthy passes
    // too, any other fault does not.
    let expect = Expect {
        healthy_accepted: true,
        ..degraded("maintenance")
    };
    Ok(Injected::new(members, injected, Some(cleared), text, expect))
}

/// overload: a burst of large writes for the fault period.
fn overload(f: &mut Fault<'_>) -> Result<Injected, LabError> {
    let at = f.inject(
        now_ms(),
        "write burst: 8 clients putting 64 KiB values over 1000 keys, at most 600 MiB",
    );
    let b = load::burst(f.urls, 8, 64 << 10, 1000, f.fault_end, 600 << 20);
    let cleared = f.clear(&format!(
        "burst over: {} puts ({} MiB), {} errors",
        b.puts,
        b.bytes >> 20,
        b.errors
    ));
    let text = format!(
        "overload, no faulty resource: 8 clients wrote {} values of 64 KiB ({} MiB) as fast as the cluster took them, for up to {} s",
        b.puts,
        b.bytes >> 20,
        f.secs()
    );
    Ok(Injected::new(
        Vec::new(),
        Some(at),
        Some(cleared),
        text,
        degraded("load"),
    ))
}

/// The ending: waits for the recording, stops the load, undoes what lasted
/// to the end (strace, stopped members), stops the cluster and writes the
/// ground truth. The node-exporter stops last, once the truth is written.
fn finish(plan: &Plan<'_>, mut run: Running, mut fault: Injected, mut g: Gather) -> Result<Truth, LabError> {
    let opts = plan.opts;
    let conditions = match &run.neighbours {
        Some(_) => format!("{}; {}", load_text(&opts.load), opts.noise.describe(cores())),
        None => load_text(&opts.load),
    };
    sleep_until(run.t0 + opts.recording(plan.scenario));
    let st = wait_child(&mut run.rec, Duration::from_secs(120));
    let rec_to = now_ms();
    g.event(&format!("recording ended ({st})"));
    run.load.stop();
    g.event(&format!("load: {}", run.load.counters.line()));
    if let Some(mut s) = fault.strace.take() {
        s.stop();
    }
    for i in fault.stopped {
        let _ = run.cluster.signal(i, "CONT");
    }
    drop(run.neighbours);
    drop(run.cluster);
    let _ = fs::remove_dir_all(&run.scratch);
    let scenario = plan.scenario;
    let truth = Truth {
        scenario: scenario.to_string(),
        etcd_version: plan.bin.version.clone(),
        single_member: fault.members.len() == 1 && scenario != "nospace" && scenario != "overload",
        fault: fault.fault_text,
        members: fault.members,
        injected_at_ms: fault.injected_at,
        cleared_at_ms: fault.cleared_at,
        recording_from_ms: run.rec_from,
        recording_to_ms: rec_to,
        interval_seconds: opts.interval.as_secs_f64(),
        conditions,
        expect: fault.expect,
        events: g.events,
        known_failure: None,
        known_failure_logs: None,
        known_failures_at: Default::default(),
    };
    let text = serde_json::to_string_pretty(&truth).map_err(|e| LabError::msg(e.to_string()))?;
    fs::write(plan.dir.join(TRUTH_FILE), text + "\n")?;
    Ok(truth)
}

/// Prepares the delay of member `t`'s peer traffic: netem added now (the
/// guard removes it), or the proxy in front of it (set by the caller at the
/// injection). Returns what is delayed, for the log and the ground truth.
fn delay_peers(
    c: &Cluster,
    t: usize,
    d: Duration,
    life: Duration,
) -> Result<(String, Option<crate::proxy::Netem>), LabError> {
    let ms = d.as_millis();
    if let Some(p) = c.proxies.get(t) {
        return Ok((
            format!(
                "every chunk through the proxy (:{}) by which its peers reach its peer listener (:{}) held {ms} ms each way: its messages to its peers on the streams they dialed, their round-trip probes of it and their pipeline posts to it; the streams it dialed itself direct",
                p.port, p.target
            ),
            None,
        ));
    }
    let n = crate::proxy::Netem::start(c.members[t].peer_port, d, life)?;
    let how = format!(
        "every packet to and from its peer listener :{} delayed {ms} ms (tc netem on lo):\n{}",
        c.members[t].peer_port, n.commands
    );
    Ok((how, Some(n)))
}

fn load_text(l: &LoadSpec) -> String {
    format!(
        "load {} puts/s of {} B over {} keys, {} gets/s, a watch per member",
        l.puts_per_s, l.value_bytes, l.keys, l.gets_per_s
    )
}

/// Starts `cptriage record` of the members (named m0, m1, m2, plain metrics
/// ports) and of the node-exporter beside them (named `node`).
fn record(
    opts: &RunOpts,
    c: &Cluster,
    node: &NodeExporter,
    out: &Path,
    len: Duration,
    run_dir: &Path,
) -> Result<std::process::Child, LabError> {
    let logf = fs::File::create(run_dir.join("record.log"))?;
    let mut cmd = Command::new(&opts.cptriage);
    cmd.arg("record")
        .arg("--out")
        .arg(out)
        .args(["--no-apiserver", "--etcd"]);
    for i in 0..c.members.len() {
        cmd.arg(format!("m{i}={}", c.metrics_url(i)));
    }
    cmd.arg("--node").arg(format!("node={}", node.metrics_url()));
    cmd.arg("--interval")
        .arg(format!("{}ms", opts.interval.as_millis()))
        .arg("--duration")
        .arg(format!("{}s", len.as_secs()))
        .args(["--timeout", "3s"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(logf.try_clone()?))
        .stderr(Stdio::from(logf));
    cmd.spawn()
        .map_err(|e| LabError::msg(format!("`{}`: cannot run: {e}", opts.cptriage.display())))
}

/// Waits for a child at most `extra` past now; kills it after that.
fn wait_child(child: &mut std::process::Child, extra: Duration) -> String {
    let deadline = Instant::now() + extra;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return st.to_string(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return "killed: did not finish in time".into();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_has_its_fault_family() {
        for (name, _) in SCENARIOS {
            let f = family(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(f.is_none(), *name == "healthy-noisy", "{name}");
        }
        let e = family("fsync-slow-leader-2s").err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("unknown scenario `fsync-slow-leader-2s`"));
    }
}
