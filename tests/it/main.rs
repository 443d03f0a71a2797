//! vole's integration tests: one test binary, each test against a real
//! `vole` process on 127.0.0.1 with a temporary data dir (see [`support`]).

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

mod abuse;
mod access;
mod accounts;
mod acl_place;
mod backup;
mod browsing;
mod check;
mod cli_threads;
mod default_branch;
mod docker;
mod durability;
mod gc;
mod gitea_api;
mod hooks;
mod incarnation;
mod last_commit_index;
mod layering;
mod log_dump;
mod logging;
mod merges;
mod meta;
mod meta_startup;
mod metrics;
mod pack_cache;
mod pagination;
mod quotas;
mod repo_access;
mod router;
mod sign_in;
mod sites;
mod sizes;
mod skeleton;
mod slow_readers;
mod support;
mod threads_api;
mod transport;
mod trust;
mod web;
mod web_admin;
mod web_issues;
mod web_pulls;
mod webhook_deliveries;
mod webhook_faults;
mod webhooks;
