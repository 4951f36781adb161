//! The guard's sled database (`<store>/guard/`): the one use of sled left
//! since store format 3 (the guard's base), opened on first use; and
//! [`open_sled`], sled opened with a store's configuration (also by the
//! migration of stores of format 1 and 2).

use crate::sled_engine::{self as engine, OpenError};
use crate::store::catalog::validate_name;
use crate::store::config::StoreConfig;
use crate::store::error::StoreError;
use crate::store::shared::Shared;
use parking_lot::Mutex;

/// A store's handle on the guard's database, empty until first used.
#[derive(Default)]
pub(crate) struct GuardDb {
    db: Mutex<Option<engine::Db>>,
}

fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

impl GuardDb {
    /// sled, opened on first use in the store of `shared`: its own database
    /// in `guard/`, with 16 MiB segments (see [`engine`], "The bounds").
    fn open(&self, shared: &Shared) -> Result<engine::Db, StoreError> {
        shared.check_writable()?;
        let mut slot = self.db.lock();
        if let Some(db) = &*slot {
            return Ok(db.clone());
        }
        let dir = shared.dir.join(engine::GUARD_DIR);
        std::fs::create_dir_all(&dir).map_err(io("creating the guard's database"))?;
        let db = open_sled(&dir, &shared.config, engine::GUARD_SEGMENT)?;
        // The directory's name, durable before anything in it is: synced
        // whether or not this call made it, since a call before it may have
        // made it and failed at this sync (an error that changed nothing,
        // which the host may retry).
        crate::store::disk::io::sync_dir(&shared.dir)
            .map_err(io("syncing the database directory"))?;
        *slot = Some(db.clone());
        Ok(db)
    }

    /// The base and differential-file trees of guard storage `name`
    /// ([`SledDiffStorage`](crate::SledDiffStorage)).
    pub(crate) fn trees(
        &self,
        shared: &Shared,
        name: &str,
    ) -> Result<(engine::Tree, engine::Tree), StoreError> {
        validate_name(name)?;
        let db = self.open(shared)?;
        let open = |part: &str| {
            db.open_tree(format!("{}{name}/{part}", engine::GUARD_TREE_PREFIX))
                .map_err(|e| StoreError::sled("opening guard storage", e))
        };
        Ok((open("base")?, open("diff")?))
    }

    /// Makes guard storage's writes durable (sled's flush and the syncs of
    /// [`engine::Db::flush`]); nothing to do if sled was never opened.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        let db = self.db.lock().clone();
        if let Some(db) = db {
            db.flush().map_err(|e| StoreError::sled("flushing", e))?;
        }
        Ok(())
    }
}

/// Opens sled in `path` with the cache size and the write deadline of
/// `config` ([`engine::open_with_retry`]); a lock still held after the wait
/// is [`StoreError::Locked`].
pub(crate) fn open_sled(
    path: &std::path::Path,
    config: &StoreConfig,
    segment_size: usize,
) -> Result<engine::Db, StoreError> {
    engine::open_with_retry(path, config.cache_capacity, config.io_timeout, segment_size).map_err(
        |e| match e {
            OpenError::Locked => StoreError::Locked {
                path: path.to_path_buf(),
            },
            OpenError::Sled(e) => StoreError::sled("opening the database", e),
        },
    )
}
