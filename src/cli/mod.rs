//! The command line: clap definitions and what each subcommand does.
//!
//! Commands that change state go to the running server over the control
//! socket when one is up, and otherwise take the data dir lock and do the
//! work in-process through the same [`vole_control::dispatch`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod hook;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::app::App;
use vole_accounts::audit::AuditEvent;
use vole_config::{Config, Settings};
use vole_control::{Reply, Request, client::Client};
use vole_git::Git;
use vole_git::datadir::{DataDir, DataDirError};
use vole_git::repos::RepoInfo;
use vole_hooks::RefMove;
use vole_log::{Entry, RecordKind, Tail};
use vole_meta::MetaWrite;

#[derive(Debug, Parser)]
#[command(
    name = "vole",
    version,
    about = "A self-hosted git forge that lives in your git repository"
)]
pub struct Cli {
    /// Data directory: repositories, the log, the control socket [default: ./data].
    #[arg(long, global = true, env = "VOLE_DATA", value_name = "DIR")]
    pub data: Option<PathBuf>,

    /// git binary to run [default: the first `git` on PATH].
    #[arg(long, global = true, env = "VOLE_GIT", value_name = "PATH")]
    pub git: Option<PathBuf>,

    /// Config file (TOML, keys as the long flags) [default: ./vole.toml if present].
    #[arg(long, global = true, env = "VOLE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Log lines for people (`text`) or one JSON object a line (`json`);
    /// which lines, by a `RUST_LOG`-style filter in VOLE_LOG (or RUST_LOG),
    /// e.g. `info,vole::transport=debug` [default: text].
    #[arg(long, global = true, env = "VOLE_LOG_FORMAT", value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server.
    Serve(Box<ServeArgs>),
    /// Manage repositories.
    #[command(subcommand)]
    Repo(RepoCommand),
    /// Manage user accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage access tokens (for git over HTTP and the API).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Read the ref, metadata and audit logs.
    #[command(subcommand)]
    Log(LogCommand),
    /// Copy the whole data dir into DEST (a new or empty directory),
    /// consistently, while the server runs and takes writes; a manifest
    /// lists every file with its SHA-256.
    Backup {
        /// Where the copy goes.
        dest: PathBuf,
    },
    /// Restore a backup into the data dir, which must be empty (or not
    /// exist); every file is checked against the backup's manifest.
    Restore {
        /// The backup's directory.
        src: PathBuf,
    },
    /// Check the data dir (read only, safe beside a running server): git
    /// fsck of every repo, every log frame, the metadata shard refs against
    /// the meta log, every ref against its last move in the ref log. Prints
    /// each problem on a line; exits 1 if there is any.
    Check,
    /// Run by git as a hook under vole serve (see `data/hooks/`).
    #[command(subcommand)]
    Hook(HookCommand),
    /// Internal: kills the git processes a dead server left behind.
    #[command(hide = true)]
    Sentinel { mark: String },
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// git's pre-receive hook: may this push move these refs?
    PreReceive,
    /// git's reference-transaction hook: record the moves durably.
    ReferenceTransaction {
        /// prepared, committed or aborted
        state: String,
    },
    /// `uploadpack.packObjectsHook`: a pack from the server's pack cache
    /// (or from pack-objects itself when the cache cannot serve it).
    PackObjects {
        /// The command git would have run: `git pack-objects ARGS...`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Print every logged transaction, one line per row (safe while the
    /// server runs: it only reads).
    Dump {
        /// Keep printing new records as they are appended.
        #[arg(long)]
        follow: bool,
        /// JSON Lines instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite the logs: the ref log as a checkpoint of every ref's value
    /// then the most recent transactions; the meta log without the writes
    /// already folded into git (except the most recent).
    Compact {
        /// Transactions kept in each log (after the ref log's checkpoint).
        #[arg(long, default_value_t = 1000)]
        keep: u64,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub settings: Settings,
}

#[derive(Debug, Subcommand)]
pub enum RepoCommand {
    /// Create a bare repository `owner/name`.
    Create {
        /// `owner/name`: letters, digits, '.', '_', '-'.
        name: String,
        /// One line describing the repository.
        #[arg(long)]
        description: Option<String>,
        /// Only its owner, its members and server admins may see it.
        #[arg(long)]
        private: bool,
        /// The user who owns it (its admin) [default: the user named like
        /// the owner part of its name].
        #[arg(long, value_name = "USER")]
        owner: Option<String>,
    },
    /// Delete a repository: it moves to the data dir's trash/, where an
    /// operator can move it back.
    Delete {
        /// `owner/name`.
        name: String,
    },
    /// Make a repository public or private (its owner and members stay).
    Visibility {
        /// `owner/name`.
        name: String,
        #[arg(value_enum)]
        visibility: VisibilityArg,
    },
    /// Show a repository's default branch (the branch HEAD names, which
    /// a clone checks out), or set it to a branch that exists.
    DefaultBranch {
        /// `owner/name`.
        name: String,
        /// The branch to make the default (without `refs/heads/`).
        branch: Option<String>,
    },
    /// Prune a repository's unreachable objects now (what a force push
    /// or a deleted branch left, still served by full id until then):
    /// `git gc --prune=now`, with the repository's pushes and the metadata
    /// folds held meanwhile; recorded in the ref log and the audit log.
    Gc {
        /// `owner/name`.
        name: String,
    },
    /// List repositories.
    List {
        /// Print JSON instead of one line per repository.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user.
    Add {
        /// Login name: letters, digits, '-', '_', '.'; unique regardless
        /// of case.
        name: String,
        #[arg(long, value_name = "ADDR")]
        email: String,
        /// A server administrator: may do everything.
        #[arg(long)]
        admin: bool,
        /// Read a password from standard input (one line); without it the
        /// user signs in with tokens only.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List users.
    List {
        /// Print JSON instead of one line per user.
        #[arg(long)]
        json: bool,
    },
    /// Set a user's password, read from standard input (one line).
    Passwd {
        name: String,
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Disable a user: every credential of theirs is refused from the
    /// next request on.
    Disable { name: String },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it (once: it is not stored) on the last
    /// line of the output.
    Create {
        /// A name for the token, unique on the server (what `revoke` takes).
        name: String,
        #[arg(long, value_name = "USER")]
        user: String,
        /// What it may do: read (clone, API reads), write (also push and
        /// API writes), admin (also repo settings, ACLs, deletion).
        #[arg(long, value_enum, default_value = "read")]
        scope: ScopeArg,
        /// Limit it to this repo (`owner/name`), as it is now: a repo
        /// created under the name later (after a delete) is another repo
        /// the token does not reach, and a name no repo has reaches none;
        /// repeat for more.
        #[arg(long = "repo", value_name = "OWNER/NAME")]
        repos: Vec<String>,
        /// Expire it after this long, e.g. 30d, 12h [default: never].
        #[arg(long, value_name = "DURATION")]
        expires: Option<String>,
    },
    /// List tokens (never their secrets).
    List {
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// Print JSON instead of one line per token.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: refused from the next request on.
    Revoke { name: String },
}

/// `vole repo visibility`'s argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VisibilityArg {
    Public,
    Private,
}

/// `--scope`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ScopeArg {
    Read,
    Write,
    Admin,
}

impl From<ScopeArg> for vole_meta::entity::Scope {
    fn from(scope: ScopeArg) -> Self {
        use vole_meta::entity::Scope;
        match scope {
            ScopeArg::Read => Scope::Read,
            ScopeArg::Write => Scope::Write,
            ScopeArg::Admin => Scope::Admin,
        }
    }
}

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

/// Settings from the environment alone, for commands without serve's flags.
#[derive(Debug, Parser)]
struct EnvOnly {
    #[command(flatten)]
    settings: Settings,
}

/// Entry point of the binary: one line on error, never a backtrace.
pub fn main() -> ExitCode {
    // Run by git as `uploadpack.packObjectsHook` through its link
    // (`hooks::scripts::PACK_OBJECTS_LINK`): `git [OPTIONS] pack-objects ...`.
    let mut args = std::env::args_os();
    if args
        .next()
        .as_deref()
        .and_then(|argv0| std::path::Path::new(argv0).file_name())
        .is_some_and(|name| name == vole_hooks::scripts::PACK_OBJECTS_LINK)
    {
        let command: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return hook::pack_objects(&command);
    }
    let cli = Cli::parse();
    if let Command::Sentinel { mark } = &cli.command {
        return vole_transport::sentinel::run(mark);
    }
    // Hooks run inside git, under the server: no config, no tracing set-up.
    if let Command::Hook(hook) = &cli.command {
        return match hook {
            HookCommand::PreReceive => hook::pre_receive(),
            HookCommand::ReferenceTransaction { state } => hook::reference_transaction(state),
            HookCommand::PackObjects { command } => hook::pack_objects(command),
        };
    }
    let log_writer = init_tracing(cli.log_format.unwrap_or(LogFormat::Text));
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Log lines first, then the error, in the order they happened.
            drop(log_writer);
            eprintln!("vole: error: {}", vole_stdx::error_chain::Chain(e.as_ref()));
            return ExitCode::FAILURE;
        }
    };
    // Flushes every queued log line before the process exits.
    drop(log_writer);
    code
}

/// Log lines are formatted where they happen and written to stderr by one
/// background thread (one `write` per batch instead of one per line on the
/// request path). It is not lossy: a full queue makes the logger wait.
/// Dropping the guard flushes.
fn init_tracing(format: LogFormat) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VOLE_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("vole-log")
        .finish(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        // A request's lines carry its span (`request{id=...}`) either way.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
    guard
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut settings = match &cli.command {
        Command::Serve(args) => args.settings.clone(),
        _ => EnvOnly::try_parse_from(["vole"])
            .map(|e| e.settings)
            .context("reading VOLE_* settings")?,
    };
    settings.data = cli.data.clone();
    settings.git = cli.git.clone();
    let config = Config::resolve(settings, cli.config.as_deref())?;

    match cli.command {
        Command::Serve(_) => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(crate::server::run(config))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Repo(RepoCommand::Create {
            name,
            description,
            private,
            owner,
        }) => {
            let info: RepoInfo = call(
                &config,
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
        Command::Repo(RepoCommand::Delete { name }) => {
            let _: String = call(&config, Request::RepoDelete { repo: name.clone() })?;
            println!("deleted {name} (moved to the data dir's trash/)");
            Ok(ExitCode::SUCCESS)
        }
        Command::Repo(RepoCommand::Visibility { name, visibility }) => {
            let private = visibility == VisibilityArg::Private;
            let _: serde_json::Value = call(
                &config,
                Request::RepoVisibility {
                    repo: name.clone(),
                    private,
                },
            )?;
            println!("{name} is {}", if private { "private" } else { "public" });
            Ok(ExitCode::SUCCESS)
        }
        Command::Repo(RepoCommand::DefaultBranch { name, branch }) => {
            let setting = branch.is_some();
            let head: Option<String> = call(
                &config,
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
        Command::Repo(RepoCommand::Gc { name }) => {
            let report: serde_json::Value = call(&config, Request::RepoGc { repo: name.clone() })?;
            println!(
                "{name}: unreachable objects pruned; objects {} -> {} bytes in {} ms",
                report["bytes_before"], report["bytes_after"], report["millis"]
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::User(command) => user_command(&config, command),
        Command::Token(command) => token_command(&config, command),
        Command::Sentinel { .. } | Command::Hook(_) => {
            unreachable!("handled in main before any set-up")
        }
        Command::Log(LogCommand::Compact { keep }) => {
            let report: serde_json::Value = call(&config, Request::LogCompact { keep })?;
            println!(
                "ref log compacted: {} -> {} bytes, first kept sequence {}",
                report["bytes_before"], report["bytes_after"], report["base_seq"]
            );
            let meta = &report["meta"];
            println!(
                "meta log compacted: {} -> {} bytes, first kept sequence {} (records not yet folded into git are kept)",
                meta["bytes_before"], meta["bytes_after"], meta["base_seq"]
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Backup { dest } => backup(&config, &dest),
        Command::Restore { src } => {
            let data = DataDir::new(config.data_dir.clone());
            let mut bar = Progress::new("restoring");
            let manifest = vole_control::backup::restore(&src, &data, &mut |done, total| {
                bar.set(done, total)
            })?;
            bar.finish();
            println!(
                "restored {} files ({} repos) into {}; start the server on it, and `vole check` it",
                manifest.files.len(),
                manifest.repos.len(),
                data.root().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let git = Git::locate(config.git.as_deref())?;
            let report = vole_control::check::check(&DataDir::new(config.data_dir.clone()), &git);
            for problem in &report.problems {
                println!("{problem}");
            }
            for note in &report.notes {
                println!("note: {note}");
            }
            println!(
                "checked {} repos and {} log frames: {}",
                report.repos,
                report.log_frames,
                match report.problems.len() {
                    0 => "no problems".to_string(),
                    1 => "1 problem".to_string(),
                    n => format!("{n} problems"),
                }
            );
            Ok(if report.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Log(LogCommand::Dump { follow, json }) => {
            dump_logs(&config, follow, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Repo(RepoCommand::List { json }) => {
            let repos: Vec<RepoInfo> = call(&config, Request::RepoList)?;
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

fn user_command(config: &Config, command: UserCommand) -> anyhow::Result<ExitCode> {
    match command {
        UserCommand::Add {
            name,
            email,
            admin,
            password_stdin,
        } => {
            let password = password_stdin.then(read_secret_line).transpose()?;
            let user: serde_json::Value = call(
                config,
                Request::UserAdd {
                    name,
                    email,
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

fn token_command(config: &Config, command: TokenCommand) -> anyhow::Result<ExitCode> {
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

/// `vole log dump`: every log (ref moves, metadata writes, audit events,
/// in that order), then (with `--follow`) new records of any as they
/// appear.
fn dump_logs(config: &Config, follow: bool, json: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = DataDir::new(config.data_dir.clone()).log_dir();
    let mut refs = Tail::<RefMove>::new(&dir.join(RefMove::FILE_NAME));
    let mut meta = Tail::<MetaWrite>::new(&dir.join(MetaWrite::FILE_NAME));
    let mut audit = Tail::<AuditEvent>::new(&dir.join(AuditEvent::FILE_NAME));
    let stdout = std::io::stdout();
    loop {
        let mut out = stdout.lock();
        let mut failed = None;
        refs.poll(|entry| {
            for line in dump_lines("refs", entry, json, describe_ref_move) {
                if let Err(e) = writeln!(out, "{line}") {
                    failed.get_or_insert(e);
                }
            }
        })?;
        meta.poll(|entry| {
            for line in dump_lines("meta", entry, json, describe_meta_write) {
                if let Err(e) = writeln!(out, "{line}") {
                    failed.get_or_insert(e);
                }
            }
        })?;
        audit.poll(|entry| {
            for line in dump_lines("audit", entry, json, describe_audit) {
                if let Err(e) = writeln!(out, "{line}") {
                    failed.get_or_insert(e);
                }
            }
        })?;
        match failed {
            // A closed pipe (`| head`) ends the dump quietly.
            Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Some(e) => return Err(e.into()),
            None => {}
        }
        out.flush()?;
        drop(out);
        if !follow {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn dump_lines<K: serde::Serialize>(
    log: &str,
    entry: Entry<K>,
    json: bool,
    describe: fn(&K) -> String,
) -> Vec<String> {
    let (seq, rows) = match entry {
        Entry::Checkpoint(rows) => (None, rows),
        Entry::Txn { seq, rows } => (Some(seq), rows),
    };
    rows.iter()
        .map(|row| {
            if json {
                let mut value = serde_json::to_value(row).unwrap_or_default();
                if let Some(object) = value.as_object_mut() {
                    object.insert("log".into(), log.into());
                    object.insert("seq".into(), seq.into());
                    object.insert("checkpoint".into(), seq.is_none().into());
                }
                value.to_string()
            } else {
                let seq = seq.map_or("checkpoint".to_string(), |s| format!("seq={s}"));
                format!("{log} {seq} {}", describe(row))
            }
        })
        .collect()
}

fn format_time(time_ns: i64) -> String {
    vole_stdx::time::nanos_to_millis(time_ns)
}

fn short_oid(oid: &Option<String>) -> &str {
    oid.as_deref().map_or("0000000", |o| &o[..o.len().min(12)])
}

fn describe_audit(e: &AuditEvent) -> String {
    format!(
        "{} {} actor={}@{} target={} {}",
        format_time(e.time_ns),
        e.event,
        e.actor,
        e.client,
        e.target,
        e.detail
    )
}

fn describe_ref_move(m: &RefMove) -> String {
    format!(
        "{} {} {} {}..{} {} actor={}@{} push={}",
        format_time(m.time_ns),
        m.repo,
        m.ref_name,
        short_oid(&m.old),
        short_oid(&m.new),
        m.phase.as_str(),
        m.actor,
        m.client,
        m.push_id
    )
}

fn describe_meta_write(m: &MetaWrite) -> String {
    format!(
        "{} {} {} {} shard={:02x} bytes={}",
        format_time(m.time_ns),
        m.repo,
        m.kind,
        m.entity_id,
        m.shard,
        m.body.len()
    )
}

/// How long the CLI waits for a server that holds the lock but has not yet
/// opened its control socket (it is starting up).
const SERVER_STARTING_WAIT: Duration = Duration::from_secs(10);

/// Carries out `request` through the running server, or in-process under the
/// data dir lock when none runs; decodes the reply's data as `T`.
fn call<T: serde::de::DeserializeOwned>(config: &Config, request: Request) -> anyhow::Result<T> {
    let data = DataDir::new(config.data_dir.clone());
    let deadline = Instant::now() + SERVER_STARTING_WAIT;
    let reply = loop {
        if let Some(mut client) = Client::connect(&data.socket_path())? {
            break client.call(request)?;
        }
        data.prepare()?;
        match data.lock("vole cli") {
            Ok(lock) => {
                let git = Git::locate(config.git.as_deref())?;
                let app = App::open(config.clone(), git)?;
                let reply = vole_control::dispatch(&app.control, request);
                // Folded into git before the lock goes: a copy of the data
                // dir taken now holds the change in its repos too.
                app.meta.close(Duration::from_secs(30));
                drop(lock);
                break reply;
            }
            Err(DataDirError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into()),
        }
    };
    decode(reply)
}

/// `vole backup DEST`: by the running server (which holds the cut), or
/// here under the data dir lock when none runs.
fn backup(config: &Config, dest: &std::path::Path) -> anyhow::Result<ExitCode> {
    let dest =
        std::path::absolute(dest).with_context(|| format!("cannot resolve {}", dest.display()))?;
    let data = DataDir::new(config.data_dir.clone());
    let mut bar = Progress::new("backing up");
    let summary = if let Some(mut client) = Client::connect(&data.socket_path())? {
        let mut reply = client.call(Request::Backup {
            dest: dest.display().to_string(),
        })?;
        let mut pending = String::new();
        loop {
            let progress = reply.data.as_ref().and_then(|d| d.get("progress")).cloned();
            match progress {
                Some(p) if reply.ok => {
                    bar.set(
                        p["done"].as_u64().unwrap_or(0),
                        p["total"].as_u64().unwrap_or(0),
                    );
                }
                _ => break,
            }
            reply = loop {
                if let Some(next) = client.next_reply(&mut pending, Duration::from_secs(600))? {
                    break next;
                }
            };
        }
        decode::<serde_json::Value>(reply)?
    } else {
        let _lock = data.lock("vole backup")?;
        let cut = vole_control::backup::cut_offline(&data)?;
        let manifest = vole_control::backup::write(&data, cut, &dest, &mut |done, total| {
            bar.set(done, total)
        })?;
        vole_control::backup::summary(&manifest)
    };
    bar.finish();
    println!(
        "backed up {} files, {} bytes, {} repos into {}",
        summary["files"],
        summary["bytes"],
        summary["repos"],
        dest.display()
    );
    for log in summary["logs"].as_array().into_iter().flatten() {
        println!(
            "  {} through sequence {}",
            log["file"].as_str().unwrap_or("?"),
            log["seq"]
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar in bytes on a terminal (indicatif), nothing otherwise.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(what: &'static str) -> Progress {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what);
        Progress(Some(bar))
    }

    fn set(&mut self, done: u64, total: u64) {
        if let Some(bar) = &self.0 {
            bar.set_length(total);
            bar.set_position(done);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(reply: Reply) -> anyhow::Result<T> {
    if !reply.ok {
        bail!(
            "{}",
            reply.error.unwrap_or_else(|| "request failed".to_string())
        );
    }
    serde_json::from_value(reply.data.unwrap_or_default())
        .context("the server's reply did not have the expected shape")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// One row of `docs/configuration.md` per setting, from clap's own
    /// definitions: flag, environment variable, config file key, default,
    /// what it does.
    fn rows() -> Vec<String> {
        let cli = super::Cli::command();
        let serve = cli
            .find_subcommand("serve")
            .expect("the serve command")
            .clone();
        // The global flags first (the file keys `data` and `git` are theirs).
        let mut args: Vec<clap::Arg> = cli.get_arguments().cloned().collect();
        args.extend(serve.get_arguments().cloned());
        let mut rows = Vec::new();
        for arg in args {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            let env = arg
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
            let (what, default) = match help.rsplit_once(" [default: ") {
                Some((what, default)) => {
                    (what.to_string(), default.trim_end_matches(']').to_string())
                }
                None => (help.clone(), String::new()),
            };
            // Every serve setting is also a file key (its field's name in
            // kebab-case, as `config::Settings` reads it); of the global
            // ones, `data` and `git` are.
            let key = if serve.get_arguments().any(|a| a.get_long() == Some(long))
                || matches!(long, "data" | "git")
            {
                format!("`{}`", arg.get_id().as_str().replace('_', "-"))
            } else {
                String::new()
            };
            rows.push(format!(
                "| `--{long}` | {env} | {key} | {default} | {what} |"
            ));
        }
        rows
    }

    #[test]
    fn the_configuration_doc_lists_every_setting_as_defined() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        let rows = rows();
        assert!(rows.len() > 30, "only {} settings found", rows.len());
        let header =
            "| Flag | Environment | File key | Default | What it sets |\n|---|---|---|---|---|\n";
        assert!(
            doc.contains(header),
            "docs/configuration.md has no table header"
        );
        let missing: Vec<&String> = rows
            .iter()
            .filter(|row| !doc.contains(row.as_str()))
            .collect();
        let documented = doc.lines().filter(|line| line.starts_with("| `--")).count();
        assert!(
            missing.is_empty() && documented == rows.len(),
            "docs/configuration.md is out of date with the settings ({} rows there, {} settings); \
             its table should be:\n| Flag | Environment | File key | Default | What it sets |\n|---|---|---|---|---|\n{}",
            documented,
            rows.len(),
            rows.join("\n")
        );
    }
}
