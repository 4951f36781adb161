//! Runtime filters on distributed plans, in one test binary (each test
//! binary links all of DataFusion: fewer binaries, a faster build): the
//! decision table and regressions (`rules`), seeded random joins (`random`),
//! the star join (`semijoin`), filters in the Parquet scan (`scans`),
//! TPC-H (`tpch`) and TPC-DS (`tpcds`), each
//! against single-node DataFusion.

#[path = "../common/mod.rs"]
mod common;

mod plans;
mod processes;
mod random;
mod rules;
#[cfg(feature = "test-hooks")]
mod scans;
mod semijoin;
mod tpcds;
mod tpch;
#[cfg(feature = "test-hooks")]
mod waits;

/// Without the `test-hooks` feature the fault-injection tests are not
/// built: the test list says so rather than pass them silently.
#[cfg(not(feature = "test-hooks"))]
mod waits {
    #[test]
    #[ignore = "the waits:: tests inject faults: run them with `--features test-hooks`"]
    fn need_the_test_hooks_feature() {}
}

#[cfg(not(feature = "test-hooks"))]
mod scans {
    #[test]
    #[ignore = "the scans:: tests use a test seam: run them with `--features test-hooks`"]
    fn need_the_test_hooks_feature() {}
}
