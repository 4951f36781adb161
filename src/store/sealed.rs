//! Sealed filters (store format 6): named bit filters that never change,
//! for sets that never lose a key — the rows of an immutable data file, a
//! finished segment, a snapshot. A table keeps a counting filter on disk
//! (4 bits per position, `m/2` bytes, two slots per 16 KiB chunk) and a log
//! so that keys can be removed; a sealed filter keeps only its bits
//! (`m/8` bytes), in a pack file shared by the batch it was committed with.
//!
//! A batch ([`SealedBatch`]) of new filters, replacements and removals is
//! one pack file (written and synced with its directory first) and one
//! catalog commit: after a crash it is wholly in force or not at all, and
//! the pack of a batch that did not commit is collected by the next
//! writing open. A filter is loaded ([`FilterStore::load_sealed`]) into
//! memory under the store's memory budget, its bytes checked against their
//! frame's CRC and its catalog record: a damaged or missing one is an
//! error, never an empty filter. Bytes and records: `docs/FORMAT.md` § 9a.

use super::budget::{self, Reservation};
use super::catalog::{validate_name, SealedMeta, MAX_SEALED_TAG};
use super::disk::pack::{self, Pack};
use super::error::StoreError;
use super::open::FilterStore;
use crate::codec::filter_file::{decode_filter, encode_bit_filter, FilterBody};
use crate::filter::bloom::{BitFilter, BloomRead};
use crate::filter::hash::KeyHash;
use crate::filter::params::FilterParams;
use std::collections::{BTreeMap, HashSet};

/// A filter to seal: its name (the rules of table names), its bits, how
/// many keys it holds, and the caller's tag.
#[derive(Debug)]
pub struct NewSealed {
    name: String,
    filter: BitFilter,
    keys: u64,
    target_fp: f64,
    tag: Vec<u8>,
}

impl NewSealed {
    /// Filter `filter`, holding `keys` keys, to be sealed as `name`.
    pub fn new(name: impl Into<String>, filter: BitFilter, keys: u64) -> NewSealed {
        NewSealed {
            name: name.into(),
            filter,
            keys,
            target_fp: 0.0,
            tag: Vec::new(),
        }
    }

    /// The false-positive rate the filter was sized for (kept for
    /// information; 0 if not given).
    pub fn target_fp(mut self, fp: f64) -> NewSealed {
        self.target_fp = fp;
        self
    }

    /// Bytes of the caller's kept with the filter (at most
    /// [`MAX_SEALED_TAG`]), returned by [`SealedInfo::tag`]: what the filter
    /// describes, say a data file's path and version.
    pub fn tag(mut self, tag: impl Into<Vec<u8>>) -> NewSealed {
        self.tag = tag.into();
        self
    }
}

/// Sealed filters to add, replace and remove in one atomic commit.
#[derive(Debug, Default)]
pub struct SealedBatch {
    puts: Vec<NewSealed>,
    removes: Vec<String>,
}

impl SealedBatch {
    /// An empty batch.
    pub fn new() -> SealedBatch {
        SealedBatch::default()
    }

    /// Adds `filter`, replacing a sealed filter of the same name.
    pub fn put(&mut self, filter: NewSealed) -> &mut SealedBatch {
        self.puts.push(filter);
        self
    }

    /// Removes sealed filter `name` (nothing, if there is none).
    pub fn remove(&mut self, name: impl Into<String>) -> &mut SealedBatch {
        self.removes.push(name.into());
        self
    }

    /// Whether the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.removes.is_empty()
    }

    /// Refuses a name that is invalid or named twice, and a tag over its
    /// limit, before anything is written.
    fn check(&self) -> Result<(), StoreError> {
        let mut seen = HashSet::new();
        let names = self.puts.iter().map(|p| &p.name).chain(&self.removes);
        for name in names {
            validate_name(name)?;
            if !seen.insert(name.as_str()) {
                return Err(StoreError::InvalidSealedBatch(format!(
                    "sealed filter {name:?} is named twice"
                )));
            }
        }
        match self.puts.iter().find(|p| p.tag.len() > MAX_SEALED_TAG) {
            Some(p) => Err(StoreError::InvalidSealedBatch(format!(
                "the tag of {:?} is {} bytes; the limit is {MAX_SEALED_TAG}",
                p.name,
                p.tag.len()
            ))),
            None => Ok(()),
        }
    }
}

