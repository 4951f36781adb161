//! How the catalog changes: an edit ([`CatalogEdit`]) made inside
//! [`Catalog::commit`], written as one record of the catalog log (format 6)
//! or, in a store of format 3 to 5 (the migrations), as a new catalog file;
//! checkpoints that rewrite the file when the log has grown past it; and
//! the log's set-up when a store is created, migrated or opened.
//!
//! The commit point of a change is its log record's `fdatasync` (format 6)
//! or the new file's rename (before): an error before it changed nothing,
//! in memory or on disk; a failure of the sync that follows it is
//! [`StoreError::OutcomeUnknown`] (the change is applied in memory, since
//! the running system may hold it, and the caller stops the store's
//! writes).

use super::records::{Catalog, LogSlot, Record};
use super::sealed::SealedMeta;
use super::{sealed_key, table_key, StoreHeader, TableMeta, HEADER_KEY};
use crate::store::disk::catalog_log::{CatalogLog, Op};
use crate::store::disk::{catalog_file, CommitError};
use crate::store::error::StoreError;

/// The least size of the log at which a checkpoint may be due: below it the
/// log is never folded into the file, however small the file.
pub(crate) const CHECKPOINT_MIN_BYTES: u64 = 64 * 1024;

/// One change of an edit.
#[derive(Debug)]
enum Change {
    Header(StoreHeader),
    PutTable(TableMeta),
    RemoveTable(String),
    PutSealed(SealedMeta),
    RemoveSealed(String),
}

/// Changes to a catalog, made inside [`Catalog::commit`] and applied
/// together.
#[derive(Debug)]
pub(crate) struct CatalogEdit {
    header: StoreHeader,
    changes: Vec<Change>,
}

impl CatalogEdit {
    /// Adds or replaces table `meta.name`'s record.
    pub(crate) fn put(&mut self, meta: TableMeta) {
        self.changes.push(Change::PutTable(meta));
    }

    /// Removes table `name`'s record.
    pub(crate) fn remove(&mut self, name: &str) {
        self.changes.push(Change::RemoveTable(name.to_string()));
    }

    /// Adds or replaces sealed filter `meta.name`'s record.
    pub(crate) fn put_sealed(&mut self, meta: SealedMeta) {
        self.changes.push(Change::PutSealed(meta));
    }

    /// Removes sealed filter `name`'s record.
    pub(crate) fn remove_sealed(&mut self, name: &str) {
        self.changes.push(Change::RemoveSealed(name.to_string()));
    }

    /// Sets the header.
    pub(crate) fn set_header(&mut self, header: StoreHeader) {
        self.header = header;
        self.changes.push(Change::Header(header));
    }

    /// The header as edited so far.
    pub(crate) fn header(&self) -> StoreHeader {
        self.header
    }

    /// The log ops of the edit, encoded before anything is written.
    fn ops(&self) -> Result<Vec<Op>, StoreError> {
        self.changes
            .iter()
            .map(|c| {
                Ok(match c {
                    Change::Header(h) => Op::Put(HEADER_KEY.to_vec(), h.encode()?),
                    Change::PutTable(m) => Op::Put(table_key(&m.name), m.encode()?),
                    Change::RemoveTable(n) => Op::Remove(table_key(n)),
                    Change::PutSealed(m) => Op::Put(sealed_key(&m.name), m.encode()?),
                    Change::RemoveSealed(n) => Op::Remove(sealed_key(n)),
                })
            })
            .collect()
    }
}

/// Log `id`, not open for appending.
fn named(id: u64) -> LogSlot {
    LogSlot::Named { id, replay: None }
}

fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

