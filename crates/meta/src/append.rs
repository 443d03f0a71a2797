//! The ordered appender: a write's frame is deposited under its ticket
//! and appended to the meta log in ticket order (one writer appends every
//! deposit that is next, with one write), so per shard the log order is
//! the order versions were decided in; each writer is acknowledged once
//! its frame is durable. Who appends what and whom to wake is decided by
//! [`super::append_order::AppendOrder`]; here are the lock, the log writes,
//! the sync-gate wait and the parking.

use super::append_order::Next;
use super::*;

impl MetaStore {
    /// Deposits a writer's frame and returns once it is in the log and
    /// durable. A writer that finds no append under way and the next ticket
    /// deposited appends every deposit that is next in ticket order (its
    /// own among them, or not yet), waits until they are durable, and only
    /// then hands each writer its result: a writer that parks is woken once,
    /// with its write acknowledged, instead of once to hear its frame was
    /// written and again at the sync gate.
    pub(super) fn append_durably(
        &self,
        meta: &RepoMeta,
        ticket: u64,
        deposit: Deposit,
    ) -> Result<Appended, AppendError> {
        let mut order = meta.appender.state.lock();
        order.deposit(ticket, deposit);
        loop {
            match order.next(ticket) {
                Next::Done(result) => return result,
                Next::Append(mut batch) => {
                    // Append while deposits are ready: a deposit that
                    // arrives during an append sees one under way and
                    // parks, so it is taken by the next batch here.
                    let mut appended = Vec::new();
                    loop {
                        drop(order);
                        appended.extend(self.append_batch(meta, batch));
                        order = meta.appender.state.lock();
                        match order.appended() {
                            Some(more) => batch = more,
                            None => break,
                        }
                    }
                    // Later deposits find no append under way and append
                    // themselves while these wait for the sync gate.
                    drop(order);
                    let last = appended
                        .iter()
                        .filter_map(|(_, result)| result.as_ref().ok().map(|(seq, _)| *seq))
                        .max();
                    let durable = match last {
                        Some(seq) => self
                            .inner
                            .log
                            .wait_durable(seq)
                            .map_err(|e| AppendError::Log(Arc::new(e))),
                        None => Ok(()),
                    };
                    let settled = appended.into_iter().map(|(done, result)| {
                        let result = match (&durable, result) {
                            (Err(why), Ok(_)) => Err(why.clone()),
                            (_, result) => result,
                        };
                        (done, result)
                    });
                    order = meta.appender.state.lock();
                    for writer in order.settle(settled) {
                        writer.unpark();
                    }
                }
                Next::Wait => {
                    order.park(ticket, std::thread::current());
                    drop(order);
                    // A wake-up for nothing, or a spurious one, loops to
                    // the checks.
                    std::thread::park();
                    order = meta.appender.state.lock();
                }
            }
        }
    }

    /// Appends deposits (consecutive tickets) in order and queues each
    /// appended write for its shard's fold.
    pub(super) fn append_batch(
        &self,
        meta: &RepoMeta,
        batch: Vec<(u64, Deposit)>,
    ) -> Vec<(u64, Result<Appended, AppendError>)> {
        let inner = &self.inner;
        let mut frames = Vec::with_capacity(batch.len());
        let mut writes = Vec::with_capacity(batch.len());
        let mut results = Vec::with_capacity(batch.len());
        for (ticket, deposit) in batch {
            match deposit.encoded {
                Ok((frame, body)) => {
                    frames.push(frame);
                    writes.push((ticket, deposit.shard, deposit.path, body));
                }
                Err(why) => results.push((ticket, Err(why))),
            }
        }
        if frames.is_empty() {
            return results;
        }
        // The log write holds `unfolded` (so `applied()` never passes a
        // sequence being written) but not the repo's state, which writers
        // deciding their next version wait on; appends are serial (one
        // append under way at a time), so each shard's queue still grows
        // in log order.
        let first = {
            let mut unfolded = inner.unfolded.lock();
            // One write for the whole batch; each frame is its own
            // transaction.
            match inner.log.append_encoded_all(frames) {
                Ok(first) => {
                    let last = first + writes.len() as u64 - 1;
                    unfolded.seqs.extend(first..=last);
                    unfolded.max_seen = unfolded.max_seen.max(last);
                    first
                }
                Err(e) => {
                    let why = AppendError::Log(Arc::new(e));
                    results.extend(writes.into_iter().map(|(t, ..)| (t, Err(why.clone()))));
                    return results;
                }
            }
        };
        let mut state = meta.state.lock();
        for (seq, (ticket, shard, path, body)) in (first..).zip(writes) {
            let queue = state.pending.entry(shard).or_insert_with(|| ShardQueue {
                writes: Vec::new(),
                since: Instant::now(),
            });
            queue.writes.push(PendingWrite {
                seq,
                shard,
                path,
                body,
            });
            inner.pending_total.fetch_add(1, Ordering::SeqCst);
            results.push((
                ticket,
                Ok((seq, queue.writes.len() >= inner.options.fold_batch)),
            ));
        }
        results
    }
}
