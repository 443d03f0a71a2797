//! `vole repo`: create, delete, list and set up repositories, through the
//! running server or in-process.

use std::process::ExitCode;

use super::args::{RepoCommand, VisibilityArg};
use super::control_client::call;
use vole_config::Config;
use vole_control::Request;
use vole_git::repos::RepoInfo;

pub(super) fn repo_command(config: &Config, command: RepoCommand) -> anyhow::Result<ExitCode> {
    match command {
        RepoCommand::Create {
            name,
            description,
            private,
            owner,
        } => {
            let info: RepoInfo = call(
                config,
                Request::RepoCreate {
                    repo: name,
                    description,
                    private,
                    owner,
                },
            )?;
            println!("created {}", info.name);
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::Delete { name } => {
            let _: String = call(config, Request::RepoDelete { repo: name.clone() })?;
            println!("deleted {name} (moved to the data dir's trash/)");
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::Visibility { name, visibility } => {
            let private = visibility == VisibilityArg::Private;
            let _: serde_json::Value = call(
                config,
                Request::RepoVisibility {
                    repo: name.clone(),
                    private,
                },
            )?;
            println!("{name} is {}", if private { "private" } else { "public" });
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::DefaultBranch { name, branch } => {
            let setting = branch.is_some();
            let head: Option<String> = call(
                config,
                Request::RepoDefaultBranch {
                    repo: name.clone(),
                    branch,
                },
            )?;
            match head {
                Some(head) if setting => println!("{name}'s default branch is now {head}"),
                Some(head) => println!("{head}"),
                None => println!("{name}'s HEAD names no branch"),
            }
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::Gc { name } => {
            let report: serde_json::Value = call(config, Request::RepoGc { repo: name.clone() })?;
            println!(
                "{name}: unreachable objects pruned; objects {} -> {} bytes in {} ms",
                report["bytes_before"], report["bytes_after"], report["millis"]
            );
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::List { json } => {
            let repos: Vec<RepoInfo> = call(config, Request::RepoList)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&repos)?);
            } else {
                for repo in repos {
                    println!("{}\t{}", repo.name, repo.description);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
