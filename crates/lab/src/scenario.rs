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

fn run_inner(
    opts: &RunOpts,
    bin: &EtcdBin,
    scenario: &str,
    run_dir: &Path,
    log: &Log,
) -> Result<Truth, LabError> {
    let mut g = Gather {
        log: log.clone(),
        events: Vec::new(),
    };
    let rec_len = opts.recording(scenario);
    // Every process ends by itself at the latest this long after now.
    let life = opts.warmup + rec_len + Duration::from_secs(300);
    g.event(&format!(
        "run {scenario} on etcd {} ({}): warm-up {:?}, recording {:?} every {:?}",
        bin.version,
        bin.path.display(),
        opts.warmup,
        rec_len,
        opts.interval
    ));
    let nospace = scenario == "nospace";
    // A latency fault: netem where the kernel has it, else every member
    // behind a proxy (which one leads is known only once the cluster is up).
    let latency = scenario.starts_with("peer-latency");
    let netem = latency && crate::proxy::netem_available();
    if latency {
        g.event(if netem {
            "tc netem available: the latency fault is a netem qdisc on the loopback"
        } else {
            "no tc netem on this kernel: each member is reached by its peers through a delaying proxy"
        });
    }
    let scratch = opts.scratch.join(
        run_dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "run".into()),
    );
    let mut cluster = Cluster::start(
        &ClusterSpec {
            bin,
            members: 3,
            quota_bytes: nospace.then_some(opts.quota_bytes),
            data_dir: scratch.join("data"),
            log_dir: run_dir.join("etcd"),
            life,
            peer_proxies: latency && !netem,
        },
        log,
    )?;
    let l0 = leader(&cluster, &mut g)?;
    g.event(&format!("cluster up, leader m{l0}"));
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
    if scenario == "compaction-defrag" {
        let t = Instant::now();
        let n = load::prefill(&urls, 20_000, 2_000, 1024);
        g.event(&format!(
            "history written: {n} puts of 1 KiB over 2000 keys in {:.0?}",
            t.elapsed()
        ));
    }
    if scenario.starts_with("defrag-") {
        // A large database, half of it history that the compaction frees:
        // a defragment rewrites ~100 MB and shrinks the file by about as much.
        let t = Instant::now();
        let n = load::prefill(&urls, 24_000, 12_000, 8 << 10);
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
    let mut load = Load::start(urls.clone(), &opts.load, Instant::now() + life);
    g.event(&format!(
        "load started: {} puts/s ({} B values over {} keys), {} gets/s (half linearizable), one watch per member",
        opts.load.puts_per_s, opts.load.value_bytes, opts.load.keys, opts.load.gets_per_s
    ));
    std::thread::sleep(opts.warmup);

    let node = NodeExporter::start(life, &run_dir.join("node-exporter.log"))?;
    g.event(&format!("node-exporter up: {}", node.metrics_url()));
    let rec_dir = run_dir.join(RECORDING_DIR);
    let mut rec = record(opts, &cluster, &node, &rec_dir, rec_len, run_dir)?;
    let rec_from = now_ms();
    let t0 = Instant::now();
    g.event_at(rec_from, &format!("recording started: {}", rec_dir.display()));

    let inject_at = t0 + opts.lead_in;
    let fault_end = inject_at + opts.fault;
    let rec_end = t0 + rec_len;
    let mut members: Vec<String> = Vec::new();
    let mut injected: Option<i64> = None;
    let mut cleared: Option<i64> = None;
    let mut strace: Option<Wrapped> = None;
    let mut stopped: Vec<usize> = Vec::new();
    let fault_text;
    let expect;
    let degraded = |sub: &str| Expect {
        status: "degraded".into(),
        axis: Some("etcd".into()),
        sub_axis: Some(sub.into()),
        healthy_accepted: false,
    };
    let healthy = Expect {
        status: "healthy".into(),
        axis: None,
        sub_axis: None,
        healthy_accepted: false,
    };
    let conditions = match &neighbours {
        Some(_) => format!("{}; {}", load_text(&opts.load), opts.noise.describe(cores())),
        None => load_text(&opts.load),
    };
    match scenario {
        "healthy-noisy" => {
            fault_text = "none".to_string();
            expect = healthy;
        }
        "fsync-slow-leader"
        | "fsync-slow-follower"
        | "fsync-slow-leader-30ms"
        | "fsync-slow-leader-1s"
        | "fsync-slow-follower-30ms"
        | "fsync-slow-follower-1s" => {
            sleep_until(inject_at);
            let (target, role) = target(&cluster, &mut g, scenario)?;
            let delay = fsync_delay(scenario, opts);
            let before = now_ms();
            let s = cluster.delay_fsync(target, delay, life)?;
            // The delay applies from strace's attach; attaching -f to every
            // thread takes a moment, so give it until the next call returns.
            std::thread::sleep(Duration::from_millis(200));
            injected = Some(before);
            g.event_at(
                before,
                &format!(
                    "INJECT: strace delays every fdatasync/fsync of m{target} ({role}, pid {}) by {:?}",
                    cluster.pid(target).unwrap_or(0),
                    delay
                ),
            );
            strace = Some(s);
            members.push(format!("m{target}"));
            fault_text = format!(
                "fdatasync/fsync of m{target} ({role}) delayed by {} ms (strace inject delay_enter) from the injection to the end of the recording",
                delay.as_millis()
            );
            expect = degraded("disk");
        }
        "sigstop-leader" => {
            sleep_until(inject_at);
            let l = leader(&cluster, &mut g)?;
            let at = cluster.signal(l, "STOP")?;
            injected = Some(at);
            stopped.push(l);
            g.event_at(at, &format!("INJECT: SIGSTOP to m{l} (leader)"));
            members.push(format!("m{l}"));
            fault_text =
                format!("m{l} (leader) stopped with SIGSTOP from the injection to the end of the recording");
            expect = degraded("raft");
        }
        "sigkill-leader" => {
            sleep_until(inject_at);
            let l = leader(&cluster, &mut g)?;
            let at = cluster.kill(l)?;
            injected = Some(at);
            g.event_at(at, &format!("INJECT: SIGKILL to m{l} (leader)"));
            members.push(format!("m{l}"));
            sleep_until(fault_end);
            cluster.start_member(l, false)?;
            let at = g.event(&format!("CLEAR: m{l} restarted with its data"));
            cleared = Some(at);
            if cluster.wait_healthy(l, Duration::from_secs(30)) {
                g.event(&format!("m{l} healthy again"));
            } else {
                g.event(&format!("m{l} not healthy within 30 s of its restart"));
            }
            fault_text = format!(
                "m{l} (leader) killed with SIGKILL, restarted with its data {} s later",
                opts.fault.as_secs()
            );
            expect = degraded("raft");
        }
        "quorum-loss" => {
            sleep_until(inject_at);
            let l = leader(&cluster, &mut g)?;
            let f = (0..3).find(|&i| i != l).unwrap_or(0);
            let at = cluster.signal(l, "STOP")?;
            cluster.signal(f, "STOP")?;
            stopped.extend([l, f]);
            injected = Some(at);
            g.event_at(
                at,
                &format!("INJECT: SIGSTOP to m{l} (leader) and m{f}: no quorum"),
            );
            let mut ms = vec![format!("m{l}"), format!("m{f}")];
            ms.sort();
            members = ms;
            sleep_until(fault_end);
            cluster.signal(l, "CONT")?;
            cluster.signal(f, "CONT")?;
            stopped.clear();
            cleared = Some(g.event(&format!("CLEAR: SIGCONT to m{l} and m{f}")));
            match cluster.wait_leader(Duration::from_secs(30)) {
                Some(n) => g.event(&format!("leader again: m{n}")),
                None => g.event("no leader within 30 s of the resume"),
            };
            fault_text = format!(
                "m{l} (leader) and m{f} stopped with SIGSTOP (quorum lost) for {} s, then resumed",
                opts.fault.as_secs()
            );
            expect = degraded("raft");
        }
        "nospace" => {
            sleep_until(inject_at);
            let at = g.event(&format!(
                "INJECT: filling the backend (quota {} MiB) with 256 KiB values",
                opts.quota_bytes >> 20
            ));
            injected = Some(at);
            match load::fill_until_nospace(&urls, 256 << 10, (opts.quota_bytes as usize) * 4)? {
                Some(t) => g.event_at(
                    t,
                    &format!("first NOSPACE answer after {:.1} s", (t - at) as f64 / 1000.0),
                ),
                None => {
                    g.event("no NOSPACE answer after writing 4× the quota");
                }
            }
            fault_text = format!(
                "backend quota of {} MiB filled with large values at the injection: NOSPACE alarm to the end",
                opts.quota_bytes >> 20
            );
            expect = degraded("quota");
        }
        "compaction-defrag" => {
            sleep_until(inject_at);
            let gw = Gateway::new(Duration::from_secs(60));
            let rev = gw.revision(&urls[0]).map_err(LabError::msg)?;
            let at = g.event(&format!("compaction at revision {rev} (physical)"));
            injected = Some(at);
            if let Err(e) = gw.compact(&urls[0], rev) {
                g.event(&format!("compaction failed: {e}"));
            } else {
                g.event("compaction done");
            }
            for (i, u) in urls.iter().enumerate() {
                g.event(&format!("defragment m{i}"));
                match gw.defragment(u) {
                    Ok(_) => g.event(&format!("defragment m{i} done")),
                    Err(e) => g.event(&format!("defragment m{i} failed: {e}")),
                };
            }
            fault_text =
                format!("not a fault: compaction of {rev} revisions and a defragment of every member");
            expect = healthy;
        }
        "cpu-starved-leader" | "cpu-starved-follower" => {
            sleep_until(inject_at);
            let (t, role) = target(&cluster, &mut g, scenario)?;
            let quota_us = (opts.cpu_quota_pct / 100.0 * crate::faults::CPU_PERIOD_US as f64).round() as u64;
            let at = now_ms();
            let file = cluster.cgroups.set_cpu_quota(t, Some(quota_us.max(1000)))?;
            injected = Some(at);
            g.event_at(at, &format!("INJECT: CPU quota of m{t} ({role}): {file}"));
            members.push(format!("m{t}"));
            sleep_until(fault_end);
            let file = cluster.cgroups.set_cpu_quota(t, None)?;
            cleared = Some(g.event(&format!("CLEAR: CPU quota of m{t} removed: {file}")));
            fault_text = format!(
                "m{t} ({role}) limited to {}% of one core ({quota_us} µs per {} µs, {}) for {} s, load unchanged",
                opts.cpu_quota_pct,
                crate::faults::CPU_PERIOD_US,
                cluster.cgroups.describe(),
                opts.fault.as_secs()
            );
            expect = degraded("cpu");
        }
        "cpu-neighbour-leader" => {
            sleep_until(inject_at);
            let (t, role) = target(&cluster, &mut g, scenario)?;
            let n = cores();
            let core = n - 1;
            let pid = cluster.pid(t).unwrap_or(0);
            let at = now_ms();
            crate::faults::pin(pid, &core.to_string())?;
            let spin = Neighbours::spinners(core, 4, opts.fault)?;
            injected = Some(at);
            g.event_at(
                at,
                &format!("INJECT: m{t} ({role}, pid {pid}) pinned to core {core} with 4 CPU-bound neighbours pinned there"),
            );
            members.push(format!("m{t}"));
            sleep_until(fault_end);
            drop(spin);
            crate::faults::pin(pid, &format!("0-{}", n - 1))?;
            cleared = Some(g.event(&format!(
                "CLEAR: neighbours ended, m{t} unpinned (cores 0-{})",
                n - 1
            )));
            fault_text = format!(
                "m{t} ({role}) pinned to core {core} shared with 4 always-spinning neighbours (taskset) for {} s",
                opts.fault.as_secs()
            );
            // The scheduler may give a sleeping etcd its share at once (on
            // the lab's kernel nothing slowed): healthy passes too, another
            // fault does not.
            expect = Expect {
                healthy_accepted: true,
                ..degraded("cpu")
            };
        }
        "partition-leader" | "partition-follower" | "peer-loss-follower" => {
            sleep_until(inject_at);
            let (t, role) = target(&cluster, &mut g, scenario)?;
            let share = if scenario.starts_with("partition") {
                100
            } else {
                opts.loss_pct.clamp(1, 100)
            };
            let net = crate::faults::PeerNet {
                cgroups: &cluster.cgroups,
                member: t,
                peer_ports: cluster.peer_ports(),
            };
            let at = now_ms();
            let mut drops = net.drop_packets(share, life)?;
            injected = Some(at);
            g.event_at(
                at,
                &format!(
                    "INJECT: {share}% of the packets of every peer connection of m{t} ({role}) dropped; nftables:\n{}",
                    drops.rules
                ),
            );
            members.push(format!("m{t}"));
            sleep_until(fault_end);
            drops.remove()?;
            cleared = Some(g.event(&format!(
                "CLEAR: nftables table removed: m{t}'s peer traffic flows again"
            )));
            fault_text = if share >= 100 {
                format!(
                    "m{t} ({role}) cut off from its peers for {} s: every packet of every peer connection (its listener's and the ones it dialed) dropped with nftables",
                    opts.fault.as_secs()
                )
            } else {
                format!(
                    "{share}% of the packets of every peer connection of m{t} ({role}) dropped at random (nftables numgen) for {} s",
                    opts.fault.as_secs()
                )
            };
            expect = degraded("network");
        }
        "peer-latency-leader" | "peer-latency-follower" => {
            sleep_until(inject_at);
            let (t, role) = target(&cluster, &mut g, scenario)?;
            let (how, mut netem) = delay_peers(&cluster, t, opts.peer_delay, life)?;
            let at = now_ms();
            if let Some(p) = cluster.proxies.get(t) {
                p.set_delay(opts.peer_delay);
            }
            injected = Some(at);
            g.event_at(at, &format!("INJECT: m{t} ({role}): {how}"));
            members.push(format!("m{t}"));
            sleep_until(fault_end);
            if let Some(p) = cluster.proxies.get(t) {
                p.set_delay(Duration::ZERO);
            }
            if let Some(n) = netem.as_mut() {
                n.remove()?;
            }
            cleared = Some(g.event(&format!("CLEAR: m{t}'s peer traffic undelayed")));
            fault_text = format!("m{t} ({role}): {how}, for {} s", opts.fault.as_secs());
            // A follower's slow link delays its own acknowledgements and
            // the reads it forwards; with 3 members the leader commits with
            // the other follower, so nothing else may degrade: healthy
            // passes too, another fault does not. A leader's slows every commit.
            expect = Expect {
                healthy_accepted: role == "follower",
                ..degraded("network")
            };
        }
        "leader-flapping" => {
            sleep_until(inject_at);
            let mut frozen: Vec<usize> = Vec::new();
            let mut rounds = 0;
            while Instant::now() + Duration::from_secs(2) < fault_end && rounds < 100 {
                rounds += 1;
                let Some(l) = cluster.wait_leader(Duration::from_secs(4)) else {
                    g.event("no leader within 4 s");
                    continue;
                };
                let at = cluster.signal(l, "STOP")?;
                injected.get_or_insert(at);
                g.event_at(at, &format!("INJECT: SIGSTOP to m{l} (leader), 2 s"));
                std::thread::sleep(Duration::from_secs(2));
                cluster.signal(l, "CONT")?;
                g.event(&format!("SIGCONT to m{l}"));
                if !frozen.contains(&l) {
                    frozen.push(l);
                }
                sleep_until((Instant::now() + Duration::from_secs(4)).min(fault_end));
            }
            cleared = Some(g.event(&format!("CLEAR: flapping over after {rounds} freezes")));
            frozen.sort();
            members = frozen.iter().map(|i| format!("m{i}")).collect();
            fault_text = format!(
                "whoever led frozen (SIGSTOP) for 2 s, every ~6 s, {rounds} times in {} s (members frozen: {})",
                opts.fault.as_secs(),
                members.join(",")
            );
            expect = degraded("raft");
        }
        "defrag-leader" | "defrag-follower" => {
            sleep_until(inject_at);
            let (t, role) = target(&cluster, &mut g, scenario)?;
            let gw = Gateway::new(Duration::from_secs(120));
            let mut n = 0;
            while Instant::now() + Duration::from_secs(5) < fault_end && n < 10 {
                n += 1;
                let at = g.event(&format!("defragment m{t} ({role}), #{n}"));
                if n == 1 {
                    injected = Some(at);
                    members.push(format!("m{t}"));
                }
                let t0 = Instant::now();
                match gw.defragment(&urls[t]) {
                    Ok(_) => g.event(&format!("defragment m{t} done in {:.1?}", t0.elapsed())),
                    Err(e) => g.event(&format!("defragment m{t} failed after {:.1?}: {e}", t0.elapsed())),
                };
                sleep_until((t0 + Duration::from_secs(20)).min(fault_end));
            }
            cleared = Some(g.event("CLEAR: last defragment over"));
            fault_text = format!(
                "maintenance, not a resource fault: m{t} ({role}) defragmented {n} times (every 20 s) in {} s, its ~200 MB database half history",
                opts.fault.as_secs()
            );
            // A stall of seconds may degrade nothing a scrape sees: healthy
            // passes too, any other fault does not.
            expect = Expect {
                healthy_accepted: true,
                ..degraded("maintenance")
            };
        }
        "overload" => {
            sleep_until(inject_at);
            let at = g.event(
                "INJECT: write burst: 8 clients putting 64 KiB values over 1000 keys, at most 600 MiB",
            );
            injected = Some(at);
            let b = load::burst(&urls, 8, 64 << 10, 1000, fault_end, 600 << 20);
            cleared = Some(g.event(&format!(
                "CLEAR: burst over: {} puts ({} MiB), {} errors",
                b.puts,
                b.bytes >> 20,
                b.errors
            )));
            fault_text = format!(
                "overload, no faulty resource: 8 clients wrote {} values of 64 KiB ({} MiB) as fast as the cluster took them, for up to {} s",
                b.puts,
                b.bytes >> 20,
                opts.fault.as_secs()
            );
            expect = degraded("load");
        }
        other => return Err(LabError::msg(format!("unknown scenario `{other}`"))),
    }

    sleep_until(rec_end);
    let st = wait_child(&mut rec, Duration::from_secs(120));
    let rec_to = now_ms();
    g.event(&format!("recording ended ({st})"));
    load.stop();
    g.event(&format!("load: {}", load.counters.line()));
    if let Some(mut s) = strace.take() {
        s.stop();
    }
    for i in stopped {
        let _ = cluster.signal(i, "CONT");
    }
    drop(neighbours);
    drop(cluster);
    let _ = fs::remove_dir_all(&scratch);
    let truth = Truth {
        scenario: scenario.to_string(),
        etcd_version: bin.version.clone(),
        fault: fault_text,
        single_member: members.len() == 1 && scenario != "nospace" && scenario != "overload",
        members,
        injected_at_ms: injected,
        cleared_at_ms: cleared,
        recording_from_ms: rec_from,
        recording_to_ms: rec_to,
        interval_seconds: opts.interval.as_secs_f64(),
        conditions,
        expect,
        events: g.events,
        known_failure: None,
        known_failure_logs: None,
    };
    let text = serde_json::to_string_pretty(&truth).map_err(|e| LabError::msg(e.to_string()))?;
    fs::write(run_dir.join(TRUTH_FILE), text + "\n")?;
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
