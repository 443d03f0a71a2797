//! vole: a self-hosted git forge that lives in your git repository.
//!
//! One server process owns one data directory. This crate is the top of
//! the crate graph: the CLI (`cli`), the assembly of every service's state
//! over the stores (`app`) and the server that routes to them (`server`).
//! The layers below are the crates under `crates/`.
//!
//! `ARCHITECTURE.md` at the repository root has the crate graph, the code
//! map and the invariants.

pub mod app;
pub mod cli;
pub mod server;
