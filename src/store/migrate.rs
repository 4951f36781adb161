//! Store format migrations: bringing a store written by an older format
//! version up to [`STORE_FORMAT_VERSION`] when it is opened.
//!
//! # Layout of the code
//! The issue asks for the steps under `migrations/`, one per file, next to the
//! fixtures they are tested on. Rust code must be part of the crate, so each
//! step lives in `migrations/steps/v<N>_to_v<N+1>.rs` and is compiled into
//! this module by a `#[path]` include, and [`STEPS`] lists them in order.
//! The framework below (reading the version, running the steps in order, the
//! atomic switch, the typed error for a newer store) is ordinary crate code.
//! The framework is tested with a test-only step from the current version
//! (below); the real steps are tested on the fixtures of the versions they
//! read (`tests/store_fixture.rs`): those are bytes on users' disks, kept
//! forever.
//!
//! # What a step does
//! A step from version N **builds** the version-N+1 form of everything it
//! changes in new trees or new keys, without touching what version N reads,
//! and returns the catalog writes that **switch** to it. The framework adds
//! the header's new version to those writes, applies them as one sled batch
//! on the catalog tree (atomic: after a crash either all or none are
//! visible), and flushes. A crash before the switch leaves the version-N
//! store intact plus trees no catalog record names, which the store's
//! garbage collection removes at the next open; the step then runs again
//! from the start, so a step must begin by clearing whatever it builds.
//! Old trees that the switch stops naming are collected the same way.

use super::catalog::{StoreHeader, HEADER_KEY, STORE_FORMAT_VERSION};
use super::engine;
use super::error::StoreError;

/// One migration step, from format version `from` to `from + 1`.
pub(crate) struct Step {
    /// The version the step reads.
    pub from: u32,
    /// Builds the new form; returns the catalog writes that switch to it
    /// (the framework adds the header).
    pub build: fn(&engine::Db, &engine::Tree) -> Result<engine::Batch, StoreError>,
}

#[path = "../../migrations/steps/v1_to_v2.rs"]
mod v1_to_v2;

/// The steps of this build, in order of `from`.
pub(crate) const STEPS: &[Step] = &[Step {
    from: 1,
    build: v1_to_v2::v1_to_v2,
}];

/// Where a test may stop a migration (crash injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopAt {
    /// Run to completion.
    Never,
    /// Return after a step's build, before its switch.
    BeforeSwitch,
}

/// Brings the store whose header is `header` to [`STORE_FORMAT_VERSION`].
/// Returns the header in force afterwards.
pub(crate) fn upgrade(
    db: &engine::Db,
    catalog: &engine::Tree,
    header: StoreHeader,
) -> Result<StoreHeader, StoreError> {
    upgrade_with(
        db,
        catalog,
        header,
        STORE_FORMAT_VERSION,
        STEPS,
        StopAt::Never,
    )
}

