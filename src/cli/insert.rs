//! `filterstore insert`: keys from a file or standard input, durable when
//! the command succeeds. A large input is bulk-loaded
//! ([`Table::bulk_load`](filterstore::Table::bulk_load)): once it holds more
//! than [`KEYS_PER_PAGE`] keys per counter page of the table, reading and
//! rewriting the pages costs less than logging every key.

use super::failure::{Failure, Outcome};
use super::keys::{self, KeyReader};
use super::open::open_existing;
use super::output::Out;
use filterstore::{Durability, Table, WriteBatch};
use std::collections::VecDeque;
use std::path::Path;

/// Keys per 16 KiB counter page from which the input is bulk-loaded.
const KEYS_PER_PAGE: u64 = 4;

/// Bits per counter page (16 KiB of 4-bit counters).
const PAGE_BITS: u64 = 32_768;

pub(super) fn insert(dir: &Path, table: &str, file: Option<&Path>, out: &mut Out) -> Outcome {
    let store = open_existing(dir)?;
    let t = store.open_table(table)?;
    let mut reader = KeyReader::open(file)?;
    let threshold = usize::try_from(KEYS_PER_PAGE * t.params().m().div_ceil(PAGE_BITS))
        .unwrap_or(usize::MAX)
        .max(keys::BATCH_KEYS);
    let mut head: Vec<Vec<u8>> = Vec::new();
    while head.len() < threshold {
        // Nothing is applied before the head is read whole.
        let read = reader.next_batch(|k, _| head.push(k.to_vec()));
        if read.map_err(|e| Failure(format!("{e}; nothing was inserted")))? == 0 {
            break;
        }
    }
    let total = if head.len() >= threshold {
        bulk(&t, head, reader)?
    } else {
        let n = by_batches(&t, &head)?;
        reader.finish();
        n
    };
    out.line(&format!("inserted {total} keys into {table} (durable)"))
}

/// The whole input through the write path, then one flush.
fn by_batches(t: &Table, keys: &[Vec<u8>]) -> Result<u64, Failure> {
    let mut batch = WriteBatch::with_capacity(keys::BATCH_KEYS, keys::BATCH_KEYS * 32);
    for part in keys.chunks(keys::BATCH_KEYS) {
        batch.clear();
        for k in part {
            batch.insert(k);
        }
        t.apply(&batch, Durability::Buffered)?;
    }
    t.flush()?;
    Ok(keys.len() as u64)
}

/// `head` and the rest of the input in one bulk load.
fn bulk(t: &Table, head: Vec<Vec<u8>>, reader: KeyReader) -> Result<u64, Failure> {
    let mut rest = Rest {
        reader,
        buf: VecDeque::new(),
        error: None,
    };
    let total = t.bulk_load(head.into_iter().chain(&mut rest))?;
    rest.reader.finish();
    match rest.error {
        None => Ok(total),
        Some(e) => Err(Failure(format!(
            "{e}; the {total} keys before it were inserted (durable)"
        ))),
    }
}

/// The keys left in a reader, one by one; a read error ends them.
struct Rest {
    reader: KeyReader,
    buf: VecDeque<Vec<u8>>,
    error: Option<String>,
}

impl Iterator for Rest {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if self.buf.is_empty() && self.error.is_none() {
            let Rest { reader, buf, .. } = self;
            if let Err(e) = reader.next_batch(|k, _| buf.push_back(k.to_vec())) {
                self.error = Some(e);
            }
        }
        self.buf.pop_front()
    }
}
