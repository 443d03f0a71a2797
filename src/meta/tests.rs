//! Tests of the metadata store against real git repos and a real log.
