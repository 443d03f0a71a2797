//! Tests of the log: framing bytes, mixed alignment, torn tails, group
//! commit built deterministically, durability across a simulated crash that
//! loses unsynced bytes, sync failure, compaction, and an external reader.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use vole_log::*;
// The log is generic; its tests drive it with the two real kinds.
use vole_hooks::{Phase, RefMove};
use vole_meta::MetaWrite;

pub(crate) fn ref_move(i: u64) -> RefMove {
    RefMove {
        time_ns: 1_764_000_000_000_000_000 + i as i64,
        repo: "alice/vole".into(),
        ref_name: "refs/heads/main".into(),
        old: Some(format!("{:040x}", i)),
        new: Some(format!("{:040x}", i + 1)),
        actor: "alice".into(),
        client: "127.0.0.1".into(),
        push_id: 1000 + i,
        phase: Phase::Prepared,
    }
}

fn txns(dir: &Path) -> Vec<(u64, Vec<RefMove>)> {
    let mut out = Vec::new();
    let (_log, _replay) = Log::<RefMove>::open(dir, |entry| {
        if let Entry::Txn { seq, rows } = entry {
            out.push((seq, rows));
        }
    })
    .expect("open");
    out
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn one_ref_move_is_framed_at_the_8_byte_alignment_within_680_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    let before = file_len(log.path());
    log.commit(&[ref_move(1)]).unwrap();
    let frame = file_len(log.path()) - before;
    assert!(
        frame <= 680,
        "one ref move framed to {frame} bytes (> 680): is the 8-byte alignment lost?"
    );
    assert_eq!(frame % 8, 0, "frames stay 8-aligned");
    // The same batch at arrow's default 64-byte alignment is much larger,
    // so the ceiling above can tell the two apart.
    let options = arrow_ipc::writer::IpcWriteOptions::default();
    let mut wide = Vec::new();
    let batch = RefMove::batch(&[ref_move(1)]).unwrap();
    let mut writer =
        arrow_ipc::writer::StreamWriter::try_new_with_options(&mut wide, &batch.schema(), options)
            .unwrap();
    let schema_len = writer.get_ref().len();
    writer.write(&batch).unwrap();
    let wide_frame = (writer.get_ref().len() - schema_len) as u64;
    assert!(
        wide_frame > 680,
        "64-aligned frame is {wide_frame} bytes: the ceiling no longer separates the alignments"
    );
}

/// Writes a log file the way arrow's own writer does at its default 64-byte
/// alignment, with vole's schema metadata.
fn plant_64_aligned_log(dir: &Path, rows: &[RefMove]) -> u64 {
    let path = dir.join(RefMove::FILE_NAME);
    let file = std::fs::File::create(&path).unwrap();
    let schema = RefMove::schema(1, 0);
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(file, &schema).unwrap();
    for row in rows {
        let batch =
            RecordBatch::try_new(schema.clone(), RefMove::columns(std::slice::from_ref(row)))
                .unwrap();
        writer.write(&batch).unwrap();
    }
    // No finish(): a log has no end-of-stream marker.
    writer.flush().unwrap();
    drop(writer);
    file_len(&path)
}

#[test]
fn a_64_byte_aligned_log_is_still_read_and_can_be_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let planted_len = plant_64_aligned_log(dir.path(), &[ref_move(1), ref_move(2)]);
    let (log, replay) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    assert_eq!(replay.txns, 2);
    assert!(replay.torn.is_none());
    let seq = log.commit(&[ref_move(3)]).unwrap();
    assert_eq!(seq, 3);
    let appended = file_len(log.path()) - planted_len;
    let mut frames = frame::FrameReader::new(std::fs::File::open(log.path()).unwrap());
    frames.next_frame().unwrap(); // schema
    let planted_frame = frames.next_frame().unwrap().unwrap().bytes.len() as u64;
    assert!(
        planted_frame > appended,
        "the planted frames ({planted_frame} B) are not larger than the appended one ({appended} B), so this log is NOT mixed-alignment"
    );
    drop(log);
    let all = txns(dir.path());
    assert_eq!(
        all.iter()
            .map(|(s, r)| (*s, r[0].push_id))
            .collect::<Vec<_>>(),
        vec![(1, 1001), (2, 1002), (3, 1003)]
    );
}

fn three_txn_log(dir: &Path) -> (u64, u64) {
    let (log, _) = Log::<RefMove>::open(dir, |_| {}).unwrap();
    log.commit(&[ref_move(1)]).unwrap();
    log.commit(&[ref_move(2), ref_move(3)]).unwrap();
    let before_last = file_len(log.path());
    log.commit(&[ref_move(4)]).unwrap();
    (before_last, file_len(log.path()))
}

