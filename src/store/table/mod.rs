//! A table: its handle ([`Table`], in [`handle`]), the state of one
//! generation ([`generation`]), its writer state, write path and log fold
//! ([`writer`], [`fold`]), bulk loads ([`bulk`]) and lookups for one thread
//! ([`reader`]).

mod bloom;
mod bulk;
mod fold;
#[cfg(test)]
mod fold_tests;
mod generation;
pub(crate) mod handle;
mod reader;
mod state;
mod writer;

pub use bloom::TableBloom;
pub(crate) use generation::{commit_chunks, owner, Generation};
pub(crate) use handle::TableInner;
pub use handle::{Table, TableStats};
pub use reader::TableReader;
pub(crate) use state::Writer;
