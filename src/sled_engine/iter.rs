//! Iterating a tree: records fetched a batch at a time on the caller's
//! thread, each batch under the tree's gate.

use super::{IVec, Tree};
use std::collections::VecDeque;

/// Records fetched per gate acquisition while iterating.
pub(super) const ITER_BATCH: usize = 64;

/// A sled iterator run on the caller's thread under the tree's gate,
/// [`ITER_BATCH`] records per acquisition (between two, writes may run:
/// each resumes after the last key returned).
pub(crate) struct Iter {
    tree: Tree,
    prefix: Option<Vec<u8>>,
    after: Option<IVec>,
    done: bool,
    buffered: VecDeque<(IVec, IVec)>,
}

impl Iter {
    /// The records of `tree` whose keys start with `prefix` (all of them
    /// for `None`), none fetched yet.
    pub(super) fn new(tree: Tree, prefix: Option<Vec<u8>>) -> Self {
        Iter {
            tree,
            prefix,
            after: None,
            done: false,
            buffered: VecDeque::new(),
        }
    }

    fn refill(&mut self) -> sled::Result<()> {
        let (prefix, after) = (self.prefix.clone(), self.after.clone());
        let batch = self.tree.read(move |t| {
            let start = match (&after, &prefix) {
                (Some(a), _) => std::ops::Bound::Excluded(a.clone()),
                (None, Some(p)) => std::ops::Bound::Included(IVec::from(p.as_slice())),
                (None, None) => std::ops::Bound::Unbounded,
            };
            let mut out = Vec::with_capacity(ITER_BATCH);
            for item in t.range::<IVec, _>((start, std::ops::Bound::Unbounded)) {
                let (k, v) = item?;
                if prefix.as_ref().is_some_and(|p| !k.starts_with(p)) {
                    break;
                }
                out.push((k, v));
                if out.len() == ITER_BATCH {
                    break;
                }
            }
            Ok(out)
        })?;
        if batch.len() < ITER_BATCH {
            self.done = true;
        }
        self.after = batch.last().map(|(k, _)| k.clone());
        self.buffered.extend(batch);
        Ok(())
    }
}

impl Iterator for Iter {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffered.is_empty() && !self.done {
            if let Err(e) = self.refill() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.buffered.pop_front().map(Ok)
    }
}
