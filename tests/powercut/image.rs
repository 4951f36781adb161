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

/// The bytes of a file after a cut (module docs): `durable` with, page by
/// page, a random number of the unsynced `pending` changes applied, the
/// size after a random one of them.
pub(super) fn cut_file(
    durable: &[u8],
    pending: &[Change],
    rng: &mut StdRng,
    tear: bool,
    stats: &mut CutStats,
) -> Vec<u8> {
    if pending.is_empty() {
        return durable.to_vec();
    }
    // The live size after each change.
    let mut sizes = Vec::with_capacity(pending.len());
    let mut size = durable.len() as u64;
    for c in pending {
        size = match c {
            Change::Write { at, data } => size.max(at + data.len() as u64),
            Change::SetLen(n) => *n,
        };
        sizes.push(size);
    }
    // The changes touching each page, in order.
    let mut by_page: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut before = durable.len() as u64;
    for (i, c) in pending.iter().enumerate() {
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
        let state = |n: usize| page_state(durable, pending, changes, page, n);
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

/// Page `page` after the first `n` of its `changes` (indices into
/// `pending`), starting from its synced bytes.
fn page_state(
    durable: &[u8],
    pending: &[Change],
    changes: &[usize],
    page: u64,
    n: usize,
) -> Vec<u8> {
    let start = page as usize * PAGE;
    let mut bytes = vec![0u8; PAGE];
    if start < durable.len() {
        let end = durable.len().min(start + PAGE);
        bytes[..end - start].copy_from_slice(&durable[start..end]);
    }
    for &i in &changes[..n] {
        match &pending[i] {
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
