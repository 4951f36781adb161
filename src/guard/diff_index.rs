//! [`Part`]: one part of the differential file's in-memory index (the
//! active or the frozen one, `diff_log.rs`). It keeps the records of its
//! logs as they were appended, bytes for bytes (`docs/FORMAT.md` § 8b), and
//! maps each changed key to the place of its newest change in them. An
//! append then costs one allocation (its record, which the log's write
//! needed anyway) and one map insert per change, instead of a copy of every
//! key and value.
//!
//! The map's key is the 64-bit seeded hash of the changed key
//! ([`key_hash`]); a lookup compares the key stored at the place found, so
//! two keys of one hash (a chance of about 2⁻⁶⁴ per pair, and the seed is
//! drawn per index, so a host cannot choose them) are both kept, in a slot
//! of several places.

use super::storage::Change;
use crate::store::disk::catalog_log::RECORD_HEAD;
use std::collections::HashMap;

/// Bytes of an index entry beyond its record's bytes: the map's slot (hash
/// and place), its control byte, and the table's spare capacity.
pub(crate) const ENTRY_OVERHEAD: u64 = 48;

/// The hash of `key` under an index's `seed`: XXH3-64.
pub(crate) fn key_hash(seed: u64, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}

/// A change, borrowed from the record that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChangeRef<'a> {
    /// The key's new value.
    Put(&'a [u8]),
    /// The key was deleted.
    Delete,
}

impl ChangeRef<'_> {
    /// The change, copied out of its record.
    pub(crate) fn to_change(self) -> Change {
        match self {
            ChangeRef::Put(v) => Change::Put(v.to_vec()),
            ChangeRef::Delete => Change::Delete,
        }
    }
}

/// Where an op is: byte `at` of record `record` of the part.
#[derive(Clone, Copy, Debug)]
struct Loc {
    record: u32,
    at: u32,
}

/// The places of the changed keys of one hash: nearly always one.
#[derive(Debug)]
enum Slot {
    One(Loc),
    Many(Vec<Loc>),
}

/// The map's hashing: its keys are hashes already ([`key_hash`]).
#[derive(Clone, Copy, Default)]
struct Prehashed;

