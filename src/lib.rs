//! vole: a self-hosted git forge that lives in your git repository.
//!
//! One server process owns one data directory. The modules below are laid out
//! the way the system is: the CLI and config on top, the shared [`app::App`]
//! that both the HTTP server and the local control socket call into, and the
//! storage pieces underneath (repos on disk, the group-committed log).
//!
//! `ARCHITECTURE.md` at the repository root has the code map and invariants.

pub mod access;
pub mod accounts;
pub mod api;
pub mod app;
pub mod byte_lru;
pub mod cli;
pub mod config;
pub mod control;
pub mod datadir;
pub mod durable;
pub mod error_chain;
pub mod git;
pub mod hooks;
pub mod http;
pub mod incarnation;
pub mod log;
pub mod meta;
pub mod metrics;
pub mod page;
pub mod repos;
pub mod server;
pub mod sites;
pub mod time;
pub mod transport;
pub mod tree_path;
pub mod web;
