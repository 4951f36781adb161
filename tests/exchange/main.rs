//! The exchange layer (`src/exchange`): messages, deltas, budgets and the
//! messages with build statistics. One test binary (issue 29); each module was
//! a binary of its own (`exchange_*`). The peak-memory test of decoding,
//! `tests/exchange_memory.rs`, stays a binary of its own: its counting global
//! allocator counts every thread of the process, so tests running beside it
//! would move its figures (and it would count theirs).

#[path = "../format_common/mod.rs"]
mod format_common;
mod messages;
mod stats;
