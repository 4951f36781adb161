//! The migration from store formats 1 and 2 (sled) to format 3 (the
//! store's own files), run when a store of format 1 or 2 is opened for
//! writing; `store/open/migrate/mod.rs` then brings format 3 to the current one.
//!
//! # Layout of the code
//! Each step lives in `migrations/steps/v<N>_to_v<N+1>.rs`, next to the
//! fixtures it is tested on, and is compiled into this module by a
//! `#[path]` include. The framework below (reading the version, running the
//! steps in order, the typed errors for a newer store or a missing step) is
//! ordinary crate code. The real steps are tested on the fixtures of the
//! versions they read (`tests/store/fixture.rs`): those are bytes on users'
//! disks, kept forever.
//!
//! # What a step does
//! Formats 1 and 2 kept everything in sled. A step from version 1 or 2
//! builds the next form of everything it changes without touching what the
//! version it reads needs: the 1 → 2 step in sled (its catalog writes are
//! applied as one atomic sled batch with the new header version, and
//! flushed), the 2 → 3 step in new files. The 2 → 3 switch is the catalog
//! file: until it exists the store is a version-2 store (files written
//! before a crash, the tables' and the guard's new database, are
//! overwritten when the step runs again); once it exists the store is a
//! version-3 store and the old sled database in its directory is garbage,
//! removed then or by the next writing open. So a step may be cut by a
//! crash at any point and the store still opens, as the version before the
//! step or the one after.

use super::sled_generation as legacy;
use crate::filter::counting::counter_bytes;
use crate::sled_engine as engine;
use crate::store::budget;
use crate::store::catalog::{Catalog, StoreHeader, CATALOG_TREE, HEADER_KEY, STORE_FORMAT_VERSION};
use crate::store::config::StoreConfig;
use crate::store::disk::chunks::{self as pages, CHUNK_COUNTERS};
use crate::store::disk::create_files;
use crate::store::error::{at_open, StoreError};
use crate::store::open::sled_dir::remove_legacy_sled;
use crate::store::shared::Shared;
use crate::store::table::commit_chunks;
use std::path::Path;

/// One migration step inside sled, from format version `from` to `from + 1`
/// (`from` < 2).
pub(crate) struct Step {
    /// The version the step reads.
    pub from: u32,
    /// Builds the new form; returns the catalog writes that switch to it
    /// (the framework adds the header).
    pub build: fn(&engine::Db, &engine::Tree) -> Result<engine::Batch, StoreError>,
}

#[path = "../../../../migrations/steps/v1_to_v2.rs"]
mod v1_to_v2;
#[path = "../../../../migrations/steps/v2_to_v3.rs"]
mod v2_to_v3;

/// The steps inside sled, in order of `from`.
pub(crate) const SLED_STEPS: &[Step] = &[Step {
    from: 1,
    build: v1_to_v2::v1_to_v2,
}];

/// The last version kept in sled.
const LAST_SLED_VERSION: u32 = 2;

/// Where a test may stop a migration (crash injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopAt {
    /// Run to completion.
    Never,
    /// Return after the 2 → 3 step wrote the tables' files, before the
    /// catalog file.
    BeforeSwitch,
}

/// Opens sled in `dir` (a store of format 1 or 2) and brings the store to
/// [`STORE_FORMAT_VERSION`]: returns its catalog. The old database is then
/// removed ([`remove_legacy_sled`]).
pub(crate) fn upgrade_legacy(dir: &Path, config: &StoreConfig) -> Result<Catalog, StoreError> {
    let catalog = upgrade_legacy_with(dir, config, StopAt::Never)?;
    // Garbage now: what is not removed here, the next writing open removes.
    let _ = remove_legacy_sled(dir);
    Ok(catalog)
}

