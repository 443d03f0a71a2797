//! `vole cgi-guard`: the first process of every git request's process
//! group. A parent-death signal reaches only the direct child of the server,
//! so git's own children (upload-pack, receive-pack, hooks) would outlive a
//! killed server; the guard turns the signal into a kill of its whole group.
//!
//! The server starts `vole cgi-guard <server-pid> -- git-http-backend` in a
//! new process group; the guard sets `PR_SET_PDEATHSIG=SIGTERM` on itself
//! (then checks the server is still its parent, closing the window before
//! the signal was set), runs git in the same group with stdin/stdout/stderr inherited (no copying), exits with
//! git's status, and on SIGTERM (the server died) kills the group. No crate
//! offers this; it is twenty lines of libc.

#![allow(unsafe_code)] // see the module doc and each `// SAFETY:` line

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitCode;

extern "C" fn kill_own_group(_signal: libc::c_int) {
    // SAFETY: kill(2) is async-signal-safe; 0 means "my process group".
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
}

/// Runs `command` under the guard; returns git's exit status.
pub fn run(server_pid: u32, command: &[OsString]) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        eprintln!("vole cgi-guard: no command given");
        return ExitCode::from(2);
    };
    // SAFETY: installs a handler that only calls an async-signal-safe
    // function, and sets this process's own parent-death signal.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            kill_own_group as *const () as libc::sighandler_t,
        );
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
    if std::os::unix::process::parent_id() != server_pid {
        // The server died before the handler was in place.
        kill_own_group(libc::SIGTERM);
    }
    match std::process::Command::new(program).args(args).status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitCode::from(code as u8),
            (None, Some(signal)) => ExitCode::from(128u8.wrapping_add(signal as u8)),
            (None, None) => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!(
                "vole cgi-guard: cannot run {}: {e}",
                program.to_string_lossy()
            );
            ExitCode::from(127)
        }
    }
}
