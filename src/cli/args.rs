//! The command line's clap definitions: the global flags, every command and
//! its arguments (the settings themselves are `vole_config::Settings`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use vole_config::Settings;

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
    /// e.g. `info,vole_transport=debug` [default: text].
    #[arg(long, global = true, env = "VOLE_LOG_FORMAT", value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// Show a command's log lines (a command other than `serve` prints
    /// only its answer and its warnings otherwise; VOLE_LOG overrides).
    #[arg(short, long, global = true)]
    pub verbose: bool,

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
    /// Issues of the repository in the current directory (a clone that
    /// fetched `refs/meta/*`): no server, no data dir.
    #[command(subcommand)]
    Issue(ThreadCommand),
    /// Pull requests of the repository in the current directory, as
    /// `vole issue` reads issues.
    #[command(subcommand)]
    Pr(ThreadCommand),
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
        /// Unique: no two users share an email.
        #[arg(long, value_name = "ADDR")]
        email: String,
        /// The name shown on pages (the login stays fixed).
        #[arg(long, value_name = "NAME", default_value = "")]
        full_name: String,
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
    /// Change a user's display name or email.
    Edit {
        name: String,
        #[arg(long, value_name = "NAME")]
        full_name: Option<String>,
        #[arg(long, value_name = "ADDR")]
        email: Option<String>,
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

/// Settings from the environment alone, for commands without serve's flags.
#[derive(Debug, Parser)]
pub(crate) struct EnvOnly {
    #[command(flatten)]
    pub(crate) settings: Settings,
}

/// `vole issue` and `vole pr`.
#[derive(Debug, Subcommand)]
pub enum ThreadCommand {
    /// List them, newest first (`--state open` by default).
    List {
        /// open, closed (pull requests: merged too), or all.
        #[arg(long, default_value = "open")]
        state: String,
        /// Only those with this label.
        #[arg(long)]
        label: Option<String>,
        /// Only those by this user.
        #[arg(long)]
        author: Option<String>,
        /// The documents as a JSON array (the fields of docs/metadata-format.md).
        #[arg(long)]
        json: bool,
    },
    /// One, with its comments in order.
    Show {
        number: u64,
        /// `{"thread": .., "comments": [..]}`.
        #[arg(long)]
        json: bool,
    },
}
