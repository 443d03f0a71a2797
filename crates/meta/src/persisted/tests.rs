//! Tests of the persisted index: see `crates/meta/src/tests.rs`.
