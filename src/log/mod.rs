//! The group-committed Arrow IPC log (see issue: built next).
