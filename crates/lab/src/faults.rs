//! Resource faults done to one member: its CPU (a cgroup CPU quota, or
//! CPU-bound neighbours pinned to its core) and its peer network (packets of
//! every peer connection it has dropped, all or a share, with nftables).
//!
//! Each member runs in its own cgroups, made when the cluster starts: a
//! cgroup v1 `cpu` group (`cpu.cfs_quota_us`) or a cgroup v2 group
//! (`cpu.max`) for the quota, and a cgroup v2 group that nftables matches
//! sockets by (`socket cgroupv2`), so the connections a member dials to its
//! peers are found whatever their ephemeral ports. A member's sockets get its
//! cgroup because it is moved there before `exec`.
//!
//! Every rule the lab adds lives in one nftables table of its own, deleted
//! exactly when the fault ends; a detached watchdog (`setsid timeout … nft
//! delete table`) deletes it too if the lab dies first.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::util::LabError;

/// Where the cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The period of the CPU quota (µs): the kernel default.
pub(crate) const CPU_PERIOD_US: u64 = 100_000;

static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// A name unique to this lab process and call (`cptriage-lab-<pid>-<n>`).
pub(crate) fn unique(what: &str) -> String {
    format!(
        "cptriage-lab-{what}-{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    )
}

/// How the host's cgroups are laid out.
#[derive(Clone, Debug)]
enum Layout {
    /// cgroup v1 `cpu` controller at `/sys/fs/cgroup/cpu`, and a cgroup v2
    /// hierarchy (for nftables) at `v2` when mounted (`unified`).
    Hybrid { v2: Option<PathBuf> },
    /// cgroup v2 only, at `/sys/fs/cgroup` (with the `cpu` controller when
    /// the parent delegates it).
    Unified,
}

fn layout() -> Option<Layout> {
    let root = Path::new(CGROUP_ROOT);
    if root.join("cgroup.controllers").exists() {
        return Some(Layout::Unified);
    }
    if root.join("cpu").join("cpu.cfs_quota_us").exists() {
        let v2 = root.join("unified");
        return Some(Layout::Hybrid {
            v2: v2.join("cgroup.procs").exists().then_some(v2),
        });
    }
    None
}

/// The cgroups of one cluster's members: `<group>/m<i>` in each hierarchy.
#[derive(Debug)]
pub(crate) struct Cgroups {
    /// The directory holding the quota files of each member (`…/m<i>`).
    cpu: Option<PathBuf>,
    v1: bool,
    /// The cgroup v2 group directory (sockets are matched by it).
    v2: Option<PathBuf>,
    /// `v2` relative to /sys/fs/cgroup, as nftables names it.
    v2_rel: Option<String>,
    members: usize,
}

impl Cgroups {
    /// Makes a group per member; none where the host has no writable
    /// cgroups (the CPU and network faults then cannot run, and say so).
    pub(crate) fn make(members: usize) -> Cgroups {
        let name = unique("cluster");
        let mut cg = Cgroups {
            cpu: None,
            v1: false,
            v2: None,
            v2_rel: None,
            members,
        };
        let mk = |dir: &Path| -> bool {
            (0..members).all(|i| fs::create_dir_all(dir.join(format!("m{i}"))).is_ok())
        };
        match layout() {
            Some(Layout::Hybrid { v2 }) => {
                let d = Path::new(CGROUP_ROOT).join("cpu").join(&name);
                if mk(&d) {
                    cg.cpu = Some(d);
                    cg.v1 = true;
                }
                if let Some(v2) = v2 {
                    let d = v2.join(&name);
                    if mk(&d) {
                        cg.v2_rel = Some(format!("unified/{name}"));
                        cg.v2 = Some(d);
                    }
                }
            }
            Some(Layout::Unified) => {
                let root = Path::new(CGROUP_ROOT);
                let _ = fs::write(root.join("cgroup.subtree_control"), "+cpu");
                let d = root.join(&name);
                if fs::create_dir_all(&d).is_ok() {
                    let _ = fs::write(d.join("cgroup.subtree_control"), "+cpu");
                    if mk(&d) {
                        if d.join("m0").join("cpu.max").exists() {
                            cg.cpu = Some(d.clone());
                        }
                        cg.v2_rel = Some(name.clone());
                        cg.v2 = Some(d);
                    }
                }
            }
            None => {}
        }
        cg
    }

    /// The `cgroup.procs` files member `i` is moved into before it runs.
    pub(crate) fn procs_files(&self, i: usize) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if self.v1 {
            if let Some(c) = &self.cpu {
                out.push(c.join(format!("m{i}")).join("cgroup.procs"));
            }
        }
        if let Some(v2) = &self.v2 {
            out.push(v2.join(format!("m{i}")).join("cgroup.procs"));
        }
        out
    }

    /// What the groups are, for the log and the ground truth.
    pub(crate) fn describe(&self) -> String {
        let cpu = match (&self.cpu, self.v1) {
            (Some(c), true) => format!("cgroup v1 cpu {}", c.display()),
            (Some(c), false) => format!("cgroup v2 cpu.max {}", c.display()),
            (None, _) => "no CPU cgroup".into(),
        };
        let v2 = self
            .v2
            .as_ref()
            .map(|d| format!("cgroup v2 {}", d.display()))
            .unwrap_or_else(|| "no cgroup v2".into());
        format!("{cpu}; {v2}")
    }

    /// Limits member `i` to `quota_us` of CPU time per 100 ms period (`None`
    /// removes the limit). Returns the file written, for the log.
    pub(crate) fn set_cpu_quota(&self, i: usize, quota_us: Option<u64>) -> Result<String, LabError> {
        let dir = self
            .cpu
            .as_ref()
            .ok_or_else(|| LabError::msg("no writable CPU cgroup on this host: cannot limit a member's CPU"))?
            .join(format!("m{i}"));
        let (file, text) = if self.v1 {
            let _ = fs::write(dir.join("cpu.cfs_period_us"), CPU_PERIOD_US.to_string());
            (
                dir.join("cpu.cfs_quota_us"),
                quota_us.map(|q| q.to_string()).unwrap_or_else(|| "-1".into()),
            )
        } else {
            (
                dir.join("cpu.max"),
                match quota_us {
                    Some(q) => format!("{q} {CPU_PERIOD_US}"),
                    None => format!("max {CPU_PERIOD_US}"),
                },
            )
        };
        fs::write(&file, &text).map_err(|e| LabError::msg(format!("`{}`: {e}", file.display())))?;
        Ok(format!("{} = {text}", file.display()))
    }

    /// Member `i`'s cgroup v2 path as nftables' `socket cgroupv2` names it,
    /// and its level.
    fn socket_group(&self, i: usize) -> Option<(String, u32)> {
        let rel = self.v2_rel.as_ref()?;
        // `<group>/m<i>` sits two levels below the cgroup v2 root, wherever
        // that root is mounted.
        Some((format!("{rel}/m{i}"), 2))
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        // The members are gone (the cluster kills them first); a group is
        // removable once its last task has exited, a moment later.
        for dir in [self.cpu.take(), self.v2.take()].into_iter().flatten() {
            let deadline = Instant::now() + Duration::from_secs(3);
            loop {
                let members_gone = (0..self.members).all(|i| {
                    let d = dir.join(format!("m{i}"));
                    !d.exists() || fs::remove_dir(&d).is_ok()
                });
                if (members_gone && fs::remove_dir(&dir).is_ok()) || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The peer ports of a cluster and the member cut off.
pub(crate) struct PeerNet<'a> {
    pub cgroups: &'a Cgroups,
    pub member: usize,
    /// Every member's peer port, by index.
    pub peer_ports: Vec<u16>,
}

/// A detached process that undoes a fault (`undo`, a shell command) after
/// `life` if the lab dies before it does; the lab itself undoes the fault
/// and disarms it (kills it), also when the guard is dropped.
pub(crate) struct Watchdog(Option<std::process::Child>);

impl Watchdog {
    /// Starts `sleep life; undo` in its own session (so a signal to the lab
    /// does not reach it), bounded by `timeout`. Without `setsid` there is
    /// no watchdog: the fault is still undone by the lab.
    pub(crate) fn spawn(life: Duration, undo: &str) -> Watchdog {
        let secs = life.as_secs().max(1);
        let child = Command::new("setsid")
            .args(["timeout", &(secs + 10).to_string(), "sh", "-c"])
            .arg(format!("sleep {secs}; {undo}; true"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Watchdog(child)
    }

    /// Stops the watchdog: `timeout` passes TERM on to its shell, so nothing
    /// of it is left.
    pub(crate) fn disarm(&mut self) {
        if let Some(mut w) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &w.id().to_string()])
                .stderr(Stdio::null())
                .status();
            let _ = w.wait();
        }
    }

    /// No watchdog (the fault is not in place yet).
    pub(crate) fn none() -> Watchdog {
        Watchdog(None)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// An nftables table dropping a member's peer packets; deleted on drop.
pub(crate) struct Drops {
    table: String,
    pub rules: String,
    watchdog: Watchdog,
}

fn nft(script: &str) -> Result<(), LabError> {
    use std::io::Write;
    let mut child = Command::new("timeout")
        .args(["10", "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::msg(format!("nft: cannot run ({e}); install Debian's nftables")))?;
    child
        .stdin
        .take()
        .ok_or_else(|| LabError::msg("nft: no stdin"))?
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::msg(format!(
            "nft failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl PeerNet<'_> {
    /// The nftables rules that drop `share_pct` % (100: all) of the packets
    /// of every peer connection member `member` has: to and from its peer
    /// listener (whoever dialed), and on the connections it dialed to its
    /// peers (matched by its cgroup: outgoing by the sending socket, incoming
    /// by the receiving one).
    pub(crate) fn rules(&self, table: &str, share_pct: u32) -> Result<String, LabError> {
        let (group, level) = self.cgroups.socket_group(self.member).ok_or_else(|| {
            LabError::msg("no cgroup v2 hierarchy on this host: cannot find the connections a member dials")
        })?;
        let own = self.peer_ports[self.member];
        let others: Vec<String> = self
            .peer_ports
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.member)
            .map(|(_, p)| p.to_string())
            .collect();
        let others = others.join(", ");
        let verdict = if share_pct >= 100 {
            "drop".to_string()
        } else {
            format!("numgen random mod 100 < {share_pct} drop")
        };
        let sock = format!("socket cgroupv2 level {level} \"{group}\"");
        Ok(format!(
            "table inet {table} {{\n\
             \tchain out {{\n\t\ttype filter hook output priority -10; policy accept;\n\
             \t\ttcp dport {own} {verdict}\n\
             \t\ttcp sport {own} {verdict}\n\
             \t\t{sock} tcp dport {{ {others} }} {verdict}\n\t}}\n\
             \tchain in {{\n\t\ttype filter hook input priority -10; policy accept;\n\
             \t\t{sock} tcp sport {{ {others} }} {verdict}\n\t}}\n}}\n"
        ))
    }

    /// Adds the rules (see [`PeerNet::rules`]) until the guard is dropped,
    /// or `life` has passed if the lab dies first.
    pub(crate) fn drop_packets(&self, share_pct: u32, life: Duration) -> Result<Drops, LabError> {
        let table = unique("net").replace('-', "_");
        let rules = self.rules(&table, share_pct)?;
        nft(&rules)?;
        let watchdog = Watchdog::spawn(life, &format!("nft delete table inet {table} 2>/dev/null"));
        Ok(Drops {
            table,
            rules,
            watchdog,
        })
    }
}

impl Drops {
    /// Deletes the table (all its rules at once).
    pub(crate) fn remove(&mut self) -> Result<(), LabError> {
        if self.table.is_empty() {
            return Ok(());
        }
        let res = nft(&format!("delete table inet {}\n", self.table));
        self.table.clear();
        self.watchdog.disarm();
        res
    }
}

impl Drop for Drops {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// Pins every thread of `pid` to `cpus` (`taskset -a -p -c`).
pub(crate) fn pin(pid: u32, cpus: &str) -> Result<(), LabError> {
    let st = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if st.success() {
        Ok(())
    } else {
        Err(LabError::msg(format!(
            "taskset -a -p -c {cpus} {pid} failed ({st})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_rules_cover_both_directions_of_every_peer_connection() {
        let cg = Cgroups {
            cpu: None,
            v1: true,
            v2: None,
            v2_rel: Some("unified/cptriage-lab-cluster-1-0".into()),
            members: 3,
        };
        let net = PeerNet {
            cgroups: &cg,
            member: 1,
            peer_ports: vec![2380, 2381, 2382],
        };
        let r = net.rules("t", 100).unwrap();
        assert!(r.contains("tcp dport 2381 drop"), "{r}");
        assert!(r.contains("tcp sport 2381 drop"), "{r}");
        assert!(r.contains(
            "socket cgroupv2 level 2 \"unified/cptriage-lab-cluster-1-0/m1\" tcp dport { 2380, 2382 } drop"
        ));
        assert!(r.contains("hook input"), "{r}");
        assert!(r.contains(
            "socket cgroupv2 level 2 \"unified/cptriage-lab-cluster-1-0/m1\" tcp sport { 2380, 2382 } drop"
        ));
        let loss = net.rules("t", 30).unwrap();
        assert_eq!(
            loss.matches("numgen random mod 100 < 30 drop").count(),
            4,
            "{loss}"
        );
        let none = Cgroups {
            cpu: None,
            v1: false,
            v2: None,
            v2_rel: None,
            members: 3,
        };
        let net = PeerNet {
            cgroups: &none,
            member: 0,
            peer_ports: vec![1, 2, 3],
        };
        assert!(net.rules("t", 100).is_err());
    }
}
