//! Where samples come from. Every source produces time-stamped snapshots per
//! target (one apiserver replica, one etcd member, …) and feeds the series store.

pub mod expfmt;