/// A sealed filter's catalog record: what it is, without its bits.
#[derive(Clone, Debug, PartialEq)]
pub struct SealedInfo {
    meta: SealedMeta,
    params: FilterParams,
}

impl SealedInfo {
    /// The filter's name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Its parameters (layout, `m`, `k`, hash).
    pub fn params(&self) -> &FilterParams {
        &self.params
    }

    /// The keys it holds, as its writer counted them.
    pub fn keys(&self) -> u64 {
        self.meta.keys
    }

    /// The false-positive rate it was sized for (0 if not given).
    pub fn target_fp(&self) -> f64 {
        self.meta.target_fp
    }

    /// The caller's tag ([`NewSealed::tag`]).
    pub fn tag(&self) -> &[u8] {
        &self.meta.tag
    }

    /// Bytes its bits take in memory once loaded.
    pub fn bit_bytes(&self) -> u64 {
        self.params.bit_bytes()
    }

    /// Bytes it takes in its pack file (its bits and 76 bytes of frame).
    pub fn stored_bytes(&self) -> u64 {
        self.meta.len
    }

    /// Seconds since the Unix epoch when it was committed.
    pub fn created_unix_s(&self) -> u64 {
        self.meta.created_unix_s
    }
}

/// A sealed filter in memory: its bits, held under the store's memory
/// budget for as long as it lives.
#[derive(Debug)]
pub struct SealedFilter {
    info: SealedInfo,
    bits: BitFilter,
    _memory: Reservation,
}

impl SealedFilter {
    /// What the filter is.
    pub fn info(&self) -> &SealedInfo {
        &self.info
    }

    /// Its bits.
    pub fn filter(&self) -> &BitFilter {
        &self.bits
    }

    /// Whether `key` may be in the set; `false` means definitely absent.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.bits.contains(key)
    }

    /// [`SealedFilter::contains`] for a key already hashed with this
    /// filter's [`HashSpec`](crate::HashSpec) (one hash, many filters).
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        self.bits.contains_hash(h)
    }
}

fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl FilterStore {
    /// Commits `batch` durably: its new filters are written to one new pack
    /// file (synced, with its directory), then every put and remove enters
    /// the catalog in one commit. An error before that commit changed
    /// nothing (the pack is removed, or collected by the next writing
    /// open); [`StoreError::OutcomeUnknown`] says the commit's sync failed
    /// (the store stopped writing; a reopen finds the batch wholly in force
    /// or wholly absent). Packs that no filter names any more are deleted
    /// after the commit. Returns the put filters, in the batch's order, as
    /// loaded ones: their bits moved in, held under the memory budget
    /// (reserved before anything is written).
    ///
    /// # Examples
    /// ```
    /// use filterstore::{BitFilter, FilterParams, FilterStore, HashSpec, Layout};
    /// use filterstore::{NewSealed, SealedBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let params = FilterParams::for_capacity(1_000, 1e-4, Layout::Blocked, HashSpec::xxh3(3))?;
    /// let mut batch = SealedBatch::new();
    /// for file in 0..3u32 {
    ///     let f = BitFilter::new(params)?;
    ///     f.insert(&file.to_le_bytes());
    ///     batch.put(NewSealed::new(format!("orders.{file}"), f, 1).tag(format!("part-{file}")));
    /// }
    /// let sealed = store.commit_sealed(batch)?;
    /// assert!(sealed[2].contains(&2u32.to_le_bytes()));
    /// let infos = store.list_sealed("orders.")?;
    /// assert_eq!(infos.len(), 3);
    /// let loaded = store.load_sealed(&infos);
    /// let f1 = loaded[1].as_ref().map_err(|e| e.to_string())?;
    /// assert_eq!(f1.info().tag(), b"part-1");
    /// assert!(f1.contains(&1u32.to_le_bytes()));
    /// # Ok(()) }
    /// ```
    pub fn commit_sealed(&self, batch: SealedBatch) -> Result<Vec<SealedFilter>, StoreError> {
        batch.check()?;
        self.inner.shared.check_writable()?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let Encoded {
            held,
            files,
            bytes: _encoded,
        } = reserve_and_encode(&batch)?;
        let shared = &self.inner.shared;
        let mut catalog = shared.catalog.lock();
        let before = catalog.packs();
        let pack_id = catalog.header().next_table_id;
        let offsets = match files.is_empty() {
            true => Vec::new(),
            false => {
                pack::write(&shared.dir, pack_id, &files).map_err(|source| StoreError::Io {
                    op: "writing a pack of sealed filters",
                    source,
                })?
            }
        };
        let created = now_unix_s();
        let records: Vec<SealedMeta> = batch
            .puts
            .iter()
            .zip(offsets.iter().zip(&files))
            .map(|(p, (&offset, file))| sealed_meta(p, pack_id, offset, file.len(), created))
            .collect();
        let committed = shared.commit_catalog(&mut catalog, |e| {
            if !records.is_empty() {
                let mut h = e.header();
                h.next_table_id = h.next_table_id.max(pack_id + 1);
                e.set_header(h);
            }
            for r in &records {
                e.put_sealed(r.clone());
            }
            for name in &batch.removes {
                e.remove_sealed(name);
            }
        });
        match committed {
            Err(e) if !e.is_outcome_unknown() => {
                if !files.is_empty() {
                    let _ = std::fs::remove_file(pack::pack_path(&shared.dir, pack_id));
                }
                Err(e)
            }
            Err(e) => Err(e),
            Ok(()) => {
                remove_unnamed_packs(&shared.dir, &before, &catalog.packs());
                drop(catalog);
                Ok(sealed_filters(batch.puts, records, held))
            }
        }
    }

    /// The sealed filters whose names start with `prefix` (all of them for
    /// `""`), sorted by name. A damaged record is an error in its place
    /// (the rest are still listed); it can be replaced or removed.
    pub fn list_sealed(&self, prefix: &str) -> Result<Vec<SealedInfo>, StoreError> {
        self.list_sealed_each(prefix).into_iter().collect()
    }

    /// [`FilterStore::list_sealed`], with each damaged record's error in
    /// place of its info instead of failing the whole list.
    pub fn list_sealed_each(&self, prefix: &str) -> Vec<Result<SealedInfo, StoreError>> {
        let catalog = self.inner.shared.catalog.lock();
        catalog
            .sealed_with_prefix(prefix)
            .map(|(_, r)| {
                r.and_then(|m| {
                    Ok(SealedInfo {
                        params: m.params()?,
                        meta: m.clone(),
                    })
                })
            })
            .collect()
    }

    /// Loads the filters `infos` describe (from [`FilterStore::list_sealed`])
    /// into memory, each under the memory budget, reading each pack file
    /// once per call. Each answer is the filter, or why it could not be
    /// loaded: over the budget, its pack gone (a filter removed or replaced
    /// since it was listed), or its bytes damaged. A filter that could not
    /// be loaded must be taken as "maybe" for every key.
    pub fn load_sealed(&self, infos: &[SealedInfo]) -> Vec<Result<SealedFilter, StoreError>> {
        let dir = &self.inner.shared.dir;
        let mut packs: BTreeMap<u64, Result<Pack, String>> = BTreeMap::new();
        infos
            .iter()
            .map(|info| {
                let pack = packs
                    .entry(info.meta.pack)
                    .or_insert_with(|| Pack::open(dir, info.meta.pack).map_err(|e| e.to_string()));
                load_one(pack.as_ref(), info)
            })
            .collect()
    }
}

