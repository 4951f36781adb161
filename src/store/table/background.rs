//! Folds in the background: the write that reaches the fold threshold
//! starts a fold of the log as it stands on a thread of its own and
//! returns; the writes after it go on appending to the same log. A later
//! write (or anything that needs the page file) takes the fold's result in
//! under the writer lock.
//!
//! # What the fold touches, and why that is safe beside the writer
//! The fold works on its own handles of the two files
//! ([`PageFile::try_clone`], a duplicated log descriptor) and on what the
//! writer had appended when it started: the records numbered from the
//! superblock's `folded_seq` up to (not including) `until_seq`, bytes
//! `log_start .. end` of the log. The writer only appends past `end`, so
//! those bytes do not change under it. In the page file it writes only
//! slots that the superblock in force does not name (`Fold::write_chunk`),
//! which nothing else reads or writes while it runs: every other writer of
//! the page file (a fold on the caller's thread, a bulk load, an import, a
//! regeneration's swap, a drop, the generation's end) first waits for it
//! and takes its result in ([`Generation::settle_fold`]). Lookups never
//! read the page file. A remove that reads a clean block's counters from
//! the page file reads the slot the writer's superblock names, which the
//! fold does not write; the block being clean, the records the fold folds
//! do not touch it, so the slot the fold commits for its chunk holds the
//! same counters for it.
//!
//! # The commit, and a cut at any point
//! The fold commits like any other (`docs/FORMAT.md` § 11): the chunks
//! synced, then the superblock copy not in force, naming the new slots,
//! `folded_seq = until_seq` and `log_start = end` (where record `until_seq`
//! starts), and claiming the records that the writer's syncs had made
//! durable when it is written (`durable_seq`: among them those appended
//! after `end` while the fold ran, which a cut leaves in the log), synced.
//! A cut before that leaves the old superblock in force, with the whole log
//! from its `log_start`. A cut after it leaves the new
//! one: a reader starts at byte `end`, at record `until_seq`, and takes the
//! records the writer appended after the fold started, which are there as
//! far as they were written and synced (the log's own durability rules,
//! unchanged). Only when the writer has taken the result in are bytes
//! punched out of the log ([`punch_prefix`]), and only those before the
//! `log_start` of the superblock the fold replaced: the copy before the one
//! in force still finds every record it needs (the `docs/FORMAT.md` § 11
//! fallback when the copy in force is damaged); the next fold overwrites
//! that copy's slots (a slot it wrote is then refused by its fold number),
//! and its adoption punches the rest. A fold on the writer's thread empties
//! the log and starts it again at byte 0, where a reader that fell back to
//! an older copy finds a record numbered past that copy's and refuses the
//! table (`check_newer_copy` in `generation.rs`).
//!
//! An error of the fold before its commit changes nothing in force: the
//! writer takes it in as "not folded", and its next fold runs on the
//! writer's thread, where an error reaches the caller (a failed sync of
//! the chunks was the fold's, and the next fold writes those chunks again).
//! An error of the commit whose outcome is unknown stops the store's
//! writes, as on the writer's thread.

use super::fold::{fold_stretch, whole_span, Stretch};
use super::generation::Generation;
use super::state::{Background, Done, Writer};
use crate::filter::params::FilterParams;
use crate::store::disk::log::{Binding, LogSync};
use crate::store::disk::log_read::Span;
use crate::store::disk::pagefile::PageFile;
use crate::store::disk::sys::punch_prefix;
use crate::store::error::StoreError;
use crate::store::shared::Shared;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the thread needs: its own handles, and what to fold.
struct Job {
    params: FilterParams,
    table: String,
    shared: Arc<Shared>,
    pages: PageFile,
    log: File,
    sync: Arc<LogSync>,
    binding: Binding,
    span: Span,
    end: u64,
    ops: u64,
}

impl Job {
    fn run(mut self, cancel: &AtomicBool) -> Result<Done, StoreError> {
        #[cfg(test)]
        gate::wait(&self.shared.dir);
        let stretch = Stretch {
            file: &self.log,
            binding: self.binding,
            span: self.span,
            end: self.end,
            ops: self.ops,
            sync: &self.sync,
        };
        let folded = fold_stretch(
            &mut self.pages,
            &stretch,
            &self.params,
            &self.table,
            &self.shared,
            self.end,
            Some(cancel),
        )?;
        Ok(Done {
            sb: self.pages.superblock().clone(),
            ops: self.ops,
            delta: folded.delta,
            saturated: folded.saturated,
        })
    }
}

