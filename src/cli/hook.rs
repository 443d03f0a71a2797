//! `vole hook pre-receive` and `vole hook reference-transaction <state>`:
//! the git side of the hooks. Each reads git's input, asks the running
//! server over the control socket, and exits with the status git needs
//! (see the module doc of [`vole_hooks`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use vole_control::{Reply, Request, client::Client};
use vole_hooks::{Outcome, PushContext, RefUpdate, env};

/// Why a hook could not do its part; the message is what git's user sees
/// (as `remote:` lines), so it names what failed but carries no io error's
/// text (the source does, for a caller that logs it).
#[derive(Debug, thiserror::Error)]
enum HookError {
    #[error("{0} is not set: this hook runs only under vole serve")]
    NotUnderServer(&'static str),
    #[error("{0} is not a number")]
    BadPushId(&'static str),
    #[error("the vole server could not be reached to record this push; nothing was changed")]
    Unreachable(#[source] vole_control::client::ClientError),
    #[error("the vole server is not running")]
    NoServer,
    #[error("the vole server did not answer in time; this push is not recorded")]
    NoAnswer(#[source] vole_control::client::ClientError),
    #[error("{0}")]
    Refused(String),
    #[error("cannot read the hook input from git")]
    Input(#[source] std::io::Error),
    #[error(transparent)]
    BadInput(#[from] vole_hooks::BadHookInput),
    #[error("cannot run the repository's {name} hook")]
    RepoHook {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot check the size of the pushed files; nothing was pushed")]
    BlobScan(#[source] std::io::Error),
    #[error("unknown transaction state {0:?}")]
    UnknownState(String),
}

/// How long a hook waits for the server's answer.
pub(super) const SERVER_TIMEOUT: Duration = Duration::from_secs(60);

fn context() -> Result<(PathBuf, PushContext), HookError> {
    let var = |name: &'static str| std::env::var(name).map_err(|_| HookError::NotUnderServer(name));
    let socket = PathBuf::from(var(env::SOCKET)?);
    let push_id = var(env::PUSH_ID)?
        .parse()
        .map_err(|_| HookError::BadPushId(env::PUSH_ID))?;
    Ok((
        socket,
        PushContext {
            repo: var(env::REPO)?,
            push_id,
            actor: var(env::ACTOR)?,
            client: var(env::CLIENT)?,
        },
    ))
}

fn ask(socket: &Path, request: Request) -> Result<Reply, HookError> {
    let mut client = Client::connect_with_timeout(socket, SERVER_TIMEOUT)
        .map_err(HookError::Unreachable)?
        .ok_or(HookError::NoServer)?;
    let reply = client.call(request).map_err(HookError::NoAnswer)?;
    if reply.ok {
        Ok(reply)
    } else {
        Err(HookError::Refused(
            reply.error.unwrap_or_else(|| "refused".into()),
        ))
    }
}

fn read_stdin() -> Result<String, HookError> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(HookError::Input)?;
    Ok(input)
}

/// `new` descends from `old`, asked of git (the hook runs inside the push's
/// quarantine, so the new objects are visible).
fn is_fast_forward(git: &str, update: &RefUpdate) -> Option<bool> {
    if update.is_creation() || update.is_deletion() {
        return None;
    }
    let status = vole_git::hook_command(git)
        .args(["merge-base", "--is-ancestor", &update.old, &update.new])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    match status.code() {
        Some(0) => Some(true),
        Some(1) => Some(false),
        _ => None,
    }
}

/// `vole hook pre-receive`
pub fn pre_receive() -> ExitCode {
    match run_pre_receive() {
        Ok(code) => code,
        Err(message) => {
            eprintln!("vole: push refused: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_pre_receive() -> Result<ExitCode, HookError> {
    let (socket, push) = context()?;
    let input = read_stdin()?;
    let git = std::env::var(env::GIT).unwrap_or_else(|_| "git".into());
    let mut updates = RefUpdate::parse_lines(&input)?;
    for update in &mut updates {
        update.fast_forward = is_fast_forward(&git, update);
    }
    let reply = ask(
        &socket,
        Request::HookPreReceive {
            push,
            updates: updates.clone(),
        },
    )?;
    let refusals = reply
        .data
        .as_ref()
        .and_then(|d| d.get("refused"))
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    if !refusals.is_empty() {
        for refusal in refusals {
            eprintln!(
                "vole: {}: {}",
                refusal["ref"].as_str().unwrap_or("?"),
                refusal["reason"].as_str().unwrap_or("refused")
            );
        }
        return Ok(ExitCode::FAILURE);
    }
    if let Some(limit) = std::env::var(env::MAX_BLOB_SIZE)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let oversized = vole_hooks::blob_limit::oversized_blobs(&git, &updates, limit)
            .map_err(HookError::BlobScan)?;
        if !oversized.is_empty() {
            let size = |n: u64| bytesize::ByteSize::b(n).display().iec().to_string();
            for blob in &oversized {
                let short = &blob.id[..blob.id.len().min(12)];
                let what = match (blob.kind.as_str(), blob.path.is_empty()) {
                    ("blob", false) => format!("{} ({short})", blob.path),
                    (kind, false) => format!("the {kind} {} ({short})", blob.path),
                    (kind, true) => format!("a {kind} ({short})"),
                };
                let unit = if blob.kind == "blob" {
                    "file"
                } else {
                    "object"
                };
                eprintln!(
                    "vole: {what} is {}, over this server's limit of {} for one {unit} (--max-blob-size)",
                    size(blob.size),
                    size(limit)
                );
            }
            eprintln!(
                "vole: nothing was pushed; remove the file from the history (or use Git LFS elsewhere) and push again"
            );
            return Ok(ExitCode::FAILURE);
        }
    }
    run_repo_hook("pre-receive", &input)
}

/// Runs the repository's own hook of that name, if it has one.
fn run_repo_hook(name: &str, input: &str) -> Result<ExitCode, HookError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let git_dir = std::env::var("GIT_DIR").unwrap_or_else(|_| ".".into());
    let hook = Path::new(&git_dir).join("hooks").join(name);
    let runnable = hook
        .metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if !runnable {
        return Ok(ExitCode::SUCCESS);
    }
    let mut child = Command::new(&hook)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|source| HookError::RepoHook {
            name: name.to_string(),
            source,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let status = child.wait().map_err(|source| HookError::RepoHook {
        name: name.to_string(),
        source,
    })?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `vole hook reference-transaction <prepared|committed|aborted>`
pub fn reference_transaction(state: &str) -> ExitCode {
    let result = (|| -> Result<(), HookError> {
        let (socket, push) = context()?;
        // Only real ref moves: git also reports HEAD following the branch it
        // points at, and zero-to-zero lines for a packed-refs transaction
        // it opens and drops while deleting.
        let moves: Vec<RefUpdate> = RefUpdate::parse_lines(&read_stdin()?)?
            .into_iter()
            .filter(|m| m.ref_name.starts_with("refs/") && !(m.is_creation() && m.is_deletion()))
            .collect();
        if moves.is_empty() {
            return Ok(());
        }
        let request = match state {
            "prepared" => Request::HookRefPrepared { push, moves },
            "committed" => Request::HookRefOutcome {
                push,
                moves,
                outcome: Outcome::Committed,
            },
            "aborted" => Request::HookRefOutcome {
                push,
                moves,
                outcome: Outcome::Aborted,
            },
            other => return Err(HookError::UnknownState(other.to_string())),
        };
        ask(&socket, request).map(drop)
    })();
    match (state, result) {
        (_, Ok(())) => ExitCode::SUCCESS,
        ("prepared", Err(message)) => {
            eprintln!(
                "vole: the ref update could not be recorded, so nothing was changed: {message}"
            );
            ExitCode::FAILURE
        }
        ("committed", Err(message)) => {
            // git ignores this hook's status and would report success. The
            // refs have moved, but the server could not make them durable
            // (or was not there to say it did): stop git before it tells
            // the pusher "ok". The pusher sees the push fail and may push
            // again; at the next start the server resolves the move from
            // the disk.
            eprintln!(
                "vole: the ref update could not be made durable, so the push is not confirmed; push again: {message}"
            );
            stop_git();
            ExitCode::FAILURE
        }
        (_, Err(message)) => {
            // git ignores this status; say it anyway.
            eprintln!("vole: recording the outcome failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Kills the git that runs this hook (receive-pack; the hook script
/// `exec`s vole, so it is the parent), before it reports to the client.
fn stop_git() {
    let parent = rustix::process::getppid();
    if let Some(parent) = parent.filter(|p| !p.is_init()) {
        let _ = rustix::process::kill_process(parent, rustix::process::Signal::KILL);
    }
}