#[test]
fn a_torn_tail_at_every_byte_of_the_last_frame_is_truncated_and_the_rest_survives() {
    let source = tempfile::tempdir().unwrap();
    let (last_start, full_len) = three_txn_log(source.path());
    let bytes = std::fs::read(source.path().join(RefMove::FILE_NAME)).unwrap();
    assert_eq!(bytes.len() as u64, full_len);
    for cut in last_start..full_len {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RefMove::FILE_NAME);
        std::fs::write(&path, &bytes[..cut as usize]).unwrap();
        let mut seen = Vec::new();
        let (log, replay) = Log::<RefMove>::open(dir.path(), |e| {
            if let Entry::Txn { seq, .. } = e {
                seen.push(seq)
            }
        })
        .unwrap_or_else(|e| panic!("cut at {cut}: open failed: {e}"));
        assert_eq!(seen, vec![1, 2], "cut at {cut}");
        let torn = replay.torn.clone();
        if cut == last_start {
            assert!(
                torn.is_none(),
                "cut exactly on a frame boundary is a clean end"
            );
        } else {
            let torn = torn.unwrap_or_else(|| panic!("cut at {cut}: torn tail not reported"));
            assert_eq!(torn.offset, last_start, "cut at {cut}");
        }
        assert_eq!(
            file_len(&path),
            last_start,
            "cut at {cut}: tail not truncated"
        );
        assert_eq!(log.commit(&[ref_move(9)]).unwrap(), 3, "cut at {cut}");
        drop(log);
        assert_eq!(
            txns(dir.path()).len(),
            3,
            "cut at {cut}: append after truncation"
        );
    }
}