/// [`upgrade_legacy`] but for the removal, stopping where `stop` says
/// (tests). The old database is closed when this returns.
pub(crate) fn upgrade_legacy_with(
    dir: &Path,
    config: &StoreConfig,
    stop: StopAt,
) -> Result<Catalog, StoreError> {
    let db = crate::store::guard_db::open_sled(dir, config, engine::LEGACY_SEGMENT)?;
    let sled_err = |op| move |e| StoreError::sled(op, e);
    let names = db.tree_names().map_err(sled_err("reading the database"))?;
    if !names.iter().any(|n| n == CATALOG_TREE.as_bytes()) {
        let foreign_trees = names.iter().any(|n| n != b"__sled__default".as_slice());
        let empty = db.is_empty().map_err(sled_err("reading the database"))?;
        if foreign_trees || !empty {
            return Err(StoreError::NotAFilterStore {
                path: dir.to_path_buf(),
            });
        }
        // sled was created, its catalog never: a new store.
        return Catalog::create(dir).map_err(at_open);
    }
    let tree = db
        .open_tree(CATALOG_TREE)
        .map_err(sled_err("opening the catalog"))?;
    let header = match tree
        .get(HEADER_KEY)
        .map_err(sled_err("reading the catalog"))?
    {
        Some(v) => StoreHeader::decode_any(&v)?,
        None => {
            // A store of format 1 or 2 cut before its header was written.
            return Catalog::create(dir).map_err(at_open);
        }
    };
    upgrade_in_sled(&db, &tree, header, SLED_STEPS)?;
    v2_to_v3::v2_to_v3(&db, &tree, dir, config, stop)
}

