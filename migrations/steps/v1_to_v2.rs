//! Store format 1 → 2: the generation state record may carry fold marks.
//!
//! Version 2 writes a fold one counter page per sled call, marking its
//! progress in the generation's state record (`docs/FORMAT.md` §11): a
//! 32-byte body while a fold is under way or was cut short by a crash,
//! the 16-byte version-1 body otherwise. Every version-1 record is a valid
//! version-2 record meaning "no fold under way", so nothing is rebuilt: the
//! step only raises the header's version (which the framework writes), so
//! that a version-1 build, which would refuse the 32-byte record as corrupt,
//! says "upgrade filterstore" instead.

use crate::sled_engine as engine;
use crate::store::error::StoreError;

/// Builds nothing; the switch is the header alone.
pub(super) fn v1_to_v2(
    _db: &engine::Db,
    _catalog: &engine::Tree,
) -> Result<engine::Batch, StoreError> {
    Ok(engine::Batch::default())
}
