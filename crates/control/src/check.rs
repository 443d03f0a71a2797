//! `vole check`: a data dir's consistency, read only (safe beside a running
//! server, and what a restored backup is checked with).
//!
//! - every repo (and the system repo) passes `git fsck`;
//! - every frame of every log reads back (a torn tail, which the next start
//!   cuts off, is a note, not a problem);
//! - every metadata shard ref agrees with the meta log: a tip ahead of the
//!   log's last write, or behind a write the log marks applied (the
//!   sequence the server persists beside it, `log::read_applied`), is
//!   wrong; a tip behind writes not yet applied is normal (the server
//!   folds them);
//! - every ref agrees with its last committed move in the ref log (a move
//!   prepared without an outcome yet may have left either value);
//! - no two users share an email (emails are unique since display names
//!   came; older duplicates are listed, and signing in by such an email
//!   is refused until one user's is changed).
//!
//! Beside a running server the check writes nothing, but a push or fold
//! landing between its reading of the logs and of the refs can show as a
//! problem: run it again before acting on one (a restored backup or a
//! stopped server has no such race). Once the meta log is compacted, a
//! shard ref behind a write already dropped from it cannot be told. Frames
//! carry no checksum: a well-formed frame is also checked record by record
//! (object ids, repo and ref names, JSON documents), so garbage is found,
//! but a change that leaves a valid record (one hex digit for another) is
//! not.
//!
//! What does not live here: the CLI's printing (`cli`), repairs (the
//! server reconciles refs and re-folds metadata at start).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use vole_accounts::audit::AuditEvent;
use vole_git::Git;
use vole_git::datadir::DataDir;
use vole_hooks::recorder::RefState;
use vole_hooks::{Phase, RefMove};
use vole_log::{Entry, RecordKind};
use vole_meta::MetaWrite;
use vole_meta::shard::{SHARD_REF_PREFIX, SHARDS};

/// What a check found.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Each a line a person can act on; any makes the check fail.
    pub problems: Vec<String>,
    /// Worth saying, not wrong (a torn tail, writes not yet folded).
    pub notes: Vec<String>,
    pub repos: usize,
    pub log_frames: u64,
}

/// Per repo and shard: the highest write the meta log marks applied, and
/// the highest write of all.
#[derive(Debug, Default, Clone, Copy)]
struct ShardWrites {
    applied: Option<u64>,
    last: u64,
}

/// Checks the data dir at `data` (see the module doc).
pub fn check(data: &DataDir, git: &Git) -> CheckReport {
    let mut report = CheckReport::default();
    let log_dir = data.log_dir();
    let repos = super::repos_on_disk(data);
    report.repos = repos.len();
    // What is recorded of a repo is checked against it only when it is of
    // its incarnation (a deleted repo's records are not its successor's).
    let incarnations: HashMap<String, vole_git::repos::Incarnation> = repos
        .iter()
        .filter_map(|(name, dir)| {
            Some((name.clone(), vole_git::repos::Incarnation::read(dir).ok()??))
        })
        .collect();

    // The logs, read back whole.
    let mut ref_state = RefState::default();
    let refs_read = read_log::<RefMove>(&log_dir, &mut report, valid_ref_move, |entry| {
        ref_state.apply(entry)
    });
    ref_state.settle(|name| incarnations.get(name).cloned());
    let meta_file = log_dir.join(MetaWrite::FILE_NAME);
    let applied = vole_log::read_applied(&meta_file);
    let mut writes: HashMap<(String, u8), ShardWrites> = HashMap::new();
    // The users as the log last wrote them (a write not folded yet is not
    // in the shard refs).
    let mut logged_users: HashMap<String, String> = HashMap::new();
    let meta_last = read_log::<MetaWrite>(&log_dir, &mut report, valid_meta_write, |entry| {
        if let Entry::Txn { seq, rows } = entry {
            for row in rows {
                if row.repo == vole_meta::SYSTEM && row.kind == "user" {
                    logged_users.insert(row.entity_id.clone(), row.body.clone());
                }
                if incarnations
                    .get(&row.repo)
                    .is_some_and(|i| !i.owns(Some(&row.incarnation)))
                {
                    continue;
                }
                let shard = writes.entry((row.repo, row.shard)).or_default();
                shard.last = shard.last.max(seq);
                if seq <= applied {
                    shard.applied = Some(shard.applied.map_or(seq, |s| s.max(seq)));
                }
            }
        }
    });
    read_log::<AuditEvent>(&log_dir, &mut report, valid_audit_event, |_| {});

    let mut unfolded = 0u64;
    for (name, dir) in &repos {
        fsck(git, name, dir, &mut report);
        if let Some(meta_last) = meta_last {
            check_shards(name, dir, meta_last, &writes, &mut unfolded, &mut report);
        }
        if name != vole_meta::SYSTEM && refs_read.is_some() {
            check_refs(git, name, dir, &ref_state, &mut report);
        }
    }
    if let Some((_, system)) = repos.iter().find(|(name, _)| name == vole_meta::SYSTEM) {
        check_emails(system, &logged_users, &mut report);
    }
    check_persisted_index(&log_dir, &repos, &mut report);
    if unfolded > 0 {
        report.notes.push(format!(
            "{unfolded} shard{} behind metadata writes not yet folded (normal: the server folds them)",
            if unfolded == 1 { " is" } else { "s are" }
        ));
    }
    for pending in ref_state.pending_moves() {
        report.notes.push(format!(
            "{}: {} has a move prepared without an outcome (a push in flight, or one the next start settles)",
            pending.repo, pending.ref_name
        ));
    }
    report
}

