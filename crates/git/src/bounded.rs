//! A read-side git child with bounded cost: its output is read as it
//! comes and cut at a byte bound (the child is killed there, not read
//! whole and then cut), and a deadline kills it if it runs too long. Used
//! for the web UI's `git log` and `git show` and for a prefix of a large
//! blob; the streamed children (archives, raw files, site blobs) are
//! bounded by `vole_http::stream` instead.

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Git;

/// How much one child may produce and for how long it may run.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Bytes of stdout kept; at this many the child is killed and the
    /// output is marked truncated.
    pub max_output: usize,
    pub deadline: Duration,
}

/// What a bounded child printed.
#[derive(Debug)]
pub struct Bounded {
    pub stdout: Vec<u8>,
    /// The output reached [`Bounds::max_output`] and was cut there.
    pub truncated: bool,
}

/// Why a bounded child gave no usable output.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    #[error("cannot run git {command}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("git {command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("git {command} ran past its deadline of {}s and was killed", .deadline.as_secs())]
    TimedOut { command: String, deadline: Duration },
}

/// Kills the bounded children of a request whose client went away. The
/// async side keeps a [`CancelOnDrop`]; the blocking side runs its reads
/// inside [`Cancel::scope`], and every `run_bounded` in that scope registers
/// its child's process group while it runs. Dropping the guard before the
/// reads end (the handler's future dropped: the client left) kills it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<parking_lot::Mutex<CancelState>>);

#[derive(Debug, Default)]
struct CancelState {
    /// The scope's children running now (more than one when a read runs
    /// its git children at once, each thread in the scope).
    running: Vec<rustix::process::Pid>,
    cancelled: bool,
}

thread_local! {
    static SCOPE: std::cell::RefCell<Option<Cancel>> = const { std::cell::RefCell::new(None) };
}

impl Cancel {
    /// Runs `f` (blocking reads) with this handle in scope.
    pub fn scope<T>(&self, f: impl FnOnce() -> T) -> T {
        SCOPE.with(|scope| *scope.borrow_mut() = Some(self.clone()));
        let out = f();
        SCOPE.with(|scope| *scope.borrow_mut() = None);
        out
    }

    /// The guard the async side holds; dropped, it cancels.
    pub fn guard(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }

    /// The handle in scope on this thread, if any: a read that runs work
    /// on other threads enters it there too ([`Cancel::scope`]).
    pub fn current() -> Option<Cancel> {
        SCOPE.with(|scope| scope.borrow().clone())
    }

    /// Registers a running child; false if already cancelled (the caller
    /// kills it at once).
    fn register(&self, pid: rustix::process::Pid) -> bool {
        let mut state = self.0.lock();
        state.running.push(pid);
        !state.cancelled
    }

    /// The child `pid` is about to be reaped: never signal it after this.
    fn finished(&self, pid: rustix::process::Pid) {
        self.0.lock().running.retain(|p| *p != pid);
    }
}

/// Cancels its [`Cancel`] when dropped, unless [`CancelOnDrop::disarm`]ed.
#[derive(Debug)]
pub struct CancelOnDrop(Option<Cancel>);

impl CancelOnDrop {
    /// The reads ended: nothing to cancel.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            let mut state = cancel.0.lock();
            state.cancelled = true;
            for pid in state.running.drain(..) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Bytes of a failing child's stderr kept for its error.
const STDERR_KEPT: u64 = 4096;

impl Git {
    /// `git --git-dir <git_dir> --literal-pathspecs args..`, bounded (see
    /// the module doc). Blocks: call it off the async workers.
    pub fn run_bounded(
        &self,
        git_dir: &Path,
        args: &[&str],
        bounds: Bounds,
    ) -> Result<Bounded, BoundedError> {
        let (out, status, stderr) = self.run_bounded_env(git_dir, args, &[], bounds)?;
        if !out.truncated && !status.success() {
            return Err(BoundedError::Failed {
                command: args.first().copied().unwrap_or_default().to_string(),
                status,
                stderr,
            });
        }
        Ok(out)
    }

