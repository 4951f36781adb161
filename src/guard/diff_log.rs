//! [`DiffLog`]: a guard storage's differential file as Severance and Lohman
//! meant it, an append-only log, with an in-memory index of the changed
//! keys that answers the differential reads.
//!
//! The changes live in two places at once: in the logs on disk (`<store>/
//! guard-logs/`, `store::disk::guard_log`), which make them durable, and in
//! the index, which reads them. The index has two parts:
//!
//! * **active**: the changes of the log being appended to;
//! * **frozen**: the changes of older logs, which a merge is moving (or
//!   will move) into the base. A key's active change is newer than its
//!   frozen one, so reads look in the active part first.
//!
//! [`freeze`](DiffLog::freeze) starts a new log and moves the active part
//! to the frozen one (when nothing is frozen); the storage's merge applies
//! the frozen changes to the base, makes the base durable, and only then
//! [`finish`](DiffLog::finish)es: the frozen logs are deleted, oldest
//! first, each deletion durable before the next, and the frozen part is
//! dropped. Reads of a frozen key during the merge find the frozen change,
//! which is what the base is being given, so a read never sees the base
//! half merged.
//!
//! Recovery ([`DiffLog::open`]) reads every log of the storage, oldest
//! first, into the frozen part (a newer log's change of a key replaces an
//! older one's), and starts a new log. A cut at any point of a merge leaves
//! the logs not yet deleted, whose changes are applied to the base again by
//! the next merge: applying a change is idempotent, and the logs left are
//! the newest ones, so the base ends with the newest change of every key.
//!
//! **Buffered writes** ([`append_buffered`](DiffLog::append_buffered), a
//! guard write at [`Durability::Buffered`](crate::Durability)) are
//! readable at once and held in memory, in the order they were made, until
//! the next durable write, [`flush`](DiffLog::flush), freeze or drop writes
//! them into the log ahead of whatever comes with it, as one record synced
//! like any other. So the log's bytes are those of durable writes only, and
//! the rule that a record is written only after the one before it was
//! synced holds: a buffered change is lost by a crash before its flush
//! (the guard's filter insert, made durable first, then only costs a false
//! positive), never half-written. Holding the log's lock to buffer a write
//! keeps the index's order of the changes the log's.
//!
//! Each part keeps its logs' records as they were appended and maps every
//! changed key to its newest change in them (`diff_index.rs`). The index's
//! memory (the records, and [`ENTRY_OVERHEAD`] bytes per change) is
//! reserved in the store's memory budget before a change is written; a
//! write over the budget is refused and nothing is written.

use super::diff_index::{key_hash, ChangeRef, Part, ENTRY_OVERHEAD};
use super::diff_pending::{
    commit_pending, outcome_error, write_pending, Failure, Outcome, Pending,
};
use super::sled_error::SledDiffError;
use super::sled_error::GUARD_PENDING_LIMIT;
use super::storage::Change;
use crate::store::budget::{self, Reservation};
use crate::store::disk::catalog_log::{
    encode_ops_into, encode_record_into, seal_record, Op, RECORD_HEAD,
};
use crate::store::disk::guard_log::{self, GuardLog, ReadError, MAX_RECORD};
use crate::store::disk::CommitError;
use crate::store::StoreError;
use parking_lot::{Condvar, Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The changes a merge moves into the base: those of the logs
/// `generations`.
pub(crate) struct Frozen {
    changes: Part,
    generations: Vec<u64>,
    _memory: Option<Reservation>,
}

impl Frozen {
    /// Nothing frozen.
    fn none() -> Frozen {
        Frozen {
            changes: Part::default(),
            generations: Vec::new(),
            _memory: None,
        }
    }

    /// The changes to merge.
    pub(crate) fn changes(&self) -> impl Iterator<Item = (&[u8], ChangeRef<'_>)> {
        self.changes.iter().map(|(_, k, c)| (k, c))
    }

    /// Whether there is nothing to merge (and no log to delete).
    pub(crate) fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.generations.is_empty()
    }
}

/// A write waiting for the record that will hold it.
struct Queued {
    /// Writes are numbered in the order they were queued.
    ticket: u64,
    /// Room for a record's head and op count, then the write's ops
    /// (`catalog_log::encode_ops_into`).
    ops: Vec<u8>,
    count: u32,
    memory: Reservation,
}