/// [`upgrade`] to version `current` with the steps `steps` (tests use their
/// own).
pub(crate) fn upgrade_with(
    db: &engine::Db,
    catalog: &engine::Tree,
    mut header: StoreHeader,
    current: u32,
    steps: &[Step],
    stop: StopAt,
) -> Result<StoreHeader, StoreError> {
    if header.format_version > current {
        return Err(StoreError::UnsupportedFormat {
            found: header.format_version,
            supported: current,
        });
    }
    if header.format_version == 0 {
        return Err(StoreError::corrupt(
            "store header",
            crate::error::CodecError::InvalidField {
                field: "format version",
                reason: "0 is not a store format version".into(),
            },
        ));
    }
    // Every step of the path must exist before the first one runs: a store
    // is never left at a version between the one found and `current`.
    let mut path = Vec::new();
    for from in header.format_version..current {
        let step = steps
            .iter()
            .find(|s| s.from == from)
            .ok_or(StoreError::NoMigration { from, to: current })?;
        path.push(step);
    }
    for step in path {
        let from = header.format_version;
        let mut switch = (step.build)(db, catalog)?;
        if stop == StopAt::BeforeSwitch {
            return Ok(header);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::catalog::{TableMeta, CATALOG_TREE, TABLE_PREFIX};
    use crate::store::{FilterStore, TableSpec};

    /// A test-only step "V → V+1" (V the current version): moves every table's data to a new
    /// generation tree (a copy), the shape of a real step that rewrites
    /// pages in a new form.
    fn copy_to_next_generation(
        db: &engine::Db,
        catalog: &engine::Tree,
    ) -> Result<engine::Batch, StoreError> {
        let mut switch = engine::Batch::default();
        for entry in catalog.scan_prefix([TABLE_PREFIX]) {
            let (key, value) = entry.map_err(|e| StoreError::sled("test", e))?;
            let mut meta = TableMeta::decode(&key, &value)?;
            let old = db
                .open_tree(meta.tree_name(meta.generation))
                .map_err(|e| StoreError::sled("test", e))?;
            let new_name = meta.tree_name(meta.generation + 1);
            // Clear first: a crashed earlier run may have left a partial copy.
            db.drop_tree(&new_name)
                .map_err(|e| StoreError::sled("test", e))?;
            let new = db
                .open_tree(&new_name)
                .map_err(|e| StoreError::sled("test", e))?;
            for kv in old.iter() {
                let (k, v) = kv.map_err(|e| StoreError::sled("test", e))?;
                new.insert(k, v).map_err(|e| StoreError::sled("test", e))?;
            }
            meta.generation += 1;
            switch.insert(key, meta.encode()?);
        }
        db.flush().map_err(|e| StoreError::sled("test", e))?;
        Ok(switch)
    }

    const V: u32 = STORE_FORMAT_VERSION;

    const TEST_STEPS: &[Step] = &[Step {
        from: V,
        build: copy_to_next_generation,
    }];

    fn keys() -> Vec<String> {
        (0..300).map(|i| format!("k{i}")).collect()
    }

    /// A v1 store with one table holding `keys()`, folded and not.
    fn make_store(dir: &std::path::Path) {
        let s = FilterStore::open(dir).unwrap();
        let t = s
            .create_table("t", TableSpec::new(1000, 0.01).seed(1))
            .unwrap();
        for k in &keys()[..200] {
            t.insert(k.as_bytes()).unwrap();
        }
        t.fold().unwrap();
        for k in &keys()[200..] {
            t.insert(k.as_bytes()).unwrap();
        }
        t.flush().unwrap();
    }

    fn raw(dir: &std::path::Path) -> (engine::Db, engine::Tree, StoreHeader) {
        // sled releases a dropped database's directory lock a few
        // milliseconds late: retry, as `FilterStore::open` does.
        let mut tries = 0;
        let db = loop {
            match engine::Db::open(dir, sled::Config::new(), crate::store::DEFAULT_IO_TIMEOUT) {
                Ok(db) => break db,
                Err(e) if tries < 200 => {
                    tries += 1;
                    let _ = e;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        };
        let catalog = db.open_tree(CATALOG_TREE).unwrap();
        let header = StoreHeader::decode_any(&catalog.get(HEADER_KEY).unwrap().unwrap()).unwrap();
        (db, catalog, header)
    }

    fn generation(dir: &std::path::Path) -> u64 {
        let s = FilterStore::open(dir).unwrap();
        let t = s.open_table("t").unwrap();
        for k in keys() {
            assert!(t.contains(k.as_bytes()), "{k} lost");
        }
        t.meta().generation
    }

    #[test]
    fn a_crash_before_the_switch_leaves_the_old_form_and_a_rerun_completes() {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path());
        {
            let (db, catalog, header) = raw(dir.path());
            assert_eq!(header.format_version, V);
            let h = upgrade_with(
                &db,
                &catalog,
                header,
                V + 1,
                TEST_STEPS,
                StopAt::BeforeSwitch,
            )
            .unwrap();
            assert_eq!(h.format_version, V);
            // The half-built generation exists but nothing names it.
            assert!(db
                .tree_names()
                .unwrap()
                .iter()
                .any(|n| n.ends_with(b"gen/0000000000000002")));
        }
        // Still a version-V store: it opens, every key is there, the stray tree is
        // collected.
        assert_eq!(generation(dir.path()), 1);
        {
            let (db, _, _) = raw(dir.path());
            assert!(!db
                .tree_names()
                .unwrap()
                .iter()
                .any(|n| n.ends_with(b"gen/0000000000000002")));
        }
        // Run again, to completion.
        let (db, catalog, header) = raw(dir.path());
        let h = upgrade_with(&db, &catalog, header, V + 1, TEST_STEPS, StopAt::Never).unwrap();
        assert_eq!(h.format_version, V + 1);
        let table = TableMeta::decode(
            &crate::store::catalog::table_key("t"),
            &catalog
                .get(crate::store::catalog::table_key("t"))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(table.generation, 2);
        drop((db, catalog));
        // This build supports version V only: the migrated store is "newer".
        match FilterStore::open(dir.path()) {
            Err(e @ StoreError::UnsupportedFormat { found, supported })
                if found == V + 1 && supported == V =>
            {
                assert!(e.to_string().contains("upgrade filterstore"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn versions_without_a_path_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path());
        let (db, catalog, header) = raw(dir.path());
        // Current V+2 with only a V → V+1 step: typed error before anything runs.
        match upgrade_with(&db, &catalog, header, V + 2, TEST_STEPS, StopAt::Never) {
            Err(StoreError::NoMigration { from, to }) if from == V + 1 && to == V + 2 => {}
            other => panic!("{other:?}"),
        }
        let zero = StoreHeader {
            format_version: 0,
            ..header
        };
        assert!(matches!(
            upgrade_with(&db, &catalog, zero, 1, STEPS, StopAt::Never),
            Err(StoreError::Corrupt { .. })
        ));
        let h = StoreHeader::decode_any(&catalog.get(HEADER_KEY).unwrap().unwrap()).unwrap();
        assert_eq!(h.format_version, V);
        // The store is current: a no-op.
        assert_eq!(upgrade(&db, &catalog, header).unwrap(), header);
    }
}
