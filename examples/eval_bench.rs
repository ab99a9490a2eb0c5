//! Evaluator throughput on an apiserver-sized histogram.
//!
//! Run: `cargo run --release --example eval_bench [QUERY…]`
//!
//! Builds 50 000 bucket series (25 verbs × 50 resources × 40 `le`), 360 points
//! each at 30 s, and times range queries of 300 steps over them. Wall times
//! include waiting for the CPU on a shared machine; compare with
//! `/usr/bin/time -v` user time.

use std::time::Instant;

use cptriage::eval::{self, EvalOptions};
use cptriage::store::Store;

fn main() {
    let mut st = Store::new();
    let t0 = Instant::now();
    for v in 0..25 {
        for r in 0..50 {
            for b in 0..40 {
                let le = if b == 39 {
                    "+Inf".to_string()
                } else {
                    format!("{}", 0.005 * 1.5f64.powi(b))
                };
                let l = st.labels([
                    (
                        "__name__",
                        "apiserver_request_duration_seconds_bucket".to_string(),
                    ),
                    ("verb", format!("VERB{v}")),
                    ("resource", format!("res{r}")),
                    ("le", le),
                ]);
                let id = st.series_id(&l);
                for i in 0..360i64 {
                    st.push_id(id, i * 30_000, (i * (b as i64 + 1)) as f64);
                }
            }
        }
    }
    st.finish();
    println!(
        "store: {} series, {} points, built in {:?}",
        st.series().len(),
        st.point_count(),
        t0.elapsed()
    );
    let args: Vec<String> = std::env::args().skip(1).collect();
    let default_queries = [
        "histogram_quantile(0.99, sum by (le, verb) (rate(apiserver_request_duration_seconds_bucket[5m])))",
        "sum by (verb) (rate(apiserver_request_duration_seconds_bucket{le=\"+Inf\"}[5m]))",
        "sum(rate(apiserver_request_duration_seconds_bucket[5m])) > 0",
        "count(apiserver_request_duration_seconds_bucket)",
        "count(count_over_time(apiserver_request_duration_seconds_bucket[5m]))",
    ];
    let queries: Vec<&str> = if args.is_empty() {
        default_queries.to_vec()
    } else {
        args.iter().map(|s| s.as_str()).collect()
    };
    let opts = EvalOptions::default();
    for q in queries {
        let e = eval::parse(q).expect("query parses");
        let t = Instant::now();
        let r = eval::range(&st, &e, 1_800_000, 1_800_000 + 299 * 30_000, 30_000, &opts)
            .expect("query evaluates");
        println!("{:?} for 300 steps, {} output series: {q}", t.elapsed(), r.len());
    }
}