/// The writes waiting, and the outcomes not yet taken by their writers.
#[derive(Default)]
struct Queue {
    next_ticket: u64,
    waiting: std::collections::VecDeque<Queued>,
    done: std::collections::HashMap<u64, Outcome>,
    /// A writer is committing a group.
    leading: bool,
}

struct Index {
    active: Part,
    active_memory: Reservation,
    frozen: Arc<Frozen>,
}

impl Index {
    /// The newest change of `key` (hash `hash`): the active part's, else
    /// the frozen part's.
    fn find(&self, hash: u64, key: &[u8]) -> Option<Change> {
        self.active
            .get(hash, key)
            .or_else(|| self.frozen.changes.get(hash, key))
            .map(ChangeRef::to_change)
    }

    /// The keys changed in the frozen part only.
    fn frozen_only(&self) -> impl Iterator<Item = &[u8]> {
        self.frozen
            .changes
            .iter()
            .filter(|(hash, k, _)| !self.active.contains(*hash, k))
            .map(|(_, k, _)| k)
    }
}

/// A guard storage's differential file (module docs).
pub(crate) struct DiffLog {
    dir: PathBuf,
    stem: String,
    name: String,
    /// The log appended to; appends and freezes are serialised here.
    writer: Mutex<GuardLog>,
    /// Buffered changes not yet written (only locked with `writer` held).
    pending: Mutex<Pending>,
    /// Writes waiting for a record (group commit). Never locked while
    /// waiting for `writer`.
    queue: Mutex<Queue>,
    /// Signalled when a group's outcome is known.
    served: Condvar,
    index: RwLock<Index>,
    /// The seed of the index's key hashes, drawn per index: a host's keys
    /// cannot be chosen to collide without knowing it.
    seed: u64,
}

fn io_err(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// The ops of `changes` in a log record: `(put, key, value)`.
fn ops_of(
    changes: &[(Vec<u8>, Change)],
) -> impl ExactSizeIterator<Item = (bool, &[u8], &[u8])> + Clone {
    changes.iter().map(|(k, c)| match c {
        Change::Put(v) => (true, k.as_slice(), v.as_slice()),
        Change::Delete => (false, k.as_slice(), &[][..]),
    })
}

/// A seed for an index's key hashes, from the process's random state.
fn new_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x6775_6172_642d_6c6f);
    h.finish()
}

/// What the index is charged for a record of `record_len` bytes holding
/// `changes` changes.
fn record_charge(record_len: usize, changes: usize) -> u64 {
    record_len as u64 + changes as u64 * ENTRY_OVERHEAD
}

/// The changes of every log of `generations`, oldest first, as the index
/// holds them (records encoded again as the append made them, hashed with
/// `seed`), and what the index is charged for them ([`record_charge`]).
fn read_logs(
    dir: &Path,
    stem: &str,
    generations: &[u64],
    seed: u64,
) -> Result<(Part, u64), StoreError> {
    let mut changes = Part::default();
    let mut bytes = 0;
    for &generation in generations {
        let replay = guard_log::read(dir, stem, generation).map_err(|e| match e {
            ReadError::Io(source) => StoreError::Io {
                op: "reading the guard's differential file",
                source,
            },
            ReadError::Damaged(what) => StoreError::storage(
                "reading the guard's differential file (nothing was changed; restore the \
                 log from a backup, or move it away to open the storage without its changes)",
                what,
            ),
        })?;
        for ops in replay.records {
            let mut record = Vec::new();
            encode_record_into(
                &mut record,
                0,
                ops.iter().map(|op| match op {
                    Op::Put(k, v) => (true, k.as_slice(), v.as_slice()),
                    Op::Remove(k) => (false, k.as_slice(), &[][..]),
                }),
            );
            bytes += record_charge(record.len(), ops.len());
            changes.push(seed, record);
        }
    }
    Ok((changes, bytes))
}