impl Catalog {
    /// Applies `change`, durably (module docs for the errors).
    pub(crate) fn commit(
        &mut self,
        change: impl FnOnce(&mut CatalogEdit),
    ) -> Result<(), StoreError> {
        let mut edit = CatalogEdit {
            header: self.header,
            changes: Vec::new(),
        };
        change(&mut edit);
        if matches!(self.log, LogSlot::Whole) {
            return self.commit_whole(edit);
        }
        let ops = edit.ops()?;
        let log = self.log_for_append()?;
        match log.append(&ops) {
            Ok(()) => {
                self.apply(edit);
                Ok(())
            }
            Err(CommitError::Before(source)) => Err(StoreError::Io {
                op: "appending to the catalog log",
                source,
            }),
            Err(CommitError::After(source)) => {
                self.apply(edit);
                Err(StoreError::OutcomeUnknown {
                    op: "committing to the catalog (the sync of its log record)",
                    path: self.dir.clone(),
                    source,
                })
            }
        }
    }

    /// The log, made first if it is missing (an error then changed
    /// nothing: the file names a log that is not there yet, as before).
    fn log_for_append(&mut self) -> Result<&mut CatalogLog, StoreError> {
        if let LogSlot::Missing(id) = self.log {
            let log = CatalogLog::create(&self.dir, id).map_err(io("making the catalog log"))?;
            self.log = LogSlot::Open(log);
        }
        match &mut self.log {
            LogSlot::Open(log) => Ok(log),
            _ => Err(StoreError::ReadOnly {
                path: self.dir.clone(),
            }),
        }
    }

    /// A commit of a store of format 3 to 5: the whole file replaced.
    fn commit_whole(&mut self, edit: CatalogEdit) -> Result<(), StoreError> {
        let mut next = self.detached_copy();
        next.apply(edit);
        match catalog_file::write(&self.dir, &next.entries(None)?) {
            Ok(()) => {
                *self = next;
                Ok(())
            }
            Err(CommitError::Before(source)) => Err(StoreError::Io {
                op: "writing the catalog",
                source,
            }),
            Err(CommitError::After(source)) => {
                *self = next;
                Err(StoreError::OutcomeUnknown {
                    op: "committing the catalog (the directory sync after its rename)",
                    path: self.dir.clone(),
                    source,
                })
            }
        }
    }

    /// A copy of the records and header, whose log (if any) is not open:
    /// for a read of the catalog by another owner (the migrations).
    pub(crate) fn detached_copy(&self) -> Catalog {
        let log = match &self.log {
            LogSlot::Whole => LogSlot::Whole,
            LogSlot::Named { id, .. } | LogSlot::Missing(id) => named(*id),
            LogSlot::Open(l) => named(l.id()),
        };
        Catalog {
            dir: self.dir.clone(),
            header: self.header,
            tables: self.tables.clone(),
            sealed: self.sealed.clone(),
            log,
            file_bytes: self.file_bytes,
        }
    }

    fn apply(&mut self, edit: CatalogEdit) {
        for c in edit.changes {
            match c {
                Change::Header(h) => self.header = h,
                Change::PutTable(m) => {
                    self.tables.insert(m.name.clone(), Record::Ok(m));
                }
                Change::RemoveTable(n) => {
                    self.tables.remove(&n);
                }
                Change::PutSealed(m) => {
                    self.sealed.insert(m.name.clone(), Record::Ok(m));
                }
                Change::RemoveSealed(n) => {
                    self.sealed.remove(&n);
                }
            }
        }
    }

    /// Rewrites the catalog file when the log has grown past both
    /// [`CHECKPOINT_MIN_BYTES`] and the file: the bytes a store writes for
    /// its catalog then stay within a constant factor of its changes'.
    /// `Ok` if no checkpoint was due or one was made; an error of
    /// [`Catalog::checkpoint`] otherwise (the change that preceded it is
    /// committed either way).
    pub(crate) fn checkpoint_if_due(&mut self) -> Result<(), StoreError> {
        match &self.log {
            LogSlot::Open(log) if log.len() > CHECKPOINT_MIN_BYTES.max(self.file_bytes) => {
                self.checkpoint()
            }
            _ => Ok(()),
        }
    }

