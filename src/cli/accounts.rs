//! `vole user` and `vole token`: accounts and their tokens, through the
//! running server or in-process.

use std::process::ExitCode;

use anyhow::{Context, bail};

use super::args::{TokenCommand, UserCommand};
use super::control_client::call;
use vole_config::Config;
use vole_control::Request;

/// One line of standard input, without its line end: a password.
fn read_secret_line() -> anyhow::Result<String> {
    use std::io::{BufRead, Read};
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .take(vole_accounts::MAX_PASSWORD_BYTES as u64 + 2)
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    let password = line.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        bail!("no password on standard input");
    }
    Ok(password)
}

pub(super) fn user_command(config: &Config, command: UserCommand) -> anyhow::Result<ExitCode> {
    match command {
        UserCommand::Add {
            name,
            email,
            full_name,
            admin,
            password_stdin,
        } => {
            let password = password_stdin.then(read_secret_line).transpose()?;
            let user: serde_json::Value = call(
                config,
                Request::UserAdd {
                    name,
                    email,
                    full_name,
                    admin,
                    password,
                },
            )?;
            println!("added user {}", user["name"].as_str().unwrap_or_default());
        }
        UserCommand::List { json } => {
            let users: Vec<serde_json::Value> = call(config, Request::UserList)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&users)?);
            } else {
                for user in users {
                    let flags: Vec<&str> = [
                        ("admin", "admin"),
                        ("disabled", "disabled"),
                        ("has_password", "password"),
                    ]
                    .iter()
                    .filter(|(key, _)| user[*key].as_bool().unwrap_or_default())
                    .map(|(_, flag)| *flag)
                    .collect();
                    println!(
                        "{}\t{}\t{}",
                        user["name"].as_str().unwrap_or_default(),
                        user["email"].as_str().unwrap_or_default(),
                        flags.join(",")
                    );
                }
            }
        }
        UserCommand::Edit {
            name,
            full_name,
            email,
        } => {
            if full_name.is_none() && email.is_none() {
                bail!("nothing to change: give --full-name or --email");
            }
            let user: serde_json::Value = call(
                config,
                Request::UserEdit {
                    name,
                    full_name,
                    email,
                },
            )?;
            println!(
                "{}\t{}\t{}",
                user["name"].as_str().unwrap_or_default(),
                user["full_name"].as_str().unwrap_or_default(),
                user["email"].as_str().unwrap_or_default()
            );
        }
        UserCommand::Passwd { name, .. } => {
            let password = read_secret_line()?;
            let _: serde_json::Value = call(
                config,
                Request::UserPasswd {
                    name: name.clone(),
                    password,
                },
            )?;
            println!("password of {name} set");
        }
        UserCommand::Disable { name } => {
            let _: serde_json::Value = call(config, Request::UserDisable { name: name.clone() })?;
            println!("user {name} disabled");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn token_command(config: &Config, command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        TokenCommand::Create {
            name,
            user,
            scope,
            repos,
            expires,
        } => {
            let expires_in_secs = expires
                .map(|text| {
                    humantime::parse_duration(&text)
                        .map(|d| d.as_secs().max(1))
                        .with_context(|| format!("--expires {text:?}: write e.g. 30d, 12h"))
                })
                .transpose()?;
            let made: serde_json::Value = call(
                config,
                Request::TokenCreate {
                    name,
                    user,
                    scope: scope.into(),
                    repos,
                    expires_in_secs,
                },
            )?;
            let token = &made["token"];
            println!(
                "created token {} for {} (scope {}{}{}); it is shown once, here:",
                token["name"].as_str().unwrap_or_default(),
                token["user"].as_str().unwrap_or_default(),
                token["scope"].as_str().unwrap_or_default(),
                token["expires_at"]
                    .as_str()
                    .map(|at| format!(", expires {at}"))
                    .unwrap_or_default(),
                token["repos"]
                    .as_array()
                    .filter(|r| !r.is_empty())
                    .map(|r| format!(
                        ", only {}",
                        r.iter()
                            .filter_map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    ))
                    .unwrap_or_default(),
            );
            println!("{}", made["text"].as_str().unwrap_or_default());
        }
        TokenCommand::List { user, json } => {
            let tokens: Vec<serde_json::Value> = call(config, Request::TokenList { user })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tokens)?);
            } else {
                for t in tokens {
                    let text = |k: &str| t[k].as_str().unwrap_or_default().to_string();
                    let repos = t["repos"]
                        .as_array()
                        .map(|r| {
                            r.iter()
                                .filter_map(|v| v.as_str())
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default();
                    println!(
                        "{}\t{}\t{}\t{}\t{}\t{}",
                        text("name"),
                        text("user"),
                        text("scope"),
                        if repos.is_empty() { "*".into() } else { repos },
                        t["expires_at"].as_str().unwrap_or("never"),
                        if t["revoked"].as_bool().unwrap_or_default() {
                            "revoked"
                        } else {
                            "active"
                        },
                    );
                }
            }
        }
        TokenCommand::Revoke { name } => {
            let _: serde_json::Value = call(config, Request::TokenRevoke { name: name.clone() })?;
            println!("token {name} revoked");
        }
    }
    Ok(ExitCode::SUCCESS)
}
