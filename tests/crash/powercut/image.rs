//! What a cut leaves of a file (page by page, see the parent module), and
//! writing an image as ordinary files.

use super::{Change, CutStats, Entries, PAGE, SECTOR};
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
/// Writes the tree under directory `ino` (entries from `dirs`, file bytes
/// from `contents`) under `to`.
pub(super) fn write_tree(
    dirs: &dyn Fn(u64) -> Option<Entries>,
    contents: &HashMap<u64, Vec<u8>>,
    ino: u64,
    to: &Path,
) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let Some(entries) = dirs(ino) else {
        return Ok(());
    };
    for (name, child) in entries {
        if let Some(bytes) = contents.get(&child) {
            std::fs::write(to.join(&name), bytes)?;
        } else if dirs(child).is_some() {
            write_tree(dirs, contents, child, &to.join(&name))?;
        }
    }
    Ok(())
}

/// A file as a cut sees it: its bytes on disk, the bytes the unsynced
/// changes were made on (the page cache at the last sync: the bytes on disk
/// unless a failed sync dropped pages), and those changes.
#[derive(Clone, Copy)]
pub(super) struct Unsynced<'a> {
    pub durable: &'a [u8],
    pub base: &'a [u8],
    pub pending: &'a [Change],
}

impl Unsynced<'_> {
    /// The size after each change.
    fn sizes(&self) -> Vec<u64> {
        let mut size = self.base.len() as u64;
        self.pending
            .iter()
            .map(|c| {
                size = match c {
                    Change::Write { at, data } => size.max(at + data.len() as u64),
                    Change::SetLen(n) => *n,
                };
                size
            })
            .collect()
    }

    /// The changes touching each page, in order (indices into `pending`).
    pub(super) fn by_page(&self) -> BTreeMap<u64, Vec<usize>> {
        let sizes = self.sizes();
        let mut by_page: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        let mut before = self.base.len() as u64;
        for (i, c) in self.pending.iter().enumerate() {
            let (from, to) = match c {
                Change::Write { at, data } => (*at, at + data.len() as u64),
                Change::SetLen(n) => ((*n).min(before), (*n).max(before)),
            };
            if to > from {
                for page in from / PAGE as u64..=(to - 1) / PAGE as u64 {
                    by_page.entry(page).or_default().push(i);
                }
            }
            before = sizes[i];
        }
        by_page
    }

    /// Page `page` after the first `n` of its `changes`: as on disk for
    /// `n = 0`, else the page cache's bytes with those changes made.
    fn page_state(&self, changes: &[usize], page: u64, n: usize) -> Vec<u8> {
        let start = page as usize * PAGE;
        let from = if n == 0 { self.durable } else { self.base };
        let mut bytes = vec![0u8; PAGE];
        if start < from.len() {
            let end = from.len().min(start + PAGE);
            bytes[..end - start].copy_from_slice(&from[start..end]);
        }
        for &i in &changes[..n] {
            match &self.pending[i] {
                Change::Write { at, data } => {
                    let (from, to) = (*at as usize, *at as usize + data.len());
                    let (lo, hi) = (from.max(start), to.min(start + PAGE));
                    if lo < hi {
                        bytes[lo - start..hi - start].copy_from_slice(&data[lo - from..hi - from]);
                    }
                }
                Change::SetLen(len) => {
                    let len = *len as usize;
                    if len < start + PAGE {
                        bytes[len.saturating_sub(start)..].fill(0);
                    }
                }
            }
        }
        bytes
    }
}

/// The bytes of a file after a cut (module docs): its bytes on disk with,
/// page by page, a random number of the unsynced changes made, the size
/// after a random one of them.
pub(super) fn cut_file(
    file: Unsynced,
    rng: &mut StdRng,
    tear: bool,
    stats: &mut CutStats,
) -> Vec<u8> {
    let (durable, pending) = (file.durable, file.pending);
    if pending.is_empty() {
        return durable.to_vec();
    }
    let sizes = file.sizes();
    let by_page = file.by_page();
    let size_pick = rng.gen_range(0..=pending.len());
    let final_size = if size_pick == 0 {
        durable.len()
    } else {
        sizes[size_pick - 1] as usize
    };
    let mut out = durable.to_vec();
    let span = by_page
        .keys()
        .next_back()
        .map_or(0, |p| (p + 1) as usize * PAGE);
    out.resize(out.len().max(span).max(final_size), 0);
    let last = pending.len() - 1;
    let torn_page = match &pending[last] {
        Change::Write { at, .. } if tear && rng.gen_bool(0.5) => Some(at / PAGE as u64),
        _ => None,
    };
    for (&page, changes) in &by_page {
        let v = rng.gen_range(0..=changes.len());
        let at = page as usize * PAGE;
        let state = |n: usize| file.page_state(changes, page, n);
        let bytes = if torn_page == Some(page) {
            // Each sector from the state before or after the last change.
            let (old, new) = (state(changes.len() - 1), state(changes.len()));
            stats.torn_pages += 1;
            let mut mixed = old;
            for s in 0..PAGE / SECTOR {
                if rng.gen_bool(0.5) {
                    mixed[s * SECTOR..(s + 1) * SECTOR]
                        .copy_from_slice(&new[s * SECTOR..(s + 1) * SECTOR]);
                }
            }
            mixed
        } else {
            if v > 0 {
                stats.unsynced_pages_kept += 1;
            } else {
                stats.unsynced_pages_lost += 1;
            }
            state(v)
        };
        out[at..at + PAGE].copy_from_slice(&bytes);
    }
    out.truncate(final_size);
    out
}

/// What a sync leaves on disk: `durable` with every page the unsynced
/// changes touched taken from `live` (the kernel writes whole dirty pages
/// from its cache) if `written(page)`, and the size `live`'s if `sized`.
/// A successful sync writes every page; a failed one (the EIO model) a
/// random part.
pub(super) fn synced(
    file: Unsynced,
    live: &[u8],
    mut written: impl FnMut(u64) -> bool,
    sized: bool,
) -> Vec<u8> {
    let mut out = file.durable.to_vec();
    let size = if sized { live.len() } else { out.len() };
    out.resize(out.len().max(live.len()), 0);
    for &page in file.by_page().keys() {
        let at = page as usize * PAGE;
        if at < live.len() && written(page) {
            let end = live.len().min(at + PAGE);
            out[at..end].copy_from_slice(&live[at..end]);
        }
    }
    out.truncate(size);
    out
}