/// Reads every frame of `K`'s log; a corrupt frame is a problem, a torn
/// tail a note. Returns the last transaction's sequence; `None` when the
/// log could not be read through (what it would be compared with is then
/// not judged: its one problem is said).
fn read_log<K: RecordKind>(
    dir: &Path,
    report: &mut CheckReport,
    valid: fn(&K) -> Result<(), String>,
    mut visit: impl FnMut(Entry<K>),
) -> Option<u64> {
    let path = dir.join(K::FILE_NAME);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(0),
        Err(e) => {
            report
                .problems
                .push(format!("log {}: cannot be read: {e}", path.display()));
            return None;
        }
    };
    // A frame can be well formed and still hold garbage (frames carry no
    // checksum): every row is also checked for what its kind must be.
    // The first few, and a count: a log of garbage holds no more in memory.
    let mut bad_rows = Vec::new();
    let mut more_bad = 0usize;
    let replayed = vole_log::replay_with_ends::<K, _>(
        &path,
        std::io::BufReader::new(file),
        |entry, (offset, _)| {
            let rows = match &entry {
                Entry::Checkpoint(rows) | Entry::Txn { rows, .. } => rows,
            };
            if let Some(why) = rows.iter().find_map(|row| valid(row).err()) {
                if bad_rows.len() < MAX_BAD_ROWS_SHOWN {
                    bad_rows.push((offset, why));
                } else {
                    more_bad += 1;
                }
            }
            visit(entry);
        },
    );
    for (offset, why) in &bad_rows {
        report.problems.push(format!(
            "log {} is corrupt at byte offset {offset}: a record {why}",
            path.display()
        ));
    }
    if more_bad > 0 {
        report.problems.push(format!(
            "log {}: {more_bad} more corrupt records",
            path.display()
        ));
    }
    match replayed {
        Ok(replay) => {
            report.log_frames += replay.checkpoint_frames + replay.txns;
            if let Some(torn) = &replay.torn {
                report.notes.push(format!(
                    "log {}: a torn tail of {} bytes at byte offset {} ({}); the next start cuts it off",
                    path.display(),
                    torn.dropped_bytes,
                    torn.offset,
                    torn.reason
                ));
            }
            Some(replay.last_seq())
        }
        Err(e) => {
            report.problems.push(e.to_string());
            None
        }
    }
}

/// Corrupt records named one by one, per log; the rest are counted.
const MAX_BAD_ROWS_SHOWN: usize = 10;

