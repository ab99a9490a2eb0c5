//! cptriage's real-fault lab: ground truth of a run and the judging of
//! cptriage's verdict against it. The `lab` command (feature `cli`) starts
//! real etcd clusters, injects faults, records them with `cptriage record`
//! and judges `cptriage diagnose`; the repository's regression test of the
//! committed recordings (tests/lab_recordings.rs) uses this library only.

pub mod interval;
pub mod judge;
pub mod truth;
