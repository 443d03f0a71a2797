//! The command line: what each subcommand does (its clap definitions are
//! in [`args`]).
//!
//! Commands that change state go to the running server over the control
//! socket when one is up, and otherwise take the data dir lock and do the
//! work in-process through the same [`vole_control::dispatch`].

use std::io::IsTerminal;
use std::process::ExitCode;

mod accounts;
mod args;
mod control_client;
mod data_dir;
mod hook;
mod log_dump;
mod log_filter;
mod pack_objects;
mod progress;
mod repo;
mod threads;

use args::EnvOnly;
pub use args::{
    Cli, Command, HookCommand, LogCommand, LogFormat, RepoCommand, ScopeArg, ServeArgs,
    ThreadCommand, TokenCommand, UserCommand, VisibilityArg,
};
use vole_meta::entity::ThreadKind;

use anyhow::Context;
use clap::Parser;

use vole_config::Config;

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
        return pack_objects::pack_objects(&command);
    }
    let cli = Cli::parse();
    if let Command::Sentinel { mark } = &cli.command {
        return vole_transport::sentinel::run(mark);
    }
    // Issues and pull requests are read from the clone in the current
    // directory: no server, no data dir, no config.
    let read = match &cli.command {
        Command::Issue(command) => Some(threads::thread_command(ThreadKind::Issue, command)),
        Command::Pr(command) => Some(threads::thread_command(ThreadKind::Change, command)),
        _ => None,
    };
    if let Some(read) = read {
        return read.unwrap_or_else(|e| {
            eprintln!("vole: error: {}", vole_stdx::error_chain::Chain(e.as_ref()));
            ExitCode::FAILURE
        });
    }
    // Hooks run inside git, under the server: no config, no tracing set-up.
    if let Command::Hook(hook) = &cli.command {
        return match hook {
            HookCommand::PreReceive => hook::pre_receive(),
            HookCommand::ReferenceTransaction { state } => hook::reference_transaction(state),
            HookCommand::PackObjects { command } => pack_objects::pack_objects(command),
        };
    }
    // The server logs what it does; a command run by a person prints its
    // answer, and its log lines only when asked (`-v`, VOLE_LOG).
    let quiet = !cli.verbose && !matches!(cli.command, Command::Serve(_));
    let log_writer = init_tracing(
        cli.log_format.unwrap_or(LogFormat::Text),
        if quiet { "warn" } else { "info" },
    );
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
/// background thread ([`PacedStderr`]: one `write` per batch). It is not
/// lossy: a full queue makes the logger wait. Dropping the guard flushes.
fn init_tracing(
    format: LogFormat,
    default_filter: &str,
) -> tracing_appender::non_blocking::WorkerGuard {
    let parsed = |var: &str| {
        let text = std::env::var(var).ok()?;
        tracing_subscriber::EnvFilter::try_new(log_filter::with_crate_targets(&text)).ok()
    };
    let filter = parsed("VOLE_LOG")
        .or_else(|| parsed("RUST_LOG"))
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_filter));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("vole-log")
        .finish(PacedStderr::new());
    let colours = std::io::stderr().is_terminal();
    if format == LogFormat::Json || !colours {
        crate::server::access_line::AccessLine::install(crate::server::access_line::AccessLine {
            writer: writer.clone(),
            json: format == LogFormat::Json,
        });
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        // A request's lines carry its span (`request{id=...}`) either way.
        LogFormat::Text => builder.with_ansi(colours).init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
    guard
}

/// Stderr for the log's writer thread, buffered, pausing 2 ms after each
/// flush. tracing-appender's thread writes what is queued and flushes once
/// the queue is empty, then blocks for the next line: on a busy server
/// that is a wake-up and a `write` for nearly every line, which costs more
/// than formatting it (a request line: 3.0 us of CPU in all, 1.8 us
/// paced). Paused, the lines of the next 2 ms gather in the queue and go
/// out in one `write`, and the threads that log wake no one. A line waits
/// at most the pause longer; none is dropped. (The pause is this writer's
/// own: the crate has no setting for it.)
struct PacedStderr(std::io::BufWriter<std::io::Stderr>);

impl PacedStderr {
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

    fn new() -> PacedStderr {
        PacedStderr(std::io::BufWriter::with_capacity(
            64 << 10,
            std::io::stderr(),
        ))
    }
}

impl std::io::Write for PacedStderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()?;
        std::thread::sleep(Self::PAUSE);
        Ok(())
    }
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
        Command::Repo(command) => repo::repo_command(&config, command),
        Command::User(command) => accounts::user_command(&config, command),
        Command::Token(command) => accounts::token_command(&config, command),
        Command::Sentinel { .. } | Command::Hook(_) | Command::Issue(_) | Command::Pr(_) => {
            unreachable!("handled in main before any set-up")
        }
        Command::Log(command) => log_dump::log_command(&config, command),
        Command::Backup { dest } => data_dir::backup(&config, &dest),
        Command::Restore { src } => data_dir::restore(&config, &src),
        Command::Check => data_dir::check(&config),
    }
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
