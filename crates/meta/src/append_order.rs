//! The ordered appender's decisions, as a state machine with no I/O (like
//! the log's sync gate): which writer appends which deposits, in ticket
//! order, and whom to wake with what result. `append.rs` is the thin layer
//! that locks it, writes to the log, waits at the sync gate and parks
//! threads. Generic over what is deposited (`D`), what a writer is handed
//! (`R`) and how a parked writer is woken (`W`), so it is tested with
//! plain values.

use std::collections::HashMap;

/// What a writer must do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<D, R> {
    /// Its result is in: hand it to the caller.
    Done(R),
    /// Append these deposits (consecutive tickets, in order), then report
    /// with [`AppendOrder::appended`].
    Append(Vec<(u64, D)>),
    /// An append is under way, or an earlier ticket is not deposited yet:
    /// [`AppendOrder::park`] and ask again when woken.
    Wait,
}

/// Tickets are drawn in the order versions are decided; frames reach the
/// log in ticket order, one appender at a time.
#[derive(Debug)]
pub struct AppendOrder<D, R, W> {
    /// The next ticket to append.
    turn: u64,
    appending: bool,
    deposited: HashMap<u64, D>,
    results: HashMap<u64, R>,
    parked: HashMap<u64, W>,
}

impl<D, R, W> Default for AppendOrder<D, R, W> {
    fn default() -> Self {
        AppendOrder {
            turn: 0,
            appending: false,
            deposited: HashMap::new(),
            results: HashMap::new(),
            parked: HashMap::new(),
        }
    }
}

impl<D, R, W> AppendOrder<D, R, W> {
    /// A writer's frame for its ticket.
    pub fn deposit(&mut self, ticket: u64, deposit: D) {
        self.deposited.insert(ticket, deposit);
    }

    pub fn next(&mut self, ticket: u64) -> Next<D, R> {
        if let Some(result) = self.results.remove(&ticket) {
            return Next::Done(result);
        }
        match self.take_run() {
            Some(batch) => Next::Append(batch),
            None => Next::Wait,
        }
    }

    /// The batch [`Next::Append`] handed out is in the log (or failed):
    /// the next run of deposits that became ready meanwhile, for the same
    /// appender, or `None` once there is none (then the appender waits
    /// for durability and [`settle`](Self::settle)s, and later deposits
    /// find no append under way).
    pub fn appended(&mut self) -> Option<Vec<(u64, D)>> {
        self.appending = false;
        self.take_run()
    }

    /// Parks a writer that was told to [`Next::Wait`].
    pub fn park(&mut self, ticket: u64, waiter: W) {
        self.parked.insert(ticket, waiter);
    }

    /// The results of appended tickets: kept for their writers, and the
    /// parked ones among them returned to be woken (each exactly once).
    pub fn settle(&mut self, results: impl IntoIterator<Item = (u64, R)>) -> Vec<W> {
        let mut wake = Vec::new();
        for (ticket, result) in results {
            wake.extend(self.parked.remove(&ticket));
            self.results.insert(ticket, result);
        }
        wake
    }

    /// Every deposit that is next in ticket order, if no append is under way.
    fn take_run(&mut self) -> Option<Vec<(u64, D)>> {
        if self.appending {
            return None;
        }
        let mut batch = Vec::new();
        while let Some(deposit) = self.deposited.remove(&self.turn) {
            batch.push((self.turn, deposit));
            self.turn += 1;
        }
        if batch.is_empty() {
            return None;
        }
        self.appending = true;
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Order = AppendOrder<&'static str, Result<u64, &'static str>, &'static str>;

    #[test]
    fn a_ticket_waits_for_the_ones_before_it_then_one_writer_appends_all() {
        let mut order = Order::default();
        order.deposit(1, "b");
        assert_eq!(order.next(1), Next::Wait, "ticket 0 is not in yet");
        order.park(1, "writer 1");
        order.deposit(0, "a");
        assert_eq!(order.next(0), Next::Append(vec![(0, "a"), (1, "b")]));
        assert_eq!(order.appended(), None);
        let woken = order.settle([(0, Ok(10)), (1, Ok(11))]);
        assert_eq!(woken, vec!["writer 1"], "only the parked writer is woken");
        assert_eq!(order.next(0), Next::Done(Ok(10)));
        assert_eq!(order.next(1), Next::Done(Ok(11)));
    }

    #[test]
    fn a_deposit_during_an_append_is_taken_by_the_same_appender() {
        let mut order = Order::default();
        order.deposit(0, "a");
        assert_eq!(order.next(0), Next::Append(vec![(0, "a")]));
        order.deposit(1, "b");
        assert_eq!(order.next(1), Next::Wait, "one append at a time");
        order.park(1, "writer 1");
        assert_eq!(order.appended(), Some(vec![(1, "b")]));
        assert_eq!(order.appended(), None);
        // Settled together: the second writer is woken once, with its
        // result, not once to hear it was written and again when durable.
        assert_eq!(
            order.settle([(0, Ok(1)), (1, Err("sync failed"))]),
            vec!["writer 1"]
        );
        assert_eq!(order.next(1), Next::Done(Err("sync failed")));
        assert_eq!(order.next(0), Next::Done(Ok(1)));
    }

    #[test]
    fn after_an_append_ends_the_next_deposit_appends_itself() {
        let mut order = Order::default();
        order.deposit(0, "a");
        assert_eq!(order.next(0), Next::Append(vec![(0, "a")]));
        assert_eq!(order.appended(), None);
        // While the first appender waits for durability, ticket 1 finds
        // no append under way and appends itself.
        order.deposit(1, "b");
        assert_eq!(order.next(1), Next::Append(vec![(1, "b")]));
        assert_eq!(order.next(0), Next::Wait, "no result yet for ticket 0");
        assert!(order.settle([(1, Ok(2))]).is_empty());
        assert_eq!(order.next(1), Next::Done(Ok(2)));
    }
}