#[test]
fn a_zero_filled_tail_is_truncated() {
    for (name, zero_from_inside_last_frame) in [("appended zeros", false), ("lost page", true)] {
        let dir = tempfile::tempdir().unwrap();
        let (last_start, full_len) = three_txn_log(dir.path());
        let path = dir.path().join(RefMove::FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        if zero_from_inside_last_frame {
            let from = (last_start + 40) as usize;
            bytes[from..].iter_mut().for_each(|b| *b = 0);
        }
        bytes.extend(std::iter::repeat_n(0u8, 4096));
        std::fs::write(&path, &bytes).unwrap();
        let mut count = 0;
        let (_log, replay) = Log::<RefMove>::open(dir.path(), |e| {
            if matches!(e, Entry::Txn { .. }) {
                count += 1
            }
        })
        .unwrap();
        let expect_txns = if zero_from_inside_last_frame { 2 } else { 3 };
        assert_eq!(count, expect_txns, "{name}");
        assert!(
            replay.torn.is_some(),
            "{name}: zero-filled tail not reported"
        );
        let expect_len = if zero_from_inside_last_frame {
            last_start
        } else {
            full_len
        };
        assert_eq!(file_len(&path), expect_len, "{name}");
    }
}

#[test]
fn a_corrupt_frame_in_the_middle_is_an_open_error_naming_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    log.commit(&[ref_move(1)]).unwrap();
    let second = file_len(log.path());
    log.commit(&[ref_move(2)]).unwrap();
    log.commit(&[ref_move(3)]).unwrap();
    drop(log);
    let path = dir.path().join(RefMove::FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[second as usize] = 0x17; // break the second frame's marker
    std::fs::write(&path, &bytes).unwrap();
    let err = Log::<RefMove>::open(dir.path(), |_| {}).unwrap_err();
    assert!(
        matches!(err, LogError::Corrupt { offset, .. } if offset == second),
        "expected corruption at {second}, got {err}"
    );
    assert!(
        err.to_string().contains(&format!("offset {second}")),
        "{err}"
    );
    assert_eq!(
        file_len(&path),
        bytes.len() as u64,
        "a corrupt log must not be truncated"
    );
}

#[test]
fn a_queue_of_writers_costs_exactly_one_sync() {
    const WRITERS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    let log = Arc::new(log);
    let syncs_before = log.gate().syncs();
    let hold = log.gate().hold();
    let handles: Vec<_> = (0..WRITERS as u64)
        .map(|i| {
            let log = log.clone();
            std::thread::spawn(move || log.commit(&[ref_move(i)]))
        })
        .collect();
    // Every frame reached the kernel and every writer is parked at the gate.
    let queued = log
        .gate()
        .wait_for_waiters(WRITERS, Duration::from_secs(30));
    let (written, durable) = log.watermarks();
    assert!(
        queued && written == WRITERS as u64,
        "only {written} of {WRITERS} frames reached the kernel in 30 s; the writers are not getting past the writer mutex, which means the sync is still inside it"
    );
    assert_eq!(durable, 0, "nothing may be durable while the gate is held");
    // Give any woken writer time to run: with nothing to wake them, none may.
    std::thread::sleep(Duration::from_millis(100));
    let wakeups = log.gate().state().wakeups();
    assert_eq!(
        wakeups, 0,
        "{wakeups} wake-ups while {WRITERS} writers only queued: a parking writer wakes the others (a thundering herd that costs group commit most of its gain on few cores)"
    );
    drop(hold);
    for handle in handles {
        handle.join().unwrap().unwrap();
    }
    let syncs = log.gate().syncs() - syncs_before;
    assert_eq!(
        syncs, 1,
        "{WRITERS} queued writers cost {syncs} syncs; group commit should make it one"
    );
    assert_eq!(log.counters().max_group, WRITERS as u64);
    assert_eq!(log.watermarks().1, WRITERS as u64);
}

/// A file layer that remembers how much was synced; `crash` throws away
/// every byte after that, as a power cut would.
struct CrashStorage {
    inner: FileStorage,
    path: std::path::PathBuf,
    written: AtomicU64,
    synced: AtomicU64,
}

impl LogStorage for CrashStorage {
    fn append(&self, parts: &[&[u8]]) -> std::io::Result<()> {
        self.inner.append(parts)?;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.written.fetch_add(len as u64, Ordering::SeqCst);
        Ok(())
    }
    fn sync(&self) -> std::io::Result<()> {
        let upto = self.written.load(Ordering::SeqCst);
        self.inner.sync()?;
        self.synced.fetch_max(upto, Ordering::SeqCst);
        Ok(())
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.inner.truncate(len)?;
        self.written.store(len, Ordering::SeqCst);
        self.synced.fetch_min(len, Ordering::SeqCst);
        Ok(())
    }
}

/// An opener that makes each file's layer with `make` and keeps every
/// layer it made, for the test to reach (the last is the live one).
fn recording_opener<S: LogStorage>(
    make: impl Fn(&Path) -> std::io::Result<S> + Send + Sync + 'static,
) -> (StorageOpener, Arc<Mutex<Vec<Arc<S>>>>) {
    let made: Arc<Mutex<Vec<Arc<S>>>> = Arc::default();
    let opener: StorageOpener = {
        let made = made.clone();
        Arc::new(move |path: &Path| {
            let storage = Arc::new(make(path)?);
            made.lock().unwrap().push(storage.clone());
            Ok(storage as Arc<dyn LogStorage>)
        })
    };
    (opener, made)
}

impl CrashStorage {
    fn crash(&self) -> u64 {
        let synced = self.synced.load(Ordering::SeqCst);
        let written = self.written.load(Ordering::SeqCst);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .unwrap()
            .set_len(synced)
            .unwrap();
        written - synced
    }
}

#[test]
fn a_crash_that_loses_unsynced_bytes_loses_no_acknowledged_transaction() {
    const WRITERS: u64 = 8;
    const PER_WRITER: u64 = 50;
    let dir = tempfile::tempdir().unwrap();
    let (opener, storages) = recording_opener(|path| {
        Ok(CrashStorage {
            inner: FileStorage::open(path)?,
            path: path.to_path_buf(),
            written: AtomicU64::new(std::fs::metadata(path)?.len()),
            synced: AtomicU64::new(std::fs::metadata(path)?.len()),
        })
    });
    let (log, _) = Log::<RefMove>::open_with(dir.path(), opener, |_| {}).unwrap();
    let log = Arc::new(log);
    let acked: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (log, acked) = (log.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0..PER_WRITER {
                    let id = w * 1000 + i;
                    let seq = log.commit(&[ref_move(id)]).unwrap();
                    acked.lock().unwrap().insert(seq, id + 1000);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    // Frames written but never waited for: the crash must drop them, or the
    // test would observe nothing.
    let _hold = log.gate().hold();
    for i in 0..5 {
        log.append(&[ref_move(900_000 + i)]).unwrap();
    }
    let storage = storages.lock().unwrap().last().unwrap().clone();
    let lost = storage.crash();
    assert!(
        lost > 0,
        "the simulated crash dropped nothing; this test would be vacuous"
    );
    drop(_hold);

    let found: HashMap<u64, u64> = txns(dir.path())
        .into_iter()
        .map(|(seq, rows)| (seq, rows[0].push_id))
        .collect();
    let acked = acked.lock().unwrap();
    assert_eq!(acked.len() as u64, WRITERS * PER_WRITER);
    let missing: Vec<_> = acked
        .iter()
        .filter(|(seq, id)| found.get(seq) != Some(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged transactions lost at the crash (e.g. {:?}): an ack was given before its bytes were synced",
        missing.len(),
        missing.iter().take(3).collect::<Vec<_>>()
    );
}

struct FailingSync(FileStorage);

impl LogStorage for FailingSync {
    fn append(&self, parts: &[&[u8]]) -> std::io::Result<()> {
        self.0.append(parts)
    }
    fn sync(&self) -> std::io::Result<()> {
        Err(std::io::Error::other("simulated EIO"))
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.0.truncate(len)
    }
}

#[test]
fn a_failed_sync_fails_every_waiter_and_later_appends() {
    let dir = tempfile::tempdir().unwrap();
    Log::<RefMove>::open(dir.path(), |_| {}).unwrap(); // create the file
    let fail_now = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opener: StorageOpener = {
        let fail_now = fail_now.clone();
        Arc::new(move |path: &Path| {
            let inner = FileStorage::open(path)?;
            Ok(if fail_now.load(Ordering::SeqCst) {
                Arc::new(FailingSync(inner)) as Arc<dyn LogStorage>
            } else {
                Arc::new(inner)
            })
        })
    };
    fail_now.store(true, Ordering::SeqCst);
    let err = Log::<RefMove>::open_with(dir.path(), opener, |_| {}).unwrap_err();
    assert!(
        err.to_string().contains("simulated EIO"),
        "open must sync too: {err}"
    );

    // A log whose sync starts failing after open.
    struct FlakySync(FileStorage, std::sync::atomic::AtomicBool);
    impl LogStorage for FlakySync {
        fn append(&self, parts: &[&[u8]]) -> std::io::Result<()> {
            self.0.append(parts)
        }
        fn sync(&self) -> std::io::Result<()> {
            if self.1.load(Ordering::SeqCst) {
                Err(std::io::Error::other("simulated EIO"))
            } else {
                self.0.sync()
            }
        }
        fn truncate(&self, len: u64) -> std::io::Result<()> {
            self.0.truncate(len)
        }
    }
    let flaky: Arc<Mutex<Option<Arc<FlakySync>>>> = Arc::default();
    let opener: StorageOpener = {
        let flaky = flaky.clone();
        Arc::new(move |path: &Path| {
            let s = Arc::new(FlakySync(FileStorage::open(path)?, false.into()));
            *flaky.lock().unwrap() = Some(s.clone());
            Ok(s as Arc<dyn LogStorage>)
        })
    };
    let (log, _) = Log::<RefMove>::open_with(dir.path(), opener, |_| {}).unwrap();
    let log = Arc::new(log);
    flaky
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .1
        .store(true, Ordering::SeqCst);
    let hold = log.gate().hold();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let log = log.clone();
            std::thread::spawn(move || log.commit(&[ref_move(i)]))
        })
        .collect();
    assert!(log.gate().wait_for_waiters(4, Duration::from_secs(30)));
    drop(hold);
    for handle in handles {
        let result = handle.join().unwrap();
        assert!(
            matches!(&result, Err(LogError::Failed { why: Failure::Sync(e), .. }) if e.to_string() == "simulated EIO"),
            "every waiter of the failed group must get the error, got {result:?}"
        );
    }
    let refused = log.append(&[ref_move(99)]).unwrap_err();
    assert!(refused.to_string().contains("refuses appends"), "{refused}");
}

#[test]
fn compaction_keeps_unapplied_records_carries_a_checkpoint_and_rebinds_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    // Count syncs per inode.
    let syncs: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
    struct Counting(FileStorage, u64, Arc<Mutex<HashMap<u64, u64>>>);
    impl LogStorage for Counting {
        fn append(&self, parts: &[&[u8]]) -> std::io::Result<()> {
            self.0.append(parts)
        }
        fn sync(&self) -> std::io::Result<()> {
            *self.2.lock().unwrap().entry(self.1).or_default() += 1;
            self.0.sync()
        }
        fn truncate(&self, len: u64) -> std::io::Result<()> {
            self.0.truncate(len)
        }
    }
    let opener: StorageOpener = {
        let syncs = syncs.clone();
        Arc::new(move |path: &Path| {
            let inner = FileStorage::open(path)?;
            let ino = std::fs::metadata(path)?.ino();
            Ok(Arc::new(Counting(inner, ino, syncs.clone())) as Arc<dyn LogStorage>)
        })
    };
    let (log, _) = Log::<RefMove>::open_with(dir.path(), opener, |_| {}).unwrap();
    for i in 1..=10 {
        log.commit(&[ref_move(i)]).unwrap();
    }
    let refused = log.compact(6, &[]).unwrap_err();
    assert!(
        matches!(
            refused,
            LogError::NotApplied {
                requested: 6,
                applied: 0
            }
        ),
        "{refused}"
    );
    log.mark_applied(6);
    let mut checkpoint = ref_move(5);
    checkpoint.phase = Phase::Checkpoint;
    let report = log.compact(6, &[checkpoint.clone()]).unwrap();
    assert!(report.bytes_after < report.bytes_before);
    assert_eq!(report.base_seq, 7);

    // After the swap, a commit must sync the file now at the path.
    let ino_now = std::fs::metadata(log.path()).unwrap().ino();
    let before = syncs.lock().unwrap().get(&ino_now).copied().unwrap_or(0);
    assert_eq!(log.commit(&[ref_move(11)]).unwrap(), 11);
    let after = syncs.lock().unwrap().get(&ino_now).copied().unwrap_or(0);
    assert_eq!(
        after,
        before + 1,
        "the sync after compaction did not reach the new file (inode {ino_now}): the gate still points at the old, unlinked inode"
    );
    drop(log);

    let mut checkpoints = Vec::new();
    let mut seen = Vec::new();
    Log::<RefMove>::open(dir.path(), |e| match e {
        Entry::Checkpoint(rows) => checkpoints.extend(rows),
        Entry::Txn { seq, rows } => seen.push((seq, rows[0].push_id)),
    })
    .unwrap();
    assert_eq!(checkpoints, vec![checkpoint]);
    assert_eq!(
        seen,
        vec![(7, 1007), (8, 1008), (9, 1009), (10, 1010), (11, 1011)]
    );
}

#[test]
fn pyarrow_reads_the_log_with_the_right_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    log.commit(&[ref_move(1)]).unwrap();
    let mut created = ref_move(2);
    created.old = None;
    created.phase = Phase::Committed;
    log.commit(&[created, ref_move(3)]).unwrap();
    // A change of HEAD: its own phase, the branch HEAD now names.
    let mut head = ref_move(5);
    head.ref_name = "refs/heads/master".into();
    head.old = None;
    head.phase = Phase::Head;
    log.commit(&[head]).unwrap();
    let script = r#"
import sys, pyarrow as pa, pyarrow.ipc as ipc
reader = ipc.open_stream(open(sys.argv[1], 'rb'))
meta = {k.decode(): v.decode() for k, v in reader.schema.metadata.items()}
batches = list(reader)
print("batches", len(batches))
print("kind", meta["vole.kind"], "base", meta["vole.base_seq"], "type", reader.schema.field("time").type)
for b in batches:
    cols = {n: b.column(n).to_pylist() for n in b.schema.names if n != "time"}
    cols["time"] = b.column("time").cast(pa.int64()).to_pylist()
    for i in range(b.num_rows):
        row = {n: cols[n][i] for n in cols}
        old = row["old"].hex() if any(row["old"]) else "none"
        print(row["repo"], row["ref"], old, row["new"].hex(), row["actor"], row["push_id"], row["phase"], row["time"])
"#;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(log.path())
        .output()
        .expect("python3 must be installed (.ci/run installs pyarrow)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pyarrow could not read the log: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let oid = |n: u64| format!("{n:040x}");
    let expected = format!(
        "batches 3\nkind ref_move base 1 type timestamp[ns, tz=UTC]\n\
         alice/vole refs/heads/main {} {} alice@127.0.0.1 1001 0 1764000000000000001\n\
         alice/vole refs/heads/main none {} alice@127.0.0.1 1002 1 1764000000000000002\n\
         alice/vole refs/heads/main {} {} alice@127.0.0.1 1003 0 1764000000000000003\n\
         alice/vole refs/heads/master none {} alice@127.0.0.1 1005 6 1764000000000000005\n",
        oid(1),
        oid(2),
        oid(3),
        oid(3),
        oid(4),
        oid(6),
    );
    assert_eq!(stdout, expected);
}

/// Set in the child of the kill -9 test: the log dir it writes to.
const KILL9_CHILD_ENV: &str = "VOLE_TEST_KILL9_LOG_DIR";

#[test]
fn a_kill_9_after_acknowledgement_loses_no_acknowledged_transaction() {
    use std::io::BufRead;
    if let Some(dir) = std::env::var_os(KILL9_CHILD_ENV) {
        // The child: commit until killed (bounded), announcing each ack.
        let (log, _) = Log::<RefMove>::open(Path::new(&dir), |_| {}).unwrap();
        let mut out = std::io::stdout().lock();
        for i in 0..100_000u64 {
            let seq = log.commit(&[ref_move(i)]).unwrap();
            writeln!(out, "acked {seq} {}", 1000 + i).unwrap();
            out.flush().unwrap();
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_kill_9_after_acknowledgement_loses_no_acknowledged_transaction",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(KILL9_CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut lines = stdout.lines();
    while acked.len() < 300 {
        let line = lines
            .next()
            .expect("the child stopped before 300 acks")
            .unwrap();
        if let Some(rest) = line.strip_prefix("acked ") {
            let (seq, id) = rest.split_once(' ').unwrap();
            acked.insert(seq.parse().unwrap(), id.parse().unwrap());
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Acks printed before the kill landed are acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("acked ") {
            let (seq, id) = rest.split_once(' ').unwrap();
            acked.insert(seq.parse().unwrap(), id.parse().unwrap());
        }
    }
    let found: HashMap<u64, u64> = txns(dir.path())
        .into_iter()
        .map(|(seq, rows)| (seq, rows[0].push_id))
        .collect();
    let lost: Vec<_> = acked
        .iter()
        .filter(|(s, id)| found.get(s) != Some(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged transactions lost after kill -9: {:?}",
        lost.len(),
        &lost[..lost.len().min(3)]
    );
    assert!(found.len() >= acked.len());
}

/// Counts appends; fails (after writing half the bytes) once `fail` is set.
struct CountingStorage {
    file: FileStorage,
    appends: AtomicU64,
    fail: std::sync::atomic::AtomicBool,
}

impl LogStorage for CountingStorage {
    fn append(&self, parts: &[&[u8]]) -> std::io::Result<()> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            let bytes = parts.concat();
            self.file.append(&[&bytes[..bytes.len() / 2]])?;
            return Err(std::io::Error::other("simulated ENOSPC"));
        }
        self.file.append(parts)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.file.sync()
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.file.truncate(len)
    }
}

#[test]
fn frames_appended_together_take_one_write_and_stay_separate_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let (opener, storages) = recording_opener(|path| {
        Ok(CountingStorage {
            file: FileStorage::open(path)?,
            appends: AtomicU64::new(0),
            fail: false.into(),
        })
    });
    let (log, _) = Log::<RefMove>::open_with(dir.path(), opener, |_| {}).unwrap();
    let storage = storages.lock().unwrap().last().unwrap().clone();
    let before = storage.appends.load(Ordering::SeqCst);
    let frames = (1..=3)
        .map(|i| log.encode(&[ref_move(i)]).unwrap())
        .collect();
    let first = log.append_encoded_all(frames).unwrap();
    assert_eq!(
        storage.appends.load(Ordering::SeqCst) - before,
        1,
        "three frames appended together must take one write"
    );
    log.wait_durable(first + 2).unwrap();
    assert_eq!(log.watermarks(), (first + 2, first + 2));
    let len = file_len(log.path());

    // A write that fails half way appends none of its frames.
    storage.fail.store(true, Ordering::SeqCst);
    let frames = (4..=5)
        .map(|i| log.encode(&[ref_move(i)]).unwrap())
        .collect();
    let err = log.append_encoded_all(frames).unwrap_err();
    assert!(err.to_string().contains("simulated ENOSPC"), "{err}");
    assert_eq!(
        file_len(log.path()),
        len,
        "the half-written frames were undone"
    );
    drop(log);

    let found = txns(dir.path());
    assert_eq!(
        found
            .iter()
            .map(|(seq, rows)| (*seq, rows[0].push_id))
            .collect::<Vec<_>>(),
        vec![(first, 1001), (first + 1, 1002), (first + 2, 1003)],
        "each frame is its own transaction, in order, and nothing of the failed write"
    );
}

#[test]
fn an_append_of_more_parts_than_one_writev_takes_writes_them_all_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("parts");
    let storage = storage::FileStorage::open(&path).unwrap();
    // Linux takes at most 1,024 slices per writev (IOV_MAX).
    let parts: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("{i},").into_bytes()).collect();
    let slices: Vec<&[u8]> = parts.iter().map(|p| p.as_slice()).collect();
    storage.append(&slices).expect("an append of 3,000 parts");
    storage.append(&[b"end"]).unwrap();
    let expected = [parts.concat(), b"end".to_vec()].concat();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        expected,
        "the file does not hold every part once, in order"
    );
}

