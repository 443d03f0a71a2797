//! Clients that start a clone and then read it slower than the minimum
//! transfer rate lose their upload-pack slot within 40 s of falling under
//! it, however much the buffers between took at first, so a normal clone
//! gets a slot while they keep trying.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::*;

/// A clone's request sent in full, then its answer read at `rate` bytes a
/// second until it ends or `stop` is set (at most `bound`): how long the
/// server kept sending, and the bytes read.
fn slow_clone(
    addr: SocketAddr,
    want: &str,
    rate: usize,
    stop: &AtomicBool,
    bound: Duration,
) -> (Duration, usize) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/x-git-upload-pack-request\r\n\
         Content-Length: {}\r\n\r\n{want}",
        want.len()
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = vec![0u8; rate];
    let mut read = 0;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < bound {
        let second = Instant::now();
        let mut this_second = 0;
        while this_second < rate && second.elapsed() < Duration::from_secs(1) {
            match stream.read(&mut buf[..rate - this_second]) {
                Ok(0) | Err(_) if second.elapsed() < Duration::from_millis(400) => {
                    // The end (a cut, or an answer without a body), not a
                    // read timeout.
                    if this_second == 0 {
                        return (started.elapsed(), read);
                    }
                    break;
                }
                Ok(n) => this_second += n,
                Err(_) => {}
            }
        }
        read += this_second;
        std::thread::sleep(Duration::from_secs(1).saturating_sub(second.elapsed()));
    }
    (started.elapsed(), read)
}

#[test]
fn readers_at_2_kib_a_second_lose_their_slots_and_a_clone_gets_one_within_45_s() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    // The defaults (4 KiB/s over 30 s), four upload-pack slots.
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .args(["--upload-pack-limit", "4"])
        .start();
    let url = server.url("/alice/repo.git");
    let work = worktree(dir.path(), "work");
    // 32 MiB that do not compress: far more than the buffers hold.
    commit_file(&work, "big.bin", &random_bytes(32 << 20, 7));
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let head = git_ok(&work, &["rev-parse", "HEAD"]);
    let want = format!("0032want {}\n00000009done\n", head.trim());

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (stop, want, addr) = (stop.clone(), want.clone(), server.addr);
            std::thread::spawn(move || {
                slow_clone(addr, &want, 2048, &stop, Duration::from_secs(90))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    // A normal clone, tried again while the slots are busy (each try waits
    // the queue timeout for one).
    let (mut tries, mut cloned) = (0, false);
    while !cloned && started.elapsed() < Duration::from_secs(60) {
        tries += 1;
        let clone = dir.path().join(format!("clone{tries}"));
        let out = git(dir.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
        cloned = out.status.success();
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let ended: Vec<(Duration, usize)> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    assert!(cloned, "no clone got a slot in 60 s ({tries} tries)");
    assert!(
        took < Duration::from_secs(45),
        "the clone got a slot only after {took:?}: slow readers held the slots"
    );
    // Anti-vacuity: four readers did hold the slots (they read, and the
    // clone could not start before they were cut), and the server cut them
    // for their rate, each within 40 s.
    let served: Vec<_> = ended.iter().filter(|(_, bytes)| *bytes > 0).collect();
    assert!(served.len() >= 4, "readers served: {ended:?}");
    assert!(
        tries > 1,
        "the clone never waited: the readers held no slot"
    );
    for (lasted, bytes) in &served {
        assert!(
            *lasted < Duration::from_secs(41),
            "a reader that took {bytes} bytes kept its slot for {lasted:?}"
        );
    }
    let log = server.log.all();
    assert!(
        log.matches("client reads too slowly").count() >= 4,
        "the readers were not cut for their rate: {log}"
    );
    server.stop();
}