fn object_id(value: &Option<String>) -> bool {
    value.as_ref().is_none_or(|id| {
        (id.len() == 40 || id.len() == 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

fn valid_ref_move(row: &RefMove) -> Result<(), String> {
    vole_git::repos::RepoName::parse(&row.repo)
        .map_err(|_| format!("names no repository ({:?})", row.repo))?;
    let marks_incarnation = matches!(row.phase, Phase::Born | Phase::Adopted);
    if marks_incarnation {
        // `ref` holds the incarnation's id, and the row moves nothing.
        if ulid::Ulid::from_string(&row.ref_name).is_err() || row.old.is_some() || row.new.is_some()
        {
            return Err(format!("names no incarnation ({:?})", row.ref_name));
        }
    } else if !(row.ref_name.starts_with("refs/")
        || row.ref_name == "HEAD"
        // A gc's row names no ref: it moved none.
        || (row.phase == Phase::Gc && row.ref_name.is_empty()))
    {
        return Err(format!("names no ref ({:?})", row.ref_name));
    }
    if !object_id(&row.old) || !object_id(&row.new) {
        return Err(format!("of {} holds no object id", row.ref_name));
    }
    if row.time_ns <= 0 || row.actor.is_empty() {
        return Err("has no time or actor".into());
    }
    Ok(())
}

fn valid_meta_write(row: &MetaWrite) -> Result<(), String> {
    if row.repo != vole_meta::SYSTEM && vole_git::repos::RepoName::parse(&row.repo).is_err() {
        return Err(format!("names no repository ({:?})", row.repo));
    }
    if row.entity_id.is_empty() || row.kind.is_empty() {
        return Err("has no entity id or kind".into());
    }
    match serde_json::from_str::<serde_json::Value>(&row.body) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(format!("of {} holds no JSON document", row.entity_id)),
    }
}

fn valid_audit_event(row: &AuditEvent) -> Result<(), String> {
    if row.time_ns <= 0 || row.event.is_empty() || !row.event.is_ascii() {
        return Err("has no time or event".into());
    }
    Ok(())
}

fn fsck(git: &Git, name: &str, dir: &Path, report: &mut CheckReport) {
    let mut command = git.command();
    command.arg("--git-dir").arg(dir);
    // The same quirks a push is not refused for.
    for id in vole_git::FSCK_IGNORED {
        command.arg("-c").arg(format!("fsck.{id}=ignore"));
    }
    command.args(["fsck", "--no-progress", "--no-dangling", "--strict"]);
    match command.output() {
        Ok(output) if output.status.success() => {}
        Ok(output) => {
            let said: Vec<String> = String::from_utf8_lossy(&output.stdout)
                .lines()
                .chain(String::from_utf8_lossy(&output.stderr).lines())
                .filter(|line| !line.trim().is_empty())
                .map(str::to_string)
                .collect();
            if said.is_empty() {
                report
                    .problems
                    .push(format!("{name}: git fsck failed ({})", output.status));
            }
            for line in said {
                report.problems.push(format!("{name}: git fsck: {line}"));
            }
        }
        Err(e) => report
            .problems
            .push(format!("{name}: cannot run git fsck: {e}")),
    }
}

fn check_shards(
    name: &str,
    dir: &Path,
    meta_last: u64,
    writes: &HashMap<(String, u8), ShardWrites>,
    unfolded: &mut u64,
    report: &mut CheckReport,
) {
    let repo = match vole_meta::fold::open_repo(dir) {
        Ok(repo) => repo,
        Err(e) => {
            report
                .problems
                .push(format!("{name}: cannot open for its metadata: {e}"));
            return;
        }
    };
    for shard in 0..SHARDS {
        let shard = shard as u8;
        let shard_ref = format!("{SHARD_REF_PREFIX}{shard:02x}");
        let tip_seq = match vole_meta::fold::read_shard(&repo, shard)
            .and_then(|tip| tip.map_or(Ok(0), |tip| vole_meta::fold::folded_seq(&repo, tip)))
        {
            Ok(seq) => seq,
            Err(e) => {
                report
                    .problems
                    .push(format!("{name}: {shard_ref} cannot be read: {e}"));
                continue;
            }
        };
        if tip_seq > meta_last {
            report.problems.push(format!(
                "{name}: {shard_ref} holds meta log write #{tip_seq}, ahead of the meta log (its last write is #{meta_last})"
            ));
        }
        let Some(seen) = writes.get(&(name.to_string(), shard)) else {
            continue;
        };
        if let Some(applied) = seen.applied
            && tip_seq < applied
        {
            report.problems.push(format!(
                "{name}: {shard_ref} holds meta log write #{tip_seq}, behind write #{applied}, which the meta log marks applied"
            ));
        } else if tip_seq < seen.last {
            *unfolded += 1;
        }
    }
}

fn check_refs(git: &Git, name: &str, dir: &Path, state: &RefState, report: &mut CheckReport) {
    let listed = git
        .command()
        .arg("--git-dir")
        .arg(dir)
        .args([
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(symref)",
        ])
        .output();
    let output = match listed {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            report.problems.push(format!(
                "{name}: cannot list refs: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
            return;
        }
        Err(e) => {
            report
                .problems
                .push(format!("{name}: cannot list refs: {e}"));
            return;
        }
    };
    let mut on_disk: HashMap<String, String> = HashMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let mut fields = line.split('\0');
        let (Some(ref_name), Some(oid), Some(symref)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        // The fold's refs are checked against the meta log; a symbolic
        // ref moves nothing.
        if ref_name.starts_with("refs/meta/") || !symref.is_empty() {
            continue;
        }
        on_disk.insert(ref_name.to_string(), oid.to_string());
    }
    let empty = HashMap::new();
    let known = state.known().get(name).unwrap_or(&empty);
    let in_flight: HashMap<&str, &RefMove> = state
        .pending_moves()
        .filter(|m| m.repo == name)
        .map(|m| (m.ref_name.as_str(), m))
        .collect();
    let settles = |ref_name: &str, value: Option<&String>| {
        in_flight
            .get(ref_name)
            .is_some_and(|m| m.new.as_ref() == value)
    };
    for (ref_name, logged) in known {
        match on_disk.get(ref_name) {
            Some(value) if value == logged => {}
            value if settles(ref_name, value) => {}
            Some(value) => report.problems.push(format!(
                "{name}: {ref_name} is at {value}, but its last committed move in the ref log set it to {logged}"
            )),
            None => report.problems.push(format!(
                "{name}: {ref_name} is missing, but its last committed move in the ref log set it to {logged}"
            )),
        }
    }
    for (ref_name, value) in &on_disk {
        if !known.contains_key(ref_name) && !settles(ref_name, Some(value)) {
            report.problems.push(format!(
                "{name}: {ref_name} is at {value}, but the ref log has no committed move of it"
            ));
        }
    }
}

/// Users that share an email (case aside): each such email is a problem.
fn check_emails(system: &Path, logged: &HashMap<String, String>, report: &mut CheckReport) {
    use vole_meta::entity::User;
    let mut users: HashMap<String, User> = match vole_meta::folded_users(system) {
        Ok(users) => users
            .into_iter()
            .map(|user| (User::id_of(&user.name), user))
            .collect(),
        Err(e) => {
            report
                .problems
                .push(format!("the system repo's users cannot be read: {e}"));
            return;
        }
    };
    for body in logged.values() {
        if let Ok(user) = serde_json::from_str::<User>(body) {
            users.insert(User::id_of(&user.name), user);
        }
    }
    let mut by_email: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for user in users.values() {
        by_email
            .entry(user.email.to_ascii_lowercase())
            .or_default()
            .push(user.name.clone());
    }
    for (email, mut names) in by_email {
        if names.len() > 1 {
            names.sort();
            report.problems.push(format!(
                "users {} share the email {email:?}: signing in with it is refused; give each its own (`vole user edit NAME --email ADDR`)",
                names.join(", ")
            ));
        }
    }
}

/// The persisted metadata index (`log/meta-index.arrow`): every shard
/// tree it holds that is a shard tip now must hold what the tree holds.
fn check_persisted_index(log_dir: &Path, repos: &[(String, PathBuf)], report: &mut CheckReport) {
    let path = log_dir.join(vole_meta::persisted::FILE_NAME);
    let checked = vole_meta::persisted::check(&path, repos);
    if checked.shard_trees > 0 {
        report.notes.push(format!(
            "persisted metadata index: {} documents of {} shard trees; {} shard tips read from it at a start, {} from git",
            checked.rows, checked.shard_trees, checked.current, checked.stale
        ));
    }
    report.notes.extend(checked.note);
    report.problems.extend(checked.problems);
}
