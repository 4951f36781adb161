//! The filterstore store an index keeps its filters in: opened once per
//! directory in the process (tables may share one), for writing when it
//! can be, read-only when only that works, and otherwise not at all — the
//! table then reads every file and says why once.

use super::files::{FileMap, IndexedFile};
use super::identity::FileIdentity;
use filterstore::{FilterStore, StoreError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// How an index reaches its store.
#[derive(Clone, Debug)]
pub(crate) enum StoreAccess {
    /// Open for writing: refreshes commit here.
    Writable(FilterStore),
    /// Open read-only (the directory cannot be written): its filters guard
    /// reads, no refresh commits.
    ReadOnly(FilterStore, String),
    /// Not open: every file is read.
    Unavailable(String),
}

impl StoreAccess {
    pub(crate) fn store(&self) -> Option<&FilterStore> {
        match self {
            StoreAccess::Writable(s) | StoreAccess::ReadOnly(s, _) => Some(s),
            StoreAccess::Unavailable(_) => None,
        }
    }

    /// Why the index cannot do all it should, if it cannot.
    pub(crate) fn limitation(&self) -> Option<&str> {
        match self {
            StoreAccess::Writable(_) => None,
            StoreAccess::ReadOnly(_, why) | StoreAccess::Unavailable(why) => Some(why),
        }
    }
}

/// The stores this process has open, by directory.
static OPEN: Mutex<Option<HashMap<PathBuf, Weak<StoreAccess>>>> = Mutex::new(None);

/// The store at `dir`, shared with every other index of this process that
/// uses it: open for writing, else read-only, else unavailable (with the
/// reason).
pub(crate) fn open(dir: &Path) -> Arc<StoreAccess> {
    let mut open = OPEN.lock();
    let map = open.get_or_insert_with(HashMap::new);
    let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if let Some(access) = map.get(&key).and_then(Weak::upgrade) {
        return access;
    }
    let access = Arc::new(open_store(dir));
    map.retain(|_, w| w.strong_count() > 0);
    map.insert(key, Arc::downgrade(&access));
    access
}

fn open_store(dir: &Path) -> StoreAccess {
    let write_error = match FilterStore::open(dir) {
        Ok(s) => return StoreAccess::Writable(s),
        Err(e) => e,
    };
    let unavailable = |e: &StoreError| {
        format!(
            "the index's store at {} cannot be opened ({e}); every file is read",
            dir.display()
        )
    };
    match write_error {
        // Another process writes it: it cannot be read consistently now.
        StoreError::Locked { .. } | StoreError::AlreadyOpen { .. } => {
            StoreAccess::Unavailable(unavailable(&write_error))
        }
        _ => match FilterStore::open_snapshot(dir) {
            Ok(s) => StoreAccess::ReadOnly(
                s,
                format!(
                    "the index's store at {} is read-only ({write_error}); new and rewritten files are read until it can be written",
                    dir.display()
                ),
            ),
            Err(_) => StoreAccess::Unavailable(unavailable(&write_error)),
        },
    }
}

/// What loading an index from its store found.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) files: FileMap,
    /// Filters that could not be used (damaged, over the memory budget),
    /// with the first reason; those of a column no longer indexed are
    /// skipped without counting.
    pub(crate) unusable: usize,
    pub(crate) first_problem: Option<String>,
}

impl Loaded {
    fn problem(&mut self, why: String) {
        self.unusable += 1;
        self.first_problem.get_or_insert(why);
    }
}

/// Every filter of the index named `prefix` in `store`, by file, for the
/// indexed `columns`: loaded into memory (a file's filters must all name
/// the same identity, else the file is left out and read).
pub(crate) fn load(store: &FilterStore, prefix: &str, columns: &[String]) -> Loaded {
    let mut out = Loaded::default();
    let mut infos = Vec::new();
    for r in store.list_sealed_each(prefix) {
        match r {
            Ok(info) => infos.push(info),
            Err(e) => out.problem(e.to_string()),
        }
    }
    let mut files: HashMap<String, IndexedFile> = HashMap::new();
    let mut mixed = Vec::new();
    for (info, loaded) in infos.iter().zip(store.load_sealed(&infos)) {
        let filter = match loaded {
            Ok(f) => f,
            Err(e) => {
                out.problem(format!("{}: {e}", info.name()));
                continue;
            }
        };
        let Some((identity, column)) = FileIdentity::from_tag(info.tag()) else {
            out.problem(format!("{}: its tag is not an index's", info.name()));
            continue;
        };
        let Some(c) = columns.iter().position(|name| *name == column) else {
            continue;
        };
        let entry = files
            .entry(identity.path.clone())
            .or_insert_with(|| IndexedFile {
                identity: identity.clone(),
                filters: vec![None; columns.len()],
            });
        if entry.identity != identity {
            mixed.push(identity.path.clone());
            continue;
        }
        entry.filters[c] = Some(Arc::new(filter));
    }
    for path in mixed {
        files.remove(&path);
        out.problem(format!(
            "{path}: its filters were built from different versions"
        ));
    }
    out.files.files = files;
    out
}
