//! `vole hook pack-objects`: upload-pack's pack-objects served from the
//! server's pack cache, following a pack while it is written, and run here
//! when the cache cannot serve it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use super::hook::SERVER_TIMEOUT;
use vole_control::{Request, client::Client};
use vole_hooks::env;

/// `vole hook pack-objects git pack-objects ARGS...` (or the same
/// arguments to the `vole-pack-objects` link): upload-pack's
/// pack-objects, from the server's pack cache (`vole-pack-cache`):
/// the request's stdin and arguments go to the server, which answers with
/// a file to stream to stdout (complete, or being written by the one
/// pack-objects for all identical requests) and says when it is complete.
/// When the cache cannot serve (no server, a bypass, an error before the
/// first byte), pack-objects runs here as it would have without the hook.
pub fn pack_objects(command: &[String]) -> ExitCode {
    let mut stdin = Vec::new();
    if std::io::stdin().read_to_end(&mut stdin).is_err() {
        eprintln!("vole: cannot read pack-objects' input");
        return ExitCode::FAILURE;
    }
    match from_cache(command, &stdin) {
        Ok(Served::Done) => ExitCode::SUCCESS,
        Ok(Served::Bypass) => run_pack_objects(command, &stdin),
        Ok(Served::Resume { file, sent }) => match resume_uncached(command, &stdin, file, sent) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("vole: {message}");
                ExitCode::FAILURE
            }
        },
        Err(message) => {
            eprintln!("vole: {message}");
            ExitCode::FAILURE
        }
    }
}

enum Served {
    Done,
    /// Nothing was written: run pack-objects instead.
    Bypass,
    /// The cache could not keep the pack after `sent` bytes of `file` went
    /// out: see [`resume_uncached`].
    Resume {
        file: std::fs::File,
        sent: u64,
    },
}

/// Streams the cached pack; `Bypass` when the cache cannot serve this
/// request and nothing has been written yet.
fn from_cache(command: &[String], stdin: &[u8]) -> Result<Served, String> {
    use std::io::Write;
    let Some((mut client, reply)) = ask_for_pack(command, stdin) else {
        return Ok(Served::Bypass);
    };
    let Some(mut file) = open_pack_entry(&reply) else {
        return Ok(Served::Bypass);
    };
    let mut done = reply["done"].as_u64();
    // Woken as the producer writes (none needed for a complete pack).
    let growth = done.is_none().then(|| Growth::watch(&file)).flatten();
    let mut out = std::io::stdout().lock();
    let mut sent = 0u64;
    let mut pending = String::new();
    let deadline = std::time::Instant::now() + vole_pack_cache::READ_DEADLINE;
    loop {
        // What is written so far, file to pipe in the kernel.
        let n = match send_written(&mut file, &mut out) {
            Ok(n) => n,
            // The entry cannot be read (EIO, say) and nothing went out yet:
            // pack-objects runs here instead. A broken pipe is the client
            // gone, and so is any error once part of the pack was sent.
            Err(e) if sent == 0 && e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Ok(Served::Bypass);
            }
            Err(_) => return Err("cannot send the cached pack (the client went away?)".into()),
        };
        if n > 0 {
            sent += n;
            continue;
        }
        match done {
            Some(size) if sent == size => break,
            // Whole and read to its end, yet not its size: not served on.
            Some(_) => return Err("the cached pack is not the size it was made".into()),
            None => {}
        }
        if std::time::Instant::now() > deadline {
            return Err("the pack took too long to make".into());
        }
        // At the end of what is written so far: wait for more to be
        // written, or for the server's word (which follows the producer's
        // close of the file, or comes when it stopped writing).
        let wait = match growth.as_ref().map(|g| g.wait(Duration::from_millis(50))) {
            Some(Woke::Wrote) => continue,
            Some(Woke::Closed) => Duration::from_millis(50),
            Some(Woke::Quiet) | None => Duration::from_millis(5),
        };
        match client.next_reply(&mut pending, wait) {
            Ok(Some(reply)) if reply.ok => {
                let data = reply.data.unwrap_or_default();
                if data.get("failed").is_some() {
                    // The cache could not keep the pack (a full disk):
                    // what it wrote goes out first, then pack-objects runs
                    // here for the rest (or for all, if nothing was written).
                    sent += send_written(&mut file, &mut out).map_err(|_| {
                        "cannot send the cached pack (the client went away?)".to_string()
                    })?;
                    if sent == 0 {
                        return Ok(Served::Bypass);
                    }
                    drop(out);
                    return Ok(Served::Resume { file, sent });
                }
                done = data["done"].as_u64();
                if done.is_none() {
                    return Err("the server's word on the pack is not understood".into());
                }
            }
            Ok(Some(reply)) => {
                return Err(reply
                    .error
                    .unwrap_or_else(|| "making the pack failed".into()));
            }
            Ok(None) => {}
            Err(_) => return Err("the server went away while the pack was being made".into()),
        }
    }
    out.flush()
        .map_err(|_| "the client went away".to_string())?;
    Ok(Served::Done)
}

