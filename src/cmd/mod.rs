//! One thin handler per subcommand, wiring source → store → eval → report.