/// The catalog record of `p`, written at `offset` of pack `pack`.
/// A sealed batch's filters encoded as files, with the memory budget's
/// reservations.
struct Encoded {
    /// One per filter: what it holds while loaded, kept by the
    /// [`SealedFilter`]s the commit returns.
    held: Vec<Reservation>,
    /// The encoded filters, in the batch's order.
    files: Vec<Vec<u8>>,
    /// The encoded bytes', kept by the caller until they are written.
    bytes: Reservation,
}

/// [`Encoded`] of `batch`: an error, with nothing reserved, where the
/// budget refuses.
fn reserve_and_encode(batch: &SealedBatch) -> Result<Encoded, StoreError> {
    let held = batch
        .puts
        .iter()
        .map(|p| {
            budget::reserve(
                || format!("sealed filter {:?}", p.name),
                p.filter.params().bit_bytes(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let files: Vec<Vec<u8>> = batch
        .puts
        .iter()
        .map(|p| encode_bit_filter(&p.filter, p.keys))
        .collect();
    let bytes = budget::reserve(
        || "the encoded filters of a sealed batch".to_string(),
        files.iter().map(|f| f.len() as u64).sum(),
    )?;
    Ok(Encoded { held, files, bytes })
}

fn sealed_meta(p: &NewSealed, pack: u64, offset: u64, len: usize, created: u64) -> SealedMeta {
    let params = p.filter.params();
    SealedMeta {
        name: p.name.clone(),
        layout: params.layout().id(),
        m: params.m(),
        k: params.k(),
        hash_algo: params.hash().algo.id(),
        seed: params.hash().seed,
        keys: p.keys,
        target_fp: p.target_fp,
        pack,
        offset,
        len: len as u64,
        created_unix_s: created,
        tag: p.tag.clone(),
    }
}

/// The put filters of a committed batch, their bits moved in.
fn sealed_filters(
    puts: Vec<NewSealed>,
    records: Vec<SealedMeta>,
    held: Vec<Reservation>,
) -> Vec<SealedFilter> {
    puts.into_iter()
        .zip(records)
        .zip(held)
        .map(|((p, meta), memory)| SealedFilter {
            info: SealedInfo {
                params: *p.filter.params(),
                meta,
            },
            bits: p.filter,
            _memory: memory,
        })
        .collect()
}

/// Deletes the packs that `before` named and `after` does not (best
/// effort: a pack left behind is collected by the next writing open).
fn remove_unnamed_packs(
    dir: &std::path::Path,
    before: &BTreeMap<u64, u64>,
    after: &BTreeMap<u64, u64>,
) {
    for id in before.keys().filter(|id| !after.contains_key(id)) {
        let _ = std::fs::remove_file(pack::pack_path(dir, *id));
    }
}

/// Loads `info`'s filter from its open pack.
fn load_one(pack: Result<&Pack, &String>, info: &SealedInfo) -> Result<SealedFilter, StoreError> {
    let what = || format!("sealed filter {:?}", info.meta.name);
    let damaged = |reason: String| StoreError::SealedUnreadable {
        name: info.meta.name.clone(),
        reason,
    };
    let pack = pack.map_err(|e| damaged(format!("its pack cannot be read: {e}")))?;
    let memory = budget::reserve(what, info.bit_bytes())?;
    let scratch = budget::reserve(what, info.meta.len)?;
    let bytes = pack
        .read(info.meta.offset, info.meta.len)
        .map_err(|e| damaged(format!("its bytes cannot be read: {e}")))?;
    let decoded = decode_filter(&bytes).map_err(|e| damaged(e.to_string()))?;
    let FilterBody::Bits(view) = decoded.body else {
        return Err(damaged("its pack holds a counting filter".into()));
    };
    if view.params() != info.params() {
        return Err(damaged(
            "its pack holds a filter of other parameters than its record".into(),
        ));
    }
    let bits = view
        .to_owned_filter()
        .map_err(|e| damaged(format!("cannot be copied: {e}")))?;
    drop((bytes, scratch));
    Ok(SealedFilter {
        info: info.clone(),
        bits,
        _memory: memory,
    })
}