impl std::hash::BuildHasher for Prehashed {
    type Hasher = PrehashedHasher;
    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

/// Passes a `u64` through ([`Prehashed`]).
struct PrehashedHasher(u64);

impl std::hash::Hasher for PrehashedHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; folded in for completeness.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Decodes the op at byte `at` of `record`: its key and change. The
/// records are this process's own encoding (made by an append, or encoded
/// again from a log that recovery checked), so the bounds hold; a place
/// that does not is read as an empty key's delete rather than a panic.
fn op_at(record: &[u8], at: usize) -> (&[u8], ChangeRef<'_>) {
    let decoded = (|| {
        let head = record.get(at..at + 7)?;
        let klen = u16::from_le_bytes([head[1], head[2]]) as usize;
        let vlen = u32::from_le_bytes([head[3], head[4], head[5], head[6]]) as usize;
        let key = record.get(at + 7..at + 7 + klen)?;
        let change = if head[0] == PUT {
            ChangeRef::Put(record.get(at + 7 + klen..at + 7 + klen + vlen)?)
        } else {
            ChangeRef::Delete
        };
        Some((key, change))
    })();
    decoded.unwrap_or((&[], ChangeRef::Delete))
}

/// The tag of a put in a record's body (`docs/FORMAT.md` § 8b).
const PUT: u8 = 1;

/// The places of the ops of `record` (one whole record of a guard log:
/// head, op count, ops), in order.
fn op_places(record: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let count = record
        .get(RECORD_HEAD..RECORD_HEAD + 4)
        .map_or(0, |c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    let mut at = RECORD_HEAD + 4;
    (0..count).map_while(move |_| {
        let head = record.get(at..at + 7)?;
        let klen = u16::from_le_bytes([head[1], head[2]]) as usize;
        let vlen = u32::from_le_bytes([head[3], head[4], head[5], head[6]]) as usize;
        let here = at;
        at += 7 + klen + vlen;
        (at <= record.len()).then_some(here)
    })
}

/// One part of the index (module docs).
#[derive(Debug, Default)]
pub(crate) struct Part {
    records: Vec<Vec<u8>>,
    map: HashMap<u64, Slot, Prehashed>,
    /// Distinct keys (the map's entries, plus the extra keys of slots of
    /// several places).
    keys: usize,
}

impl Part {
    /// Takes `record` (a whole record of a guard log) in: each of its
    /// changes replaces the change of its key held so far.
    pub(crate) fn push(&mut self, seed: u64, record: Vec<u8>) {
        let index = self.records.len() as u32;
        for at in op_places(&record) {
            let (key, _) = op_at(&record, at);
            let loc = Loc {
                record: index,
                at: at as u32,
            };
            let hash = key_hash(seed, key);
            match self.map.entry(hash) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(Slot::One(loc));
                    self.keys += 1;
                }
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let records = &self.records;
                    let same = |l: &Loc| match records.get(l.record as usize) {
                        Some(r) => op_at(r, l.at as usize).0 == key,
                        // `loc`'s own record, not pushed yet.
                        None => op_at(&record, l.at as usize).0 == key,
                    };
                    let slot = e.get_mut();
                    match slot {
                        Slot::One(old) if same(old) => *old = loc,
                        Slot::One(old) => {
                            *slot = Slot::Many(vec![*old, loc]);
                            self.keys += 1;
                        }
                        Slot::Many(locs) => match locs.iter_mut().find(|l| same(l)) {
                            Some(old) => *old = loc,
                            None => {
                                locs.push(loc);
                                self.keys += 1;
                            }
                        },
                    }
                }
            }
        }
        self.records.push(record);
    }

    fn change_at(&self, loc: Loc) -> (&[u8], ChangeRef<'_>) {
        match self.records.get(loc.record as usize) {
            Some(r) => op_at(r, loc.at as usize),
            None => (&[], ChangeRef::Delete),
        }
    }

    /// The newest change of `key` (whose hash is `hash`), if it has one.
    pub(crate) fn get(&self, hash: u64, key: &[u8]) -> Option<ChangeRef<'_>> {
        let found = |loc: &Loc| {
            let (k, c) = self.change_at(*loc);
            (k == key).then_some(c)
        };
        match self.map.get(&hash)? {
            Slot::One(loc) => found(loc),
            Slot::Many(locs) => locs.iter().find_map(found),
        }
    }

    /// Whether `key` (hash `hash`) has a change here.
    pub(crate) fn contains(&self, hash: u64, key: &[u8]) -> bool {
        self.get(hash, key).is_some()
    }

    /// The newest change of every key, with its key's hash.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &[u8], ChangeRef<'_>)> {
        self.map.iter().flat_map(move |(&hash, slot)| {
            let locs: &[Loc] = match slot {
                Slot::One(loc) => std::slice::from_ref(loc),
                Slot::Many(locs) => locs,
            };
            locs.iter().map(move |&loc| {
                let (k, c) = self.change_at(loc);
                (hash, k, c)
            })
        })
    }

    /// Keys with a change here.
    pub(crate) fn len(&self) -> usize {
        self.keys
    }

    /// Whether no key has a change here.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::disk::catalog_log::encode_record_into;

    fn record(ops: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record_into(
            &mut out,
            0,
            ops.iter()
                .map(|(k, v)| (v.is_some(), *k, v.unwrap_or_default())),
        );
        out
    }

    #[test]
    fn newer_changes_replace_older_ones_and_keys_are_counted_once() {
        let mut part = Part::default();
        part.push(
            7,
            record(&[(b"a", Some(b"1")), (b"b", None), (b"a", Some(b"2"))]),
        );
        part.push(7, record(&[(b"b", Some(b"3")), (b"", Some(b""))]));
        assert_eq!(part.len(), 3);
        let get = |k: &[u8]| part.get(key_hash(7, k), k);
        assert_eq!(get(b"a"), Some(ChangeRef::Put(b"2")));
        assert_eq!(get(b"b"), Some(ChangeRef::Put(b"3")));
        assert_eq!(get(b""), Some(ChangeRef::Put(b"")));
        assert_eq!(get(b"c"), None);
        let mut all: Vec<_> = part.iter().map(|(_, k, c)| (k.to_vec(), c)).collect();
        all.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            all,
            vec![
                (b"".to_vec(), ChangeRef::Put(b"")),
                (b"a".to_vec(), ChangeRef::Put(b"2")),
                (b"b".to_vec(), ChangeRef::Put(b"3")),
            ]
        );
    }

    /// Keys whose hashes collide (forced here: a part pushed under one
    /// seed is looked up by the hash the map holds) are kept apart.
    #[test]
    fn keys_of_one_hash_are_kept_apart() {
        let mut part = Part::default();
        let h = key_hash(1, b"x");
        part.push(1, record(&[(b"x", Some(b"1"))]));
        // Move "x" to a slot of several places by hand: "y" under x's hash.
        let y = record(&[(b"y", None)]);
        part.records.push(y);
        if let Some(slot) = part.map.get_mut(&h) {
            let Slot::One(x) = *slot else { panic!() };
            *slot = Slot::Many(vec![
                x,
                Loc {
                    record: 1,
                    at: (RECORD_HEAD + 4) as u32,
                },
            ]);
            part.keys += 1;
        }
        assert_eq!(part.get(h, b"x"), Some(ChangeRef::Put(b"1")));
        assert_eq!(part.get(h, b"y"), Some(ChangeRef::Delete));
        assert_eq!(part.get(h, b"z"), None);
        // A push of either key replaces its own place only.
        part.push(1, record(&[(b"x", Some(b"2"))]));
        assert_eq!(part.get(h, b"x"), Some(ChangeRef::Put(b"2")));
        assert_eq!(part.get(h, b"y"), Some(ChangeRef::Delete));
        assert_eq!(part.len(), 2);
        assert_eq!(part.iter().count(), 2);
    }
}
