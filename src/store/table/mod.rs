//! A table: its handle ([`Table`], in [`handle`]; its documentation says
//! which file holds which of its methods), the state its handles share
//! ([`inner`]), the state of one generation ([`generation`]), its writer
//! state, write path and log fold ([`state`], [`writer`], [`fold`]), folds
//! in the background ([`background`]), bulk loads ([`bulk`]), the filter a
//! handle lends out ([`bloom`]) and lookups for one thread ([`reader`]), reading the log at open
//! ([`replay`]).

mod background;
#[cfg(test)]
mod background_tests;
mod bloom;
mod bulk;
mod fold;
#[cfg(test)]
mod fold_tests;
mod generation;
mod handle;
mod inner;
mod reader;
mod replay;
mod state;
#[cfg(test)]
mod truncation_tests;
mod writer;

pub use bloom::TableBloom;
pub(crate) use generation::{commit_chunks, owner, Generation};
pub use handle::{Table, TableStats};
pub(crate) use inner::TableInner;
pub use reader::TableReader;
pub(crate) use state::Writer;
