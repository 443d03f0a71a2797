//! `vole log`: compacting the logs, and dumping every log's records as
//! lines for people or JSON.

use std::process::ExitCode;
use std::time::Duration;

use super::args::LogCommand;
use super::control_client::call;
use vole_accounts::audit::AuditEvent;
use vole_config::Config;
use vole_control::Request;
use vole_git::datadir::DataDir;
use vole_hooks::RefMove;
use vole_log::{Entry, RecordKind, Tail};
use vole_meta::MetaWrite;

pub(super) fn log_command(config: &Config, command: LogCommand) -> anyhow::Result<ExitCode> {
    match command {
        LogCommand::Compact { keep } => {
            let report: serde_json::Value = call(config, Request::LogCompact { keep })?;
            println!(
                "ref log compacted: {} -> {} bytes, first kept sequence {}",
                report["bytes_before"], report["bytes_after"], report["base_seq"]
            );
            let meta = &report["meta"];
            println!(
                "meta log compacted: {} -> {} bytes, first kept sequence {} (records not yet folded into git are kept)",
                meta["bytes_before"], meta["bytes_after"], meta["base_seq"]
            );
            Ok(ExitCode::SUCCESS)
        }
        LogCommand::Dump { follow, json } => {
            dump_logs(config, follow, json)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `vole log dump`: every log (ref moves, metadata writes, audit events,
/// in that order), then (with `--follow`) new records of any as they
/// appear.
fn dump_logs(config: &Config, follow: bool, json: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = DataDir::new(config.data_dir.clone()).log_dir();
    let mut refs = Tail::<RefMove>::new(&dir.join(RefMove::FILE_NAME));
    let mut meta = Tail::<MetaWrite>::new(&dir.join(MetaWrite::FILE_NAME));
    let mut audit = Tail::<AuditEvent>::new(&dir.join(AuditEvent::FILE_NAME));
    let stdout = std::io::stdout();
    loop {
        let mut out = stdout.lock();
        let mut failed = None;
        refs.poll(|entry| {
            for line in dump_lines("refs", entry, json, describe_ref_move) {
                if let Err(e) = writeln!(out, "{line}") {
                    failed.get_or_insert(e);
                }
            }
        })?;
        meta.poll(|entry| {
            for line in dump_lines("meta", entry, json, describe_meta_write) {
                if let Err(e) = writeln!(out, "{line}") {
                    failed.get_or_insert(e);
                }
            }
        })?;
        audit.poll(|entry| {
            for line in dump_lines("audit", entry, json, describe_audit) {
                if let Err(e) = writeln!(out, "{line}") {
                    failed.get_or_insert(e);
                }
            }
        })?;
        match failed {
            // A closed pipe (`| head`) ends the dump quietly.
            Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Some(e) => return Err(e.into()),
            None => {}
        }
        out.flush()?;
        drop(out);
        if !follow {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn dump_lines<K: serde::Serialize>(
    log: &str,
    entry: Entry<K>,
    json: bool,
    describe: fn(&K) -> String,
) -> Vec<String> {
    let (seq, rows) = match entry {
        Entry::Checkpoint(rows) => (None, rows),
        Entry::Txn { seq, rows } => (Some(seq), rows),
    };
    rows.iter()
        .map(|row| {
            if json {
                let mut value = serde_json::to_value(row).unwrap_or_default();
                if let Some(object) = value.as_object_mut() {
                    object.insert("log".into(), log.into());
                    object.insert("seq".into(), seq.into());
                    object.insert("checkpoint".into(), seq.is_none().into());
                }
                value.to_string()
            } else {
                let seq = seq.map_or("checkpoint".to_string(), |s| format!("seq={s}"));
                format!("{log} {seq} {}", describe(row))
            }
        })
        .collect()
}

fn format_time(time_ns: i64) -> String {
    vole_stdx::time::nanos_to_millis(time_ns)
}

fn short_oid(oid: &Option<String>) -> &str {
    oid.as_deref().map_or("0000000", |o| &o[..o.len().min(12)])
}

fn describe_audit(e: &AuditEvent) -> String {
    format!(
        "{} {} actor={}@{} target={} {}",
        format_time(e.time_ns),
        e.event,
        e.actor,
        e.client,
        e.target,
        e.detail
    )
}

fn describe_ref_move(m: &RefMove) -> String {
    format!(
        "{} {} {} {}..{} {} actor={}@{} push={}",
        format_time(m.time_ns),
        m.repo,
        m.ref_name,
        short_oid(&m.old),
        short_oid(&m.new),
        m.phase.as_str(),
        m.actor,
        m.client,
        m.push_id
    )
}

fn describe_meta_write(m: &MetaWrite) -> String {
    format!(
        "{} {} {} {} shard={:02x} bytes={}",
        format_time(m.time_ns),
        m.repo,
        m.kind,
        m.entity_id,
        m.shard,
        m.body.len()
    )
}