    /// [`Git::run_bounded`] with `env` added to the child's environment,
    /// for a command whose exit status is an answer (`git merge-tree`
    /// exits 1 on conflicts, `merge-base --is-ancestor` 1 for "no"): its
    /// output, status and the start of its stderr.
    pub fn run_bounded_env(
        &self,
        git_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        bounds: Bounds,
    ) -> Result<(Bounded, std::process::ExitStatus, String), BoundedError> {
        let command = args.first().copied().unwrap_or_default().to_string();
        use std::os::unix::process::CommandExt;
        let mut child = self
            .command()
            // Its own process group: whatever it starts is killed with it.
            .process_group(0)
            .args(super::READ_SIDE)
            .arg("--git-dir")
            .arg(git_dir)
            // A path is a path: `*`, `:(glob)` and other pathspec magic in
            // a request's path mean nothing to git.
            .arg("--literal-pathspecs")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| BoundedError::Spawn {
                command: command.clone(),
                source,
            })?;
        let pid = rustix::process::Pid::from_child(&child);
        let cancel = Cancel::current();
        if let Some(cancel) = &cancel
            && !cancel.register(pid)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        // The child is reaped only after the watchdog is gone, so its pid
        // cannot have been reused.
        let (done, watchdog, timed_out) =
            watchdog(pid, bounds.deadline).map_err(|source| BoundedError::Spawn {
                command: command.clone(),
                source,
            })?;
        let stderr = child.stderr.take().map(keep_stderr);
        let mut stdout = Vec::new();
        let mut truncated = false;
        if let Some(out) = child.stdout.take() {
            let mut limited = out.take(bounds.max_output as u64 + 1);
            let _ = limited.read_to_end(&mut stdout);
            if stdout.len() > bounds.max_output {
                stdout.truncate(bounds.max_output);
                truncated = true;
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = done.send(());
        let _ = watchdog.join();
        if let Some(cancel) = &cancel {
            cancel.finished(pid);
        }
        let status = child.wait().map_err(|source| BoundedError::Spawn {
            command: command.clone(),
            source,
        })?;
        let stderr = stderr
            .and_then(|t| t.join().ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
            .unwrap_or_default();
        if timed_out.load(Ordering::SeqCst) {
            return Err(BoundedError::TimedOut {
                command,
                deadline: bounds.deadline,
            });
        }
        Ok((Bounded { stdout, truncated }, status, stderr))
    }
}

/// A thread that kills the process group `pid` at `deadline` unless told
/// (through the returned sender) that the output was read first; the flag
/// says whether it killed.
fn watchdog(
    pid: rustix::process::Pid,
    deadline: Duration,
) -> std::io::Result<(
    std::sync::mpsc::Sender<()>,
    std::thread::JoinHandle<()>,
    Arc<AtomicBool>,
)> {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let timed_out = Arc::new(AtomicBool::new(false));
    let flag = timed_out.clone();
    let thread = std::thread::Builder::new()
        .name("vole-git-deadline".into())
        .spawn(move || {
            if finished.recv_timeout(deadline) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                flag.store(true, Ordering::SeqCst);
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        })?;
    Ok((done, thread, timed_out))
}

/// A thread that keeps the first [`STDERR_KEPT`] bytes of a child's stderr
/// and drains the rest, so the child never blocks on a full pipe.
fn keep_stderr(stderr: std::process::ChildStderr) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut limited = stderr.take(STDERR_KEPT);
        let _ = limited.read_to_end(&mut kept);
        let _ = std::io::copy(&mut limited.into_inner(), &mut std::io::sink());
        kept
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Instant;

    /// A "git" that answers `--version` and `--exec-path` and otherwise
    /// hangs (in a child of its own, so only killing the process group
    /// stops it).
    fn hanging_git(dir: &Path) -> Git {
        let script = dir.join("git");
        // Written by a child shell: were this process to hold the file open
        // for writing, a concurrent test's fork could inherit that
        // descriptor and the exec below would fail with "Text file busy".
        let mut writer = std::process::Command::new("/bin/sh")
            .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
            .arg(&script)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        writer
            .stdin
            .take()
            .unwrap()
            .write_all(
                b"#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'git version 2.47.3'; exit 0; fi\n\
                  if [ \"$1\" = --exec-path ]; then echo /nonexistent; exit 0; fi\nsleep 30\n",
            )
            .unwrap();
        assert!(writer.wait().unwrap().success());
        Git::locate(Some(&script)).unwrap()
    }

    #[test]
    fn output_is_cut_at_its_bound_while_it_streams() {
        let git = Git::locate(None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r.git");
        assert!(
            git.command()
                .args(["init", "-q", "--bare"])
                .arg(&repo)
                .status()
                .unwrap()
                .success()
        );
        let mut writer = git
            .command()
            .arg("--git-dir")
            .arg(&repo)
            .args(["hash-object", "-w", "--stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        writer
            .stdin
            .take()
            .unwrap()
            .write_all(&vec![b'x'; 4 << 20])
            .unwrap();
        let id = String::from_utf8(writer.wait_with_output().unwrap().stdout).unwrap();
        let bounds = Bounds {
            max_output: 1000,
            deadline: Duration::from_secs(30),
        };
        let out = git
            .run_bounded(&repo, &["cat-file", "blob", id.trim()], bounds)
            .unwrap();
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.truncated, "a 4 MiB blob cut at 1000 bytes is truncated");
        let whole = Bounds {
            max_output: 8 << 20,
            ..bounds
        };
        let out = git
            .run_bounded(&repo, &["cat-file", "blob", id.trim()], whole)
            .unwrap();
        assert_eq!((out.stdout.len(), out.truncated), (4 << 20, false));
        let failed = git.run_bounded(&repo, &["cat-file", "blob", "nope"], bounds);
        assert!(
            matches!(failed, Err(BoundedError::Failed { .. })),
            "{failed:?}"
        );
    }

    #[test]
    fn a_cancelled_request_kills_its_child() {
        let dir = tempfile::tempdir().unwrap();
        let git = hanging_git(dir.path());
        let cancel = Cancel::default();
        let guard = cancel.guard();
        let started = Instant::now();
        let reader = {
            let (git, cancel, dir) = (git.clone(), cancel.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                let bounds = Bounds {
                    max_output: 1000,
                    deadline: Duration::from_secs(30),
                };
                cancel.scope(|| git.run_bounded(&dir, &["log"], bounds))
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        drop(guard); // the client went away
        let out = reader.join().unwrap();
        assert!(
            matches!(out, Err(BoundedError::Failed { .. })),
            "killed: {out:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the child outlived its request: {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_cancelled_request_kills_every_child_its_threads_run_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let git = hanging_git(dir.path());
        let cancel = Cancel::default();
        let guard = cancel.guard();
        let started = Instant::now();
        let reader = {
            let (git, cancel, dir) = (git.clone(), cancel.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                let bounds = Bounds {
                    max_output: 1000,
                    deadline: Duration::from_secs(30),
                };
                cancel.scope(|| {
                    // As a page's reads do: the scope entered on each thread.
                    let scope = Cancel::current().unwrap();
                    std::thread::scope(|threads| {
                        let other = threads
                            .spawn(|| scope.scope(|| git.run_bounded(&dir, &["log"], bounds)));
                        let here = git.run_bounded(&dir, &["log"], bounds);
                        (here, other.join().unwrap())
                    })
                })
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        drop(guard);
        let (here, other) = reader.join().unwrap();
        assert!(
            matches!(here, Err(BoundedError::Failed { .. }))
                && matches!(other, Err(BoundedError::Failed { .. })),
            "both killed: {here:?} {other:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a child outlived its request: {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let git = hanging_git(dir.path());
        let started = Instant::now();
        let bounds = Bounds {
            max_output: 1000,
            deadline: Duration::from_millis(300),
        };
        let out = git.run_bounded(dir.path(), &["log"], bounds);
        assert!(matches!(out, Err(BoundedError::TimedOut { .. })), "{out:?}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the deadline did not stop the child: {:?}",
            started.elapsed()
        );
    }
}