impl Background {
    /// Whether the fold has finished (its result is ready to take in).
    pub(crate) fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

impl Generation {
    /// Starts a fold of the whole log (its buffer written first) on a
    /// thread of its own; `Ok(false)` when it cannot (no thread, no second
    /// file handle): the caller folds on its own thread.
    pub(super) fn start_fold(&self, w: &mut Writer) -> Result<bool, StoreError> {
        debug_assert!(w.background.is_none());
        self.write_buffer(w)?;
        let job = || -> std::io::Result<Job> {
            Ok(Job {
                params: self.params,
                table: self.meta.name.clone(),
                shared: Arc::clone(&self.shared),
                pages: w.pages.try_clone()?,
                log: w.log.file().try_clone()?,
                sync: Arc::clone(w.log.sync()),
                binding: w.log.binding(),
                span: whole_span(w),
                end: w.log.end(),
                ops: w.log_ops,
            })
        };
        let Ok(job) = job() else {
            return Ok(false);
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&cancel);
        let spawned = std::thread::Builder::new()
            .name("filterstore-fold".into())
            .spawn(move || {
                let dir = job.shared.dir.clone();
                crate::store::disk::io::fault::in_background_fold(&dir, || job.run(&stop))
            });
        match spawned {
            Ok(handle) => {
                w.background = Some(Background { handle, cancel });
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Takes in the result of a fold in the background if it has finished.
    pub(super) fn poll_fold(&self, w: &mut Writer) {
        if w.background.as_ref().is_some_and(Background::is_finished) {
            self.settle_fold(w, false);
        }
    }

    /// Waits for the fold in the background, if one runs (asking it to stop
    /// early when `cancel`: whatever it has committed by then stays), and
    /// takes its result in: afterwards the writer's page file is the only
    /// one that writes, and its superblock is the one in force on disk.
    pub(crate) fn settle_fold(&self, w: &mut Writer, cancel: bool) {
        let Some(bg) = w.background.take() else {
            return;
        };
        if cancel {
            bg.cancel.store(true, Ordering::Release);
        }
        match bg.handle.join() {
            Ok(Ok(done)) => self.adopt(w, done),
            // Nothing committed: the next fold runs on the writer's thread,
            // where its error, if it has one, reaches a caller.
            Ok(Err(_)) | Err(_) => w.fold_here = true,
        }
    }

    /// Takes in a fold committed in the background: its superblock, and the
    /// operations it folded; then frees the log's bytes before where the
    /// superblock it replaced started the log (or, where they cannot be
    /// freed, has the next fold run on the writer's thread, which empties
    /// the log). The records from there on stay: should the new superblock
    /// copy be damaged later, the one before it (whose slots the next fold
    /// overwrites, not this one) reads them all again, no record lost.
    fn adopt(&self, w: &mut Writer, done: Done) {
        let start = w.pages.superblock().log_start;
        w.pages.adopt(done.sb);
        w.log_ops -= done.ops;
        self.pending.store(w.log_ops, Ordering::Relaxed);
        w.folded_live += done.delta;
        w.saturated += done.saturated;
        if !matches!(punch_prefix(w.log.file(), start), Ok(true)) {
            w.fold_here = true;
        }
    }
}

/// Unit tests: holds the next fold in the background of a store before it
/// reads the log, until the test lets it go (keyed by store directory, so
/// that tests running side by side do not meet).
#[cfg(test)]
pub(super) mod gate {
    use std::path::{Path, PathBuf};
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::Mutex;

    static GATES: Mutex<Vec<(PathBuf, Receiver<()>)>> = Mutex::new(Vec::new());

    /// Holds the next fold in the background of the store at `dir` until
    /// the sender returned sends, or is dropped.
    pub(crate) fn close(dir: &Path) -> Sender<()> {
        let (tx, rx) = channel();
        GATES.lock().unwrap().push((dir.to_path_buf(), rx));
        tx
    }

    pub(super) fn wait(dir: &Path) {
        let rx = {
            let mut gates = GATES.lock().unwrap();
            let at = gates.iter().position(|(d, _)| d == dir);
            at.map(|i| gates.swap_remove(i).1)
        };
        if let Some(rx) = rx {
            let _ = rx.recv();
        }
    }
}