#[test]
fn a_meta_write_laid_out_directly_encodes_to_the_bytes_arrow_writes() {
    let row = |i: usize, body: &str| MetaWrite {
        time_ns: 1_764_000_000_000_000_000 + i as i64,
        repo: format!("team/repo-{i}"),
        entity_id: format!("01KB{i:022}"),
        shard: (i * 37 % 256) as u8,
        kind: if i.is_multiple_of(2) {
            "issue"
        } else {
            "comment"
        }
        .into(),
        body: body.into(),
        incarnation: if i.is_multiple_of(3) {
            String::new()
        } else {
            format!("01KC{i:022}")
        },
    };
    let cases: Vec<Vec<MetaWrite>> = vec![
        vec![row(1, r#"{"v":1,"title":"one row"}"#)],
        vec![row(2, "")],
        vec![
            row(3, "naïve ✓ ünïcode"),
            row(4, &"x".repeat(1000)),
            row(5, "seven"),
        ],
    ];
    for rows in cases {
        let by_arrow = frame::FrameEncoder::new()
            .batch(&MetaWrite::batch(&rows).unwrap())
            .unwrap();
        let laid_out = frame::FrameEncoder::new().body(&MetaWrite::body(&rows).unwrap());
        assert_eq!(
            laid_out,
            by_arrow,
            "the directly laid-out frame of {} row(s) differs from arrow's encoding",
            rows.len()
        );
    }
}

#[test]
fn pyarrow_reads_the_meta_log_with_the_right_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<MetaWrite>::open(dir.path(), |_| {}).unwrap();
    let write = |i: i64, body: &str| MetaWrite {
        time_ns: 1_764_000_000_000_000_000 + i,
        repo: "alice/vole".into(),
        entity_id: format!("01KB00000000000000000000{i:02}"),
        shard: (i * 100 % 256) as u8,
        kind: "issue".into(),
        body: body.into(),
        incarnation: format!("01KC00000000000000000000{i:02}"),
    };
    log.commit(&[write(1, r#"{"v":1,"title":"first"}"#)])
        .unwrap();
    log.commit(&[write(2, "naïve ✓"), write(3, "")]).unwrap();
    let script = r#"
import sys, pyarrow as pa, pyarrow.ipc as ipc
reader = ipc.open_stream(open(sys.argv[1], 'rb'))
batches = list(reader)
print("batches", len(batches), "type", reader.schema.field("time").type)
for b in batches:
    cols = {n: b.column(n).to_pylist() for n in b.schema.names if n != "time"}
    cols["time"] = b.column("time").cast(pa.int64()).to_pylist()
    for i in range(b.num_rows):
        print(*(repr(cols[n][i]) for n in ["time", "repo", "entity_id", "shard", "kind", "body", "incarnation"]))
"#;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(log.path())
        .output()
        .expect("python3 must be installed (.ci/run installs pyarrow)");
    assert!(
        output.status.success(),
        "pyarrow could not read the meta log: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = "batches 2 type timestamp[ns, tz=UTC]\n\
         1764000000000000001 'alice/vole' '01KB0000000000000000000001' 100 'issue' '{\"v\":1,\"title\":\"first\"}' '01KC0000000000000000000001'\n\
         1764000000000000002 'alice/vole' '01KB0000000000000000000002' 200 'issue' 'naïve ✓' '01KC0000000000000000000002'\n\
         1764000000000000003 'alice/vole' '01KB0000000000000000000003' 44 'issue' '' '01KC0000000000000000000003'\n";
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        expected,
        "pyarrow read other rows from the meta log than were committed"
    );
}

/// A meta log as vole wrote it before incarnations (schema version 1:
/// no `incarnation` column), `txns` one-row transactions.
fn plant_version_1_meta_log(dir: &Path, txns: usize) -> Vec<MetaWrite> {
    let fields = MetaWrite::previous_fields().unwrap();
    let metadata = HashMap::from([
        ("vole.kind".to_string(), "meta_write".to_string()),
        ("vole.schema_version".to_string(), "1".to_string()),
        ("vole.base_seq".to_string(), "1".to_string()),
        ("vole.checkpoint_frames".to_string(), "0".to_string()),
    ]);
    let schema = Arc::new(arrow_schema::Schema::new_with_metadata(fields, metadata));
    let mut encoder = frame::FrameEncoder::new();
    let mut bytes = encoder.schema(&schema);
    let rows: Vec<MetaWrite> = (0..txns)
        .map(|i| MetaWrite {
            time_ns: 1_764_000_000_000_000_000 + i as i64,
            repo: "alice/old".into(),
            entity_id: format!("01KB{i:022}"),
            shard: i as u8,
            kind: "issue".into(),
            body: format!(r#"{{"v":1,"n":{i}}}"#),
            incarnation: String::new(),
        })
        .collect();
    for row in &rows {
        let columns = MetaWrite::columns(std::slice::from_ref(row));
        let batch = RecordBatch::try_new(
            Arc::new(arrow_schema::Schema::new(
                MetaWrite::previous_fields().unwrap(),
            )),
            columns[..6].to_vec(),
        )
        .unwrap();
        bytes.extend(encoder.batch(&batch).unwrap());
    }
    std::fs::write(dir.join(MetaWrite::FILE_NAME), bytes).unwrap();
    rows
}

#[test]
fn a_log_of_the_previous_schema_is_read_rewritten_to_the_current_one_and_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let planted = plant_version_1_meta_log(dir.path(), 3);
    let mut seen = Vec::new();
    let (log, replay) = Log::<MetaWrite>::open(dir.path(), |entry| {
        if let Entry::Txn { seq, rows } = entry {
            seen.push((seq, rows));
        }
    })
    .unwrap();
    assert!(
        replay.previous_schema,
        "the planted file is not of version 1"
    );
    assert_eq!(
        seen,
        planted
            .iter()
            .enumerate()
            .map(|(i, row)| (i as u64 + 1, vec![row.clone()]))
            .collect::<Vec<_>>(),
        "the version 1 records, read with an empty incarnation"
    );
    let mut row = planted[0].clone();
    row.incarnation = "01KC0000000000000000000000".into();
    assert_eq!(log.commit(&[row.clone()]).unwrap(), 4);
    drop(log);
    // Read again: one file of the current schema, every transaction kept.
    let mut again = Vec::new();
    let (_, replay) = Log::<MetaWrite>::open(dir.path(), |entry| {
        if let Entry::Txn { seq, rows } = entry {
            again.push((seq, rows));
        }
    })
    .unwrap();
    assert!(!replay.previous_schema, "the file was not rewritten");
    assert_eq!(again.len(), 4);
    assert_eq!(again[3], (4, vec![row]));
    assert_eq!(again[..3], seen[..]);
    assert!(
        !dir.path().join("meta.arrow.upgrade").exists(),
        "the rewrite's temporary file was left behind"
    );
}

#[test]
fn appends_go_on_while_a_compaction_copies_and_none_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    let log = Arc::new(log);
    for i in 0..100 {
        log.commit(&[ref_move(i)]).unwrap();
    }
    log.mark_applied(100);
    // Between the copy and the swap, five appends from another thread:
    // they finish only if the copy held no lock they need.
    let finished = Arc::new(AtomicU64::new(0));
    let seen_in_pause = Arc::new(AtomicU64::new(0));
    {
        let (log2, finished, seen) = (log.clone(), finished.clone(), seen_in_pause.clone());
        log.set_between_phases(Some(Box::new(move || {
            let (log3, counted) = (log2.clone(), finished.clone());
            let appender = std::thread::spawn(move || {
                for i in 100..105 {
                    log3.commit(&[ref_move(i)]).unwrap();
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            });
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while finished.load(Ordering::SeqCst) < 5 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            seen.store(finished.load(Ordering::SeqCst), Ordering::SeqCst);
            drop(appender);
        })));
    }
    let report = log.compact(100, &[]).unwrap();
    assert_eq!(
        seen_in_pause.load(Ordering::SeqCst),
        5,
        "appends waited for the compaction's copy (it held the writer)"
    );
    assert_eq!(report.base_seq, 101);
    log.commit(&[ref_move(105)]).unwrap();
    log.set_between_phases(None);
    drop(log);
    let seqs: Vec<u64> = txns(dir.path()).into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(
        seqs,
        (101..=106).collect::<Vec<_>>(),
        "a record appended during the compaction was lost"
    );
}

#[test]
fn a_compaction_keeps_what_a_reader_holding_the_log_has_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    for i in 1..=10 {
        log.commit(&[ref_move(i)]).unwrap();
    }
    log.mark_applied(10);
    let read_through = Arc::new(AtomicU64::new(4));
    log.hold_for_reader(read_through.clone());
    let report = log.compact(10, &[]).unwrap();
    assert_eq!(
        report.base_seq, 5,
        "the compaction dropped transactions the reader holding the log had not read"
    );
    drop(log);
    let kept: Vec<u64> = txns(dir.path()).iter().map(|(seq, _)| *seq).collect();
    assert_eq!(kept, (5..=10).collect::<Vec<_>>());
    // Once the reader moves on, the next compaction drops what it read.
    let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
    log.mark_applied(10);
    read_through.store(8, Ordering::Release);
    log.hold_for_reader(read_through);
    assert_eq!(log.compact(10, &[]).unwrap().base_seq, 9);
}