impl DiffLog {
    /// Opens the differential file of guard storage `name` in the store at
    /// `store_dir`: every log found read into the frozen part (module
    /// docs), and a new log begun. A damaged log refuses the open (one
    /// line naming the file): read short, it would lose acknowledged
    /// changes.
    pub(crate) fn open(store_dir: &Path, name: &str) -> Result<DiffLog, StoreError> {
        let dir = store_dir.join(guard_log::GUARD_LOG_DIR);
        crate::store::disk::io::create_dir_durably(&dir)
            .map_err(io_err("creating the guard logs' directory"))?;
        let stem: String = name.bytes().map(|b| format!("{b:02x}")).collect();
        let generations = guard_log::generations(&dir, &stem)
            .map_err(io_err("listing the guard's differential file"))?;
        let seed = new_seed();
        let (changes, bytes) = read_logs(&dir, &stem, &generations, seed)?;
        let memory = budget::reserve(
            || format!("the differential file of guard storage {name:?}"),
            bytes,
        )?;
        let next = generations.last().map_or(0, |g| g + 1);
        let log = GuardLog::create(&dir, &stem, next)
            .map_err(io_err("creating the guard's differential file"))?;
        Ok(DiffLog {
            dir,
            stem,
            name: name.to_string(),
            writer: Mutex::new(log),
            pending: Mutex::new(Pending::default()),
            queue: Mutex::new(Queue::default()),
            served: Condvar::new(),
            index: RwLock::new(Index {
                active: Part::default(),
                active_memory: Reservation::none(),
                frozen: Arc::new(Frozen {
                    changes,
                    generations,
                    _memory: Some(memory),
                }),
            }),
            seed,
        })
    }

