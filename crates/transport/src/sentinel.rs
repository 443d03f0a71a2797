//! `vole sentinel`: one helper process per server that kills the git
//! processes a dead server left behind. What does not live here: killing a
//! single request's processes while the server runs (`cgi::ChildGroup`).
//!
//! Every git child of the server carries a mark in its environment
//! (`VOLE_SERVER=<mark>`, from [`vole_git::Git::child_env`]), and git
//! hands its environment down to its own children (upload-pack,
//! pack-objects, receive-pack, hooks). The sentinel holds the read end of
//! a pipe whose write end only the server holds; when the server dies, by
//! kill -9 or any other way, the kernel closes that end and the sentinel
//! reads end-of-file. It then kills every process carrying the mark, and
//! looks again until a few looks in a row find none (a child the server was
//! starting as it died shows its mark only once it has exec'd).
//!
//! Why not one guard process per request holding a parent-death signal:
//! that is an exec of this (large) binary in front of every clone and push,
//! about 2 ms of each. The sentinel is started once.
//!
//! No crate does this; it is a read, a scan of `/proc` and kill(2).

#![allow(unsafe_code)] // see each `// SAFETY:` line

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

/// The environment variable the mark is kept in.
pub use vole_git::CHILD_MARK_VAR as MARK_VAR;

/// Looks in a row that must find no marked process before the sentinel
/// exits, and how far apart.
const QUIET_LOOKS: u32 = 3;
const LOOK_INTERVAL: Duration = Duration::from_millis(20);
/// At most this many looks in all (a bound, should processes keep coming).
const MAX_LOOKS: u32 = 500;

/// The server's side: the sentinel child, and the pipe end whose closing
/// (the server's exit) tells it to act. Kept for the server's lifetime.
pub struct Sentinel {
    _pipe: std::process::ChildStdin,
}

/// Starts `vole sentinel MARK` (`exe` is this binary) in a process group of
/// its own, so a terminal's ctrl-c reaches the server, which drains, and
/// not the sentinel. A thread logs it if the sentinel ends while the server
/// runs (git processes would then outlive a killed server).
pub fn start(exe: &std::path::Path, mark: &str) -> std::io::Result<Sentinel> {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(exe)
        .arg("sentinel")
        .arg(mark)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .process_group(0)
        .spawn()?;
    let pipe = child.stdin.take().expect("stdin is piped");
    std::thread::Builder::new()
        .name("vole-sentinel-wait".into())
        .spawn(move || {
            let status = child.wait();
            tracing::warn!(
                ?status,
                "the sentinel ended: git processes may outlive a killed server"
            );
        })?;
    Ok(Sentinel { _pipe: pipe })
}

/// A fresh mark for this server: its pid and 64 random bits, so a mark is
/// never another server's, now or after a pid is reused.
pub fn new_mark() -> String {
    format!("{}.{:016x}", std::process::id(), rand::random::<u64>())
}

/// The sentinel's own body: waits for end-of-file on stdin, then kills
/// every process marked `mark`. Terminal signals are ignored: only the
/// server's end of the pipe closing ends the wait.
pub fn run(mark: &str) -> ExitCode {
    // SAFETY: setting a signal's disposition to "ignore" has no memory
    // effects.
    unsafe {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let killed = kill_marked(mark);
    if killed > 0 {
        eprintln!("vole sentinel: the server is gone; killed {killed} git processes it left");
    }
    ExitCode::SUCCESS
}

/// Kills every process marked `mark` until [`QUIET_LOOKS`] looks in a row
/// find none; returns how many it killed.
fn kill_marked(mark: &str) -> usize {
    let me = std::process::id();
    let wanted = format!("{MARK_VAR}={mark}");
    let mut killed = std::collections::HashSet::new();
    let mut quiet = 0;
    for _ in 0..MAX_LOOKS {
        let found: Vec<u32> = marked_processes(&wanted)
            .into_iter()
            .filter(|pid| *pid != me)
            .collect();
        if found.is_empty() {
            quiet += 1;
            if quiet >= QUIET_LOOKS {
                break;
            }
        } else {
            quiet = 0;
            for pid in &found {
                if kill_if_marked(*pid, &wanted) {
                    killed.insert(*pid);
                }
            }
        }
        std::thread::sleep(LOOK_INTERVAL);
    }
    killed.len()
}

/// Kills `pid` if it still carries `entry`: the process is held by a pidfd
/// first and its mark read again after, so a pid reused since the scan is
/// never signalled. On a kernel without pidfds (before Linux 5.3), kill(2)
/// right after the scan.
fn kill_if_marked(pid: u32, entry: &str) -> bool {
    use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
    let Some(pid_value) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    let marked = || {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|environ| environ_has(&environ, entry.as_bytes()))
    };
    match pidfd_open(pid_value, PidfdFlags::empty()) {
        Ok(pidfd) => marked() && pidfd_send_signal(&pidfd, Signal::KILL).is_ok(),
        Err(rustix::io::Errno::NOSYS) => {
            rustix::process::kill_process(pid_value, Signal::KILL).is_ok()
        }
        Err(_) => false,
    }
}

/// The pids of the processes whose environment holds `entry` exactly (one
/// `KEY=value` of the NUL-separated list). Processes that cannot be read
/// (another user's, gone meanwhile) are skipped.
fn marked_processes(entry: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ_has(&environ, entry.as_bytes()))
        })
        .collect()
}

fn environ_has(environ: &[u8], entry: &[u8]) -> bool {
    environ.split(|b| *b == 0).any(|item| item == entry)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_exact_entry_marks_a_process() {
        let entry = b"VOLE_SERVER=12.ab";
        assert!(super::environ_has(b"A=1\0VOLE_SERVER=12.ab\0B=2\0", entry));
        assert!(super::environ_has(b"VOLE_SERVER=12.ab", entry));
        assert!(!super::environ_has(b"VOLE_SERVER=12.abc\0", entry));
        assert!(!super::environ_has(b"X_VOLE_SERVER=12.ab\0", entry));
        assert!(!super::environ_has(b"", entry));
    }

    /// A marked child is found in /proc and killed; an unmarked one is not
    /// touched.
    #[test]
    fn a_marked_process_is_killed_and_an_unmarked_one_is_left() {
        let mark = super::new_mark();
        let spawn = |marked: bool| {
            let mut command = std::process::Command::new("sleep");
            command.arg("30");
            if marked {
                command.env(super::MARK_VAR, &mark);
            }
            command.spawn().unwrap()
        };
        let (mut marked, mut unmarked) = (spawn(true), spawn(false));
        // The mark shows once the child has exec'd.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let wanted = format!("{}={mark}", super::MARK_VAR);
        while !super::marked_processes(&wanted).contains(&marked.id()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the marked child never showed its mark"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            super::kill_marked(&mark),
            1,
            "killed other than the one marked child"
        );
        let status = marked.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(
            unmarked.try_wait().unwrap().is_none(),
            "the unmarked child was killed"
        );
        unmarked.kill().unwrap();
        let _ = unmarked.wait();
    }
}
