//! cptriage's integration tests, one binary: each module is one area (the
//! command line, sources, rules, reports, the live and Prometheus tests
//! against real etcd and Prometheus processes). One binary links once, which
//! keeps CI's build time and disk small; tests that start external processes
//! take [`support::heavy`] so that two of them never compete for the machine.
//! `tests/hostile_bodies.rs` stays a binary of its own: it measures its own
//! peak memory.
//!
//! Run one area with `cargo test --test it AREA::` (e.g. `first_page::`).

#[path = "../support/mod.rs"]
mod support;

#[path = "../common/scenarios.rs"]
mod scenarios;

#[path = "../common/values.rs"]
mod values;

#[path = "../promqltest/script.rs"]
mod promql_script;

mod advisories;
mod audit_source;
mod audit_verdicts;
mod bad_input;
mod cli_args;
mod cli_diagnose;
mod cli_query;
mod completions;
mod dump_source;
mod expfmt_quirks;
mod expfmt_realdata;
mod expfmt_stream;
mod first_page;
mod fleet_report;
mod fuzz_corpus;
mod html_report;
mod lab_recordings;
mod live_apiserver;
mod live_etcd;
mod live_filter;
mod live_rounds;
mod live_save;
mod live_scale;
mod logs_source;
mod node_metrics;
mod perf_guard;
mod profile_matrix;
mod prom_crosscheck;
mod prom_etcd;
mod prom_fleet;
mod prom_node;
mod prom_recorded;
mod prom_source;
mod prom_tls;
mod promqltest;
mod record_out;
mod report_snapshots;
mod rules_assess;
mod rules_check;
mod rules_default;
mod rules_engine;
mod rules_export;
mod rules_realdata;
mod rules_unittest;
mod scale_gen;
mod scenario_gen;
mod scenario_verdicts;
mod secrets;
mod serve_alertmanager;
mod serve_http;
mod stairs;
mod traps;
mod verdict_noise;
mod watch_tmux;