    /// The change recorded for `key`, if any.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Change> {
        let index = self.index.read();
        index.find(key_hash(self.seed, key), key)
    }

    /// The changes recorded for `keys`, in order.
    pub(crate) fn get_many(&self, keys: &[&[u8]]) -> Vec<Option<Change>> {
        let index = self.index.read();
        keys.iter()
            .map(|k| index.find(key_hash(self.seed, k), k))
            .collect()
    }

    /// Keys with a change.
    pub(crate) fn len(&self) -> usize {
        let index = self.index.read();
        index.active.len() + index.frozen_only().count()
    }

    /// The keys with a change.
    pub(crate) fn keys(&self) -> Vec<Vec<u8>> {
        let index = self.index.read();
        let mut keys: Vec<Vec<u8>> = index.active.iter().map(|(_, k, _)| k.to_vec()).collect();
        keys.extend(index.frozen_only().map(<[u8]>::to_vec));
        keys
    }

    /// Whether no key has a change.
    pub(crate) fn is_empty(&self) -> bool {
        let index = self.index.read();
        index.active.is_empty() && index.frozen.changes.is_empty()
    }

    /// Bytes of the active log.
    pub(crate) fn active_len(&self) -> u64 {
        self.writer.lock().len()
    }

    /// Appends `changes`, durable when this returns, then makes them
    /// readable; returns the active log's length. Refused before anything
    /// is written when its record would pass [`MAX_RECORD`] bytes or the
    /// index's memory the budget. Group commit: the writes queued while a
    /// record is written and synced go into the next record together (in
    /// the order queued), one write and one `fdatasync` for all of them,
    /// committed by one of their writers; a record is written only after
    /// the one before it was synced. A failed write changed nothing; a
    /// failed sync leaves the outcome unknown (said in the error), and the
    /// log takes no more changes until the storage is opened again.
    pub(crate) fn append(&self, changes: &[(Vec<u8>, Change)]) -> Result<u64, SledDiffError> {
        let (ops, memory) = self.prepare(changes)?;
        self.commit_queued(ops, changes.len() as u32, memory)
    }

    /// [`append`](DiffLog::append) of `count` changes already encoded as
    /// `ops` ([`prepare`](DiffLog::prepare)) with their memory reserved.
    fn commit_queued(
        &self,
        ops: Vec<u8>,
        count: u32,
        memory: Reservation,
    ) -> Result<u64, SledDiffError> {
        let mut queue = self.queue.lock();
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push_back(Queued {
            ticket,
            ops,
            count,
            memory,
        });
        loop {
            if let Some(outcome) = queue.done.remove(&ticket) {
                return outcome.map_err(|(failure, kind, what)| outcome_error(failure, kind, what));
            }
            if queue.leading {
                self.served.wait(&mut queue);
                continue;
            }
            queue.leading = true;
            drop(queue);
            let outcomes = self.commit_group();
            queue = self.queue.lock();
            queue.leading = false;
            queue.done.extend(outcomes);
            self.served.notify_all();
        }
    }

    /// `changes` as a record's body (room for its head and op count, then
    /// the ops), and the index's memory for them reserved: refused, with
    /// nothing done, over [`MAX_RECORD`] bytes or over the budget.
    fn prepare(
        &self,
        changes: &[(Vec<u8>, Change)],
    ) -> Result<(Vec<u8>, Reservation), SledDiffError> {
        let record = GuardLog::record_len(ops_of(changes));
        if record > MAX_RECORD {
            return Err(SledDiffError::Store(StoreError::Io {
                op: "writing the guard's differential file",
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} changes make a {record}-byte record, over the {MAX_RECORD}-byte \
                         limit of one write; nothing was written (write them in smaller calls)",
                        changes.len()
                    ),
                ),
            }));
        }
        let memory = budget::reserve(
            || format!("the differential file of guard storage {:?}", self.name),
            record_charge(record, changes.len()),
        )?;
        let mut ops = Vec::with_capacity(record);
        ops.resize(RECORD_HEAD + 4, 0);
        encode_ops_into(&mut ops, ops_of(changes));
        Ok((ops, memory))
    }

    /// Makes `changes` readable at once and holds them for the log (module
    /// docs: lost by a crash before the next durable write, flush, freeze
    /// or drop); returns the active log's length. If the changes held would
    /// pass [`GUARD_PENDING_LIMIT`] bytes, they are first written as one
    /// record and synced, and an error of that write is this call's (the
    /// changes of this call are then not made); changes whose record alone
    /// is larger are written as [`append`](DiffLog::append) writes them.
    /// Refused, with nothing done, once a write or sync of the log has
    /// failed.
    pub(crate) fn append_buffered(
        &self,
        changes: &[(Vec<u8>, Change)],
    ) -> Result<u64, SledDiffError> {
        let (mut record, memory) = self.prepare(changes)?;
        if record.len() > GUARD_PENDING_LIMIT {
            // Larger than the buffer: written as a durable write is.
            return self.commit_queued(record, changes.len() as u32, memory);
        }
        let mut log = self.writer.lock();
        let mut pending = self.pending.lock();
        if let Err(e) = log.refuse_if_failed() {
            return Err(outcome_error(Failure::Before, e.kind(), e.to_string()));
        }
        if pending.ops.len() + record.len() > GUARD_PENDING_LIMIT {
            write_pending(&mut log, &mut pending)?;
        }
        pending.ops.extend_from_slice(&record[RECORD_HEAD + 4..]);
        pending.count += changes.len() as u32;
        seal_record(&mut record, 0, changes.len() as u32);
        let mut index = self.index.write();
        index.active.push(self.seed, record);
        index.active_memory.join(memory);
        Ok(log.len())
    }

    /// Writes the buffered changes into the log as one record and syncs
    /// it; nothing to do without any. An error is the record's (see
    /// [`append`](DiffLog::append)).
    pub(crate) fn flush(&self) -> Result<(), SledDiffError> {
        let mut log = self.writer.lock();
        let mut pending = self.pending.lock();
        write_pending(&mut log, &mut pending)
    }

    /// The writes queued, oldest first, as many as one record holds (at
    /// least one, if any is queued), taken off the queue.
    fn take_group(&self) -> Vec<Queued> {
        let mut queue = self.queue.lock();
        let mut bytes = 0;
        let mut taken = 0;
        for q in &queue.waiting {
            bytes += q.ops.len() - RECORD_HEAD - 4;
            if taken > 0 && bytes + RECORD_HEAD + 4 > MAX_RECORD {
                break;
            }
            taken += 1;
        }
        queue.waiting.drain(..taken).collect()
    }

    /// Commits the writes queued (as many as one record holds, at least
    /// one) as one record of the active log, and makes them readable if it
    /// is durable; returns each one's outcome. Takes the group once the log
    /// is free, so that the writes queued meanwhile join it.
    fn commit_group(&self) -> Vec<(u64, Outcome)> {
        let mut log = self.writer.lock();
        let mut group = self.take_group().into_iter();
        let Some(first) = group.next() else {
            return Vec::new();
        };
        let (mut record, mut count, mut memory) = (first.ops, first.count, first.memory);
        let mut tickets = vec![first.ticket];
        for q in group {
            record.extend_from_slice(&q.ops[RECORD_HEAD + 4..]);
            count += q.count;
            memory.join(q.memory);
            tickets.push(q.ticket);
        }
        // Buffered changes go into the log ahead of the group (they were
        // made, and are indexed, before it); the index gets the group's.
        let committed = {
            let mut pending = self.pending.lock();
            if pending.count == 0 {
                log.commit(&mut record, count)
            } else if pending.ops.len() + record.len() > MAX_RECORD {
                // Together over one record's limit (which recovery's
                // search for whole records past a torn one relies on): two
                // records, in order.
                commit_pending(&mut log, &mut pending).and_then(|()| log.commit(&mut record, count))
            } else {
                let mut with = Vec::with_capacity(pending.ops.len() + record.len());
                with.extend_from_slice(&record[..RECORD_HEAD + 4]);
                with.extend_from_slice(&pending.ops);
                with.extend_from_slice(&record[RECORD_HEAD + 4..]);
                let all = count + pending.count;
                *pending = Pending::default();
                seal_record(&mut record, 0, count);
                log.commit(&mut with, all)
            }
        };
        let outcome: Outcome = match committed {
            Ok(()) => {
                let mut index = self.index.write();
                index.active.push(self.seed, record);
                index.active_memory.join(memory);
                Ok(log.len())
            }
            Err(CommitError::Before(e)) => Err((Failure::Before, e.kind(), e.to_string())),
            Err(CommitError::After(e)) => Err((Failure::After, e.kind(), e.to_string())),
        };
        tickets.into_iter().map(|t| (t, outcome.clone())).collect()
    }

    /// What a merge must move into the base: the frozen part if there is
    /// one (a merge that failed, or one cut short by a restart, left it),
    /// else the active part, frozen now (a new log begun first, so that
    /// later appends go there). Empty when there is nothing to merge.
    /// The buffered changes, which the active part holds, are first written
    /// into its log (one record, one sync).
    pub(crate) fn freeze(&self) -> Result<Arc<Frozen>, StoreError> {
        let mut log = self.writer.lock();
        {
            let index = self.index.read();
            if !index.frozen.is_empty() || index.active.is_empty() {
                return Ok(index.frozen.clone());
            }
        }
        // The buffered changes are in the active part: into its log first.
        write_pending(&mut log, &mut self.pending.lock()).map_err(|e| match e {
            SledDiffError::Store(e) => e,
            other => StoreError::Io {
                op: "writing the buffered changes into the guard's differential file before a \
                     merge (nothing was merged)",
                source: std::io::Error::other(other.to_string()),
            },
        })?;
        let next = GuardLog::create(&self.dir, &self.stem, log.generation() + 1)
            .map_err(io_err("creating the guard's differential file"))?;
        let old = std::mem::replace(&mut *log, next);
        let mut index = self.index.write();
        let changes = std::mem::take(&mut index.active);
        let memory = std::mem::replace(&mut index.active_memory, Reservation::none());
        index.frozen = Arc::new(Frozen {
            changes,
            generations: vec![old.generation()],
            _memory: Some(memory),
        });
        Ok(index.frozen.clone())
    }

    /// After `frozen`'s changes are durable in the base: deletes its logs,
    /// oldest first, and drops it from the index. A failure leaves it
    /// frozen (its logs not yet deleted are merged again, harmlessly).
    pub(crate) fn finish(&self, frozen: &Arc<Frozen>) -> Result<(), StoreError> {
        for &generation in &frozen.generations {
            guard_log::remove(&self.dir, &self.stem, generation)
                .map_err(io_err("deleting a merged guard log"))?;
        }
        let mut index = self.index.write();
        if Arc::ptr_eq(&index.frozen, frozen) {
            index.frozen = Arc::new(Frozen::none());
        }
        Ok(())
    }

    /// Deletes every change and every log, and begins a new log (the
    /// storage's `clear`; its caller keeps merges out).
    pub(crate) fn clear(&self) -> Result<(), StoreError> {
        let mut log = self.writer.lock();
        let frozen = self.index.read().frozen.clone();
        let next = GuardLog::create(&self.dir, &self.stem, log.generation() + 1)
            .map_err(io_err("creating the guard's differential file"))?;
        let old = std::mem::replace(&mut *log, next);
        for generation in frozen.generations.iter().copied().chain([old.generation()]) {
            guard_log::remove(&self.dir, &self.stem, generation)
                .map_err(io_err("deleting a guard log"))?;
        }
        *self.pending.lock() = Pending::default();
        let mut index = self.index.write();
        index.active = Part::default();
        index.active_memory = Reservation::none();
        index.frozen = Arc::new(Frozen::none());
        Ok(())
    }
}

impl Drop for DiffLog {
    /// Writes the buffered changes (best effort: a failure loses them, as a
    /// crash would).
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
#[path = "diff_log_tests.rs"]
mod tests;