/// Asks the server for the pack of this pack-objects run: its client and
/// its word on where the pack is, or `None` when the cache cannot serve it
/// (no server, no repo, a request it bypasses).
fn ask_for_pack(command: &[String], stdin: &[u8]) -> Option<(Client, serde_json::Value)> {
    let (Ok(socket), Ok(repo)) = (std::env::var(env::SOCKET), std::env::var(env::REPO)) else {
        return None;
    };
    // Everything after `git`: git's own options, `pack-objects`, its
    // arguments (the server decides what it keys).
    let args = command.get(1..).map(<[String]>::to_vec)?;
    let Ok(stdin) = String::from_utf8(stdin.to_vec()) else {
        return None;
    };
    let Ok(Some(mut client)) = Client::connect_with_timeout(Path::new(&socket), SERVER_TIMEOUT)
    else {
        return None;
    };
    let reply = match client.call(Request::PackObjects { repo, args, stdin }) {
        Ok(reply) if reply.ok => reply.data.unwrap_or_default(),
        _ => return None,
    };
    if reply.get("bypass").is_some() {
        return None;
    }
    Some((client, reply))
}

/// The cache entry the server named, opened: the one being written, else
/// the complete one.
fn open_pack_entry(reply: &serde_json::Value) -> Option<std::fs::File> {
    let path = |key: &str| reply[key].as_str().map(PathBuf::from);
    let (Some(tmp), Some(pack)) = (path("tmp"), path("pack")) else {
        return None;
    };
    // Renamed when complete.
    let Ok(file) = std::fs::File::open(&tmp).or_else(|_| std::fs::File::open(&pack)) else {
        return None;
    };
    Some(file)
}

/// What woke a follower waiting at the end of what is written.
enum Woke {
    Wrote,
    /// The producer closed the file: it is complete, or it failed.
    Closed,
    /// Nothing happened in the time given.
    Quiet,
}

/// inotify on the file a follower reads (through `/proc/self/fd`, so a
/// rename to its final name changes nothing): the follower trails the
/// producer by a wake-up rather than by a polling interval. None where
/// inotify cannot be had (the follower then polls the server every 5 ms).
struct Growth(std::os::fd::OwnedFd);

impl Growth {
    fn watch(file: &std::fs::File) -> Option<Growth> {
        use rustix::fs::inotify;
        use std::os::fd::AsRawFd;
        let fd =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        inotify::add_watch(
            &fd,
            path.as_str(),
            inotify::WatchFlags::MODIFY | inotify::WatchFlags::CLOSE_WRITE,
        )
        .ok()?;
        Some(Growth(fd))
    }