/// Refuses a version in the sled catalog that no step starts from: newer
/// than this build, 0, or one kept in a catalog file (3 or more).
fn check_sled_version(version: u32) -> Result<(), StoreError> {
    if version > STORE_FORMAT_VERSION {
        return Err(StoreError::UnsupportedFormat {
            found: version,
            supported: STORE_FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(StoreError::corrupt(
            "store header",
            crate::error::CodecError::InvalidField {
                field: "format version",
                reason: "0 is not a store format version".into(),
            },
        ));
    }
    if version > LAST_SLED_VERSION {
        // A catalog tree that says 3 or more: format 3 keeps its catalog in
        // a file, which is missing.
        return Err(StoreError::corrupt(
            "store header",
            crate::error::CodecError::InvalidField {
                field: "format version",
                reason: format!("{} in the sled catalog, but no catalog file", version),
            },
        ));
    }
    Ok(())
}

/// Runs the steps inside sled from `header`'s version to the last version
/// kept in sled. Returns the header in force afterwards.
pub(crate) fn upgrade_in_sled(
    db: &engine::Db,
    catalog: &engine::Tree,
    mut header: StoreHeader,
    steps: &[Step],
) -> Result<StoreHeader, StoreError> {
    check_sled_version(header.format_version)?;
    // Every step of the path must exist before the first one runs: a store
    // is never left at a version between the one found and the last one.
    let mut path = Vec::new();
    for from in header.format_version..LAST_SLED_VERSION {
        let step = steps
            .iter()
            .find(|s| s.from == from)
            .ok_or(StoreError::NoMigration {
                from,
                to: STORE_FORMAT_VERSION,
            })?;
        path.push(step);
    }
    for step in path {
        let from = header.format_version;
        let mut switch = (step.build)(db, catalog)?;
        let next = StoreHeader {
            format_version: from + 1,
            ..header
        };
        switch.insert(HEADER_KEY, next.encode()?);
        catalog
            .apply_batch(switch)
            .map_err(|e| StoreError::sled("switching to the migrated format", e))?;
        db.flush()
            .map_err(|e| StoreError::sled("flushing the migrated format", e))?;
        header = next;
    }
    Ok(header)
}

/// The absolute counters of every readable table of a format-2 `catalog`
/// (held in sled), written into format-3 files in `dir`, one table at a
/// time (its counters, `m/2` bytes, under the memory budget).
pub(crate) fn write_table_files(
    db: &engine::Db,
    catalog: &Catalog,
    dir: &Path,
    config: &StoreConfig,
) -> Result<(), StoreError> {
    let shared = Shared::new(dir.to_path_buf(), *config, false, catalog.detached_copy());
    let (records, _) = catalog.readable();
    for meta in records {
        let params = meta.params()?;
        let tree = db
            .open_tree(meta.tree_name(meta.generation))
            .map_err(|e| StoreError::sled("opening a table to migrate", e))?;
        let (mut counters, _memory) = budget::zeroed(
            || format!("the counters of table {:?} (migration)", meta.name),
            counter_bytes(&params),
        )?;
        let live = legacy::read_generation(&tree, &params, &meta.name, &mut counters)?;
        let (mut pages_file, _log) = create_files(dir, crate::store::table::owner(&meta), params)?;
        let chunk_bytes = (CHUNK_COUNTERS / 2) as usize;
        commit_chunks(
            &mut pages_file,
            &shared,
            |write| {
                for idx in 0..pages::chunk_count(&params) {
                    let at = idx as usize * chunk_bytes;
                    let len = pages::blocks_in_chunk(&params, idx) as usize
                        * crate::filter::counting::COUNTER_BLOCK_BYTES;
                    write(idx, &counters[at..at + len])?;
                }
                Ok(())
            },
            0,
            live,
        )?;
    }
    Ok(())
}

/// Refuses a record of guard storage `name` over the guard's limits
/// (format 2 had none): the migration stops, nothing of it done.
fn check_guard_record(dir: &Path, name: &[u8], k: &[u8], v: &[u8]) -> Result<(), StoreError> {
    if k.len() <= engine::MAX_KEY && v.len() <= engine::MAX_VALUE {
        return Ok(());
    }
    Err(StoreError::MigrationRefused {
        path: dir.to_path_buf(),
        reason: format!(
            "guard storage {:?} holds a record with a {}-byte key and a {}-byte \
             value, over this release's limits ({}-byte keys, {}-byte values)",
            String::from_utf8_lossy(&name[engine::GUARD_TREE_PREFIX.len()..]),
            k.len(),
            v.len().saturating_sub(1),
            engine::MAX_KEY,
            engine::MAX_VALUE - 1
        ),
    })
}

/// Copies the guard storage's trees of a format-1 or -2 database `db`
/// into the guard's own database (`dir/guard`, created with
/// [`engine::GUARD_SEGMENT`]; whatever an earlier, cut-short run left there
/// is removed first), in groups of [`engine::MAX_CALL_ITEMS`], and makes
/// them durable. A record over the guard's limits (format 2 had none)
/// stops the migration with [`StoreError::MigrationRefused`].
pub(crate) fn copy_guard_trees(
    db: &engine::Db,
    dir: &Path,
    config: &StoreConfig,
) -> Result<(), StoreError> {
    let sled_err = |op| move |e| StoreError::sled(op, e);
    let names: Vec<_> = db
        .tree_names()
        .map_err(sled_err("reading the database"))?
        .into_iter()
        .filter(|n| n.starts_with(engine::GUARD_TREE_PREFIX.as_bytes()))
        .collect();
    let to = dir.join(engine::GUARD_DIR);
    if to.exists() {
        std::fs::remove_dir_all(&to).map_err(|source| StoreError::Io {
            op: "removing a guard database left by an earlier migration",
            source,
        })?;
    }
    if names.is_empty() {
        return Ok(());
    }
    let new = crate::store::guard_db::open_sled(&to, config, engine::GUARD_SEGMENT)?;
    for name in names {
        let from = db
            .open_tree(&name)
            .map_err(sled_err("opening guard storage to migrate"))?;
        let into = new
            .open_tree(&name)
            .map_err(sled_err("creating the migrated guard storage"))?;
        let mut group = engine::Batch::default();
        let mut in_group = 0;
        for item in from.iter() {
            let (k, v) = item.map_err(sled_err("reading guard storage to migrate"))?;
            check_guard_record(dir, &name, &k, &v)?;
            group.insert(k, v);
            in_group += 1;
            if in_group == engine::MAX_CALL_ITEMS {
                into.apply_batch(std::mem::take(&mut group))
                    .map_err(sled_err("writing the migrated guard storage"))?;
                in_group = 0;
            }
        }
        if in_group > 0 {
            into.apply_batch(group)
                .map_err(sled_err("writing the migrated guard storage"))?;
        }
    }
    new.flush()
        .map_err(sled_err("flushing the migrated guard storage"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FilterStore;

    /// A copy of the store-format-2 fixture (`migrations/fixtures/store-v2`).
    fn v2_copy() -> tempfile::TempDir {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/store-v2");
        let tmp = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
        }
        tmp
    }

    #[test]
    fn a_crash_before_the_switch_leaves_a_format_2_store_that_migrates_again() {
        let _serial = engine::SERIAL.lock();
        let dir = v2_copy();
        {
            let catalog =
                upgrade_legacy_with(dir.path(), &StoreConfig::default(), StopAt::BeforeSwitch)
                    .unwrap();
            assert_eq!(catalog.header().format_version, 2);
        }
        // The files were written, the switch was not: still format 2.
        assert!(!dir.path().join("catalog").exists());
        assert_eq!(
            std::fs::read_dir(dir.path().join("tables"))
                .unwrap()
                .count(),
            4
        );
        // Damage one of the files the cut-short run left: the rerun
        // overwrites it.
        let any = std::fs::read_dir(dir.path().join("tables"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::write(&any, b"left by a crash").unwrap();
        let store = {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                match FilterStore::open(dir.path()) {
                    Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    other => break other.unwrap(),
                }
            }
        };
        for name in ["blocked", "standard"] {
            let t = store.open_table(name).unwrap();
            for i in 100..1200u32 {
                assert!(t.contains(format!("key-{i:04}").as_bytes()), "{name} {i}");
            }
            assert_eq!(t.live_keys(), 1120);
        }
        drop(store);
        assert!(dir.path().join("catalog").is_file());
        let _ = FilterStore::open(dir.path()).unwrap();
    }

    #[test]
    fn versions_without_a_path_or_impossible_ones_are_refused() {
        let _serial = engine::SERIAL.lock();
        let dir = v2_copy();
        let db = crate::store::guard_db::open_sled(
            dir.path(),
            &StoreConfig::default(),
            engine::LEGACY_SEGMENT,
        )
        .unwrap();
        let tree = db.open_tree(CATALOG_TREE).unwrap();
        let h = StoreHeader::decode_any(&tree.get(HEADER_KEY).unwrap().unwrap()).unwrap();
        let at = |v| StoreHeader {
            format_version: v,
            ..h
        };
        // No steps: a version-1 store has no path to 2.
        assert!(matches!(
            upgrade_in_sled(&db, &tree, at(1), &[]),
            Err(StoreError::NoMigration { from: 1, .. })
        ));
        assert!(matches!(
            upgrade_in_sled(&db, &tree, at(0), SLED_STEPS),
            Err(StoreError::Corrupt { .. })
        ));
        // A sled catalog that says 3 without a catalog file is damage; one
        // that says more is a newer store.
        assert!(matches!(
            upgrade_in_sled(&db, &tree, at(3), SLED_STEPS),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            upgrade_in_sled(&db, &tree, at(STORE_FORMAT_VERSION + 1), SLED_STEPS),
            Err(StoreError::UnsupportedFormat { .. })
        ));
        // Version 2 is where sled's steps end: nothing to do.
        assert_eq!(
            upgrade_in_sled(&db, &tree, at(2), SLED_STEPS).unwrap(),
            at(2)
        );
    }
}
