//! A real Prometheus for the tests: see [`cptriage_testkit::promrun`].

#[allow(unused_imports)]
pub(crate) use cptriage_testkit::promrun::*;