    /// Waits at most `at_most` for a write or the close; drains what the
    /// kernel queued.
    fn wait(&self, at_most: Duration) -> Woke {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use rustix::fs::inotify;
        let timeout = Timespec::try_from(at_most).unwrap_or(Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        });
        let mut fds = [PollFd::new(&self.0, PollFlags::IN)];
        if !matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0) {
            return Woke::Quiet;
        }
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut events = inotify::Reader::new(&self.0, &mut buf);
        let mut woke = Woke::Quiet;
        while let Ok(event) = events.next() {
            if event.events().contains(inotify::ReadFlags::CLOSE_WRITE) {
                woke = Woke::Closed;
            } else if matches!(woke, Woke::Quiet) {
                woke = Woke::Wrote;
            }
        }
        woke
    }
}

/// Sends `file` from its position to what is written so far: spliced into
/// stdout when that is a pipe (upload-pack's, always), copied otherwise.
/// Returns the bytes sent.
fn send_written(file: &mut std::fs::File, out: &mut std::io::StdoutLock) -> std::io::Result<u64> {
    vole_pack_cache::splice_all(file, out)
}

/// The cache failed after `sent` bytes of the pack (the start of `file`,
/// open though the server may have removed it) went out to the client:
/// pack-objects runs here and, if its output starts with exactly those
/// bytes, the rest of it is sent. For the same request and repo
/// pack-objects writes the same pack as a rule (stored objects and deltas
/// are reused as they are); where it does not (a repack in between, a
/// delta search that came out differently), the request fails as it did
/// before this existed, rather than send a pack spliced from two.
fn resume_uncached(
    command: &[String],
    stdin: &[u8],
    mut file: std::fs::File,
    sent: u64,
) -> Result<(), String> {
    use std::io::{Seek, Write};
    let (program, args) = command
        .split_first()
        .ok_or("no pack-objects command given")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let mut input = child.stdin.take().expect("stdin is piped");
    let stdin = stdin.to_vec();
    let feed = std::thread::spawn(move || input.write_all(&stdin));
    let mut output = child.stdout.take().expect("stdout is piped");
    file.seek(std::io::SeekFrom::Start(0))
        .map_err(|e| format!("cannot reread the cached pack: {e}"))?;
    // The part already sent, compared 64 KiB at a time.
    let (mut ours, mut theirs) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    let mut left = sent;
    while left > 0 {
        let n = left.min(ours.len() as u64) as usize;
        let same = output.read_exact(&mut ours[..n]).is_ok()
            && file.read_exact(&mut theirs[..n]).is_ok()
            && ours[..n] == theirs[..n];
        if !same {
            let _ = child.kill();
            let _ = child.wait();
            return Err(
                "the pack cache failed while this pack was being sent, and pack-objects made a different pack".into(),
            );
        }
        left -= n as u64;
    }
    eprintln!(
        "vole: the pack cache could not keep this pack after {sent} bytes; pack-objects made the rest"
    );
    let mut out = std::io::stdout().lock();
    let copied = std::io::copy(&mut output, &mut out).and_then(|_| out.flush());
    let fed = feed.join().unwrap_or(Ok(()));
    match (copied, fed, child.wait()) {
        (Ok(()), Ok(()), Ok(status)) if status.success() => Ok(()),
        (Err(_), _, _) => Err("the client went away".into()),
        _ => Err("pack-objects failed".into()),
    }
}

/// What git would have run without the hook: `git pack-objects ARGS`,
/// fed `stdin`, its stdout and stderr git's.
fn run_pack_objects(command: &[String], stdin: &[u8]) -> ExitCode {
    use std::io::Write;
    let Some((program, args)) = command.split_first() else {
        eprintln!("vole: no pack-objects command given");
        return ExitCode::FAILURE;
    };
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            eprintln!("vole: cannot run {program}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let fed = child
        .stdin
        .take()
        .map(|mut pipe| pipe.write_all(stdin))
        .unwrap_or(Ok(()));
    match (fed, child.wait()) {
        (Ok(()), Ok(status)) if status.success() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