    /// Writes the catalog file anew, naming log `id + 1`, then makes that
    /// log (empty): the old log's records are in the file, so a cut at any
    /// point leaves the old file and log, or the new file and either log
    /// (a log of another id is ignored). An error writing the file changed
    /// nothing; a failed directory sync after its rename is
    /// [`StoreError::OutcomeUnknown`] (the file and log that a cut would
    /// leave are unknown, so nothing more may be appended); a failure
    /// making the new log leaves it missing, made by the next commit.
    pub(crate) fn checkpoint(&mut self) -> Result<(), StoreError> {
        let id = match &self.log {
            LogSlot::Whole => return Ok(()),
            LogSlot::Named { id, .. } | LogSlot::Missing(id) => *id,
            LogSlot::Open(log) => log.id(),
        } + 1;
        let entries = self.entries(Some(id))?;
        match catalog_file::write(&self.dir, &entries) {
            Ok(()) => {}
            Err(CommitError::Before(source)) => {
                return Err(StoreError::Io {
                    op: "writing the catalog at a checkpoint",
                    source,
                })
            }
            Err(CommitError::After(source)) => {
                self.log = named(id);
                return Err(StoreError::OutcomeUnknown {
                    op: "a checkpoint of the catalog (the directory sync after its rename)",
                    path: self.dir.clone(),
                    source,
                });
            }
        }
        self.file_bytes = catalog_file::encoded_len(&entries);
        self.log = LogSlot::Missing(id);
        self.log_for_append().map(|_| ())
    }

    /// Writes the catalog of a new store: its file, naming log 1, and that
    /// log (empty).
    pub(crate) fn create(dir: &std::path::Path) -> Result<Catalog, StoreError> {
        let mut catalog = Catalog::new(dir);
        let entries = catalog.entries(Some(1))?;
        catalog_file::write(dir, &entries).map_err(|e| match e {
            CommitError::Before(source) | CommitError::After(source) => StoreError::Io {
                op: "writing the catalog of a new store",
                source,
            },
        })?;
        catalog.file_bytes = catalog_file::encoded_len(&entries);
        catalog.log_for_append()?;
        Ok(catalog)
    }

    /// Switches a catalog of format 5 to format 6 (the migration's switch):
    /// the file written whole with the header `header` and a reference to
    /// log 1, then that log made. Errors as [`Catalog::commit`]'s.
    pub(crate) fn switch_to_log(&mut self, header: StoreHeader) -> Result<(), StoreError> {
        let mut next = self.detached_copy();
        next.header = header;
        let entries = next.entries(Some(1))?;
        match catalog_file::write(&self.dir, &entries) {
            Ok(()) => {}
            Err(CommitError::Before(source)) => {
                return Err(StoreError::Io {
                    op: "writing the catalog of format 6",
                    source,
                })
            }
            Err(CommitError::After(source)) => {
                return Err(StoreError::OutcomeUnknown {
                    op: "switching the catalog to format 6 (the directory sync after its rename)",
                    path: self.dir.clone(),
                    source,
                })
            }
        }
        self.header = header;
        self.file_bytes = catalog_file::encoded_len(&entries);
        self.log = LogSlot::Missing(1);
        self.log_for_append().map(|_| ())
    }

    /// For a writing open of a store of format 6: makes the log the file
    /// names ready for appends ([`CatalogLog::resume`]), or makes it anew
    /// (empty) if it is missing or not that log: its records are then the
    /// ones a checkpoint put into the file. The catalog file is not
    /// rewritten.
    pub(crate) fn open_log(&mut self) -> Result<(), StoreError> {
        let LogSlot::Named { id, replay } = &self.log else {
            return Ok(());
        };
        let id = *id;
        match replay {
            Some(r) if r.valid => {
                let log = CatalogLog::resume(&self.dir, id, r)
                    .map_err(io("making the catalog log durable at open"))?;
                self.log = LogSlot::Open(log);
            }
            _ => {
                self.log = LogSlot::Missing(id);
                self.log_for_append()?;
            }
        }
        Ok(())
    }
}
