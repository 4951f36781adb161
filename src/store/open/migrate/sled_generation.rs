//! Reading a table generation of store formats 1 and 2, which kept
//! everything in sled: the counter chunks, the log records and the state
//! record of each generation in the generation's own tree
//! (`docs/FORMAT.md` §11, "Stores of formats 1 and 2"). Only the
//! migration to format 3 reads them ([`from_sled`](super::from_sled)).

use crate::codec::frame::{self, Kind};
use crate::codec::meta;
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::counting::{nibble, COUNTER_BLOCK_BYTES};
use crate::filter::hash::KeyHash;
use crate::filter::params::FilterParams;
use crate::sled_engine as engine;
use crate::store::disk::chunks::{blocks_in_chunk, chunk_count, CHUNK_COUNTERS};
use crate::store::error::StoreError;
use serde::{Deserialize, Serialize};

/// Key of the generation's state record.
const STATE_KEY: &[u8] = &[0];
/// Prefix byte of counter chunk keys.
const CHUNK_PREFIX: u8 = 1;
/// Prefix byte of log record keys.
const LOG_PREFIX: u8 = 2;
/// `folded_below` of a state whose fold finished its chunks.
const FOLDED_ALL: u64 = u64::MAX;

/// The number of a key `prefix ‖ n (u64 BE)`.
fn number_of(key: &[u8], prefix: u8, field: &'static str) -> Result<u64, CodecError> {
    match key {
        [p, rest @ ..] if *p == prefix && rest.len() == 8 => {
            let mut a = [0u8; 8];
            a.copy_from_slice(rest);
            Ok(u64::from_be_bytes(a))
        }
        _ => Err(CodecError::InvalidField {
            field,
            reason: format!("{} bytes, expected 9 starting with {prefix}", key.len()),
        }),
    }
}

/// The state record: format 1's shape (settled) or format 2's (a fold under
/// way, or cut short by a crash: log records numbered below
/// `folded_through` are in every chunk below `folded_below`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    live_keys: i64,
    folded_through: u64,
    folded_below: u64,
}

#[derive(Serialize, Deserialize)]
struct SettledRecord {
    live_keys: i64,
    next_seq: u64,
}

#[derive(Serialize, Deserialize)]
struct FoldingRecord {
    live_keys: i64,
    next_seq: u64,
    folded_through: u64,
    folded_below: u64,
}

fn read_state(tree: &engine::Tree, table: &str) -> Result<State, StoreError> {
    let Some(v) = tree
        .get(STATE_KEY)
        .map_err(|e| StoreError::sled("reading table state", e))?
    else {
        return Ok(State {
            live_keys: 0,
            folded_through: 0,
            folded_below: FOLDED_ALL,
        });
    };
    if let Ok((s, _)) = meta::decode::<SettledRecord>(&v, Kind::TableState) {
        return Ok(State {
            live_keys: s.live_keys,
            folded_through: 0,
            folded_below: FOLDED_ALL,
        });
    }
    let (s, _) = meta::decode::<FoldingRecord>(&v, Kind::TableState)
        .map_err(|e| StoreError::corrupt(format!("state record of table {table:?}"), e))?;
    Ok(State {
        live_keys: s.live_keys,
        folded_through: s.folded_through,
        folded_below: s.folded_below,
    })
}

/// The counters of a chunk record (format 1 and 2 body: index, block count,
/// reserved, counters).
fn decode_chunk<'a>(bytes: &'a [u8], idx: u64, p: &FilterParams) -> Result<&'a [u8], CodecError> {
    let body = frame::decode_kind(bytes, Kind::CounterPage)?.body;
    let mut r = ByteReader::new(body);
    let stored = r.u64()?;
    let blocks = u64::from(r.u32()?);
    r.reserved::<4>()?;
    if stored != idx {
        return Err(CodecError::InvalidField {
            field: "chunk index",
            reason: format!("{stored} stored under the key of chunk {idx}"),
        });
    }
    if idx >= chunk_count(p) || blocks != blocks_in_chunk(p, idx) {
        return Err(CodecError::InvalidField {
            field: "chunk block count",
            reason: format!(
                "chunk {idx} holds {blocks} blocks; the table has {}",
                p.num_blocks()
            ),
        });
    }
    let counters = r.take(blocks * COUNTER_BLOCK_BYTES as u64)?;
    r.finish()?;
    Ok(counters)
}

/// Calls `f` with each operation of a log record (format 1 and 2 body:
/// count, reserved, operations): `(insert, hash)`.
fn decode_record(bytes: &[u8], mut f: impl FnMut(bool, KeyHash)) -> Result<(), CodecError> {
    let body = frame::decode_kind(bytes, Kind::LogRecord)?.body;
    let mut r = ByteReader::new(body);
    let count = u64::from(r.u32()?);
    r.reserved::<4>()?;
    if 8 + count * 17 != body.len() as u64 {
        return Err(CodecError::InvalidField {
            field: "log op_count",
            reason: format!("{count} ops in a body of {} bytes", body.len()),
        });
    }
    crate::store::disk::log::decode_ops(&mut r, count as usize, |op| f(op.insert, op.hash))?;
    r.finish()
}

/// The absolute counters (`m/2` bytes, into `counters`, zeroed by the
/// caller) and live keys of the generation in `tree`: its chunks with every
/// log record applied in order, under the state's fold marks — a record
/// that a finished fold already holds is skipped; one that a fold cut short
/// holds in its first chunks is applied to the others only. The log is
/// applied operation by operation in log order, so sticky 15s come out as a
/// fold would have left them.
pub(crate) fn read_generation(
    tree: &engine::Tree,
    params: &FilterParams,
    table: &str,
    counters: &mut [u8],
) -> Result<i64, StoreError> {
    let corrupt = |what: String| move |e| StoreError::corrupt(what.clone(), e);
    let state = read_state(tree, table)?;
    let chunk_bytes = (CHUNK_COUNTERS / 2) as usize;
    for item in tree.scan_prefix([CHUNK_PREFIX]) {
        let (k, v) = item.map_err(|e| StoreError::sled("reading counter pages", e))?;
        let what = format!("counter page {:?} of table {table:?}", &k[..]);
        let idx = number_of(&k, CHUNK_PREFIX, "chunk key").map_err(corrupt(what.clone()))?;
        let c = decode_chunk(&v, idx, params).map_err(corrupt(what))?;
        let at = idx as usize * chunk_bytes;
        counters[at..at + c.len()].copy_from_slice(c);
    }
    let resuming = state.folded_below != FOLDED_ALL;
    let mut live = state.live_keys;
    for item in tree.scan_prefix([LOG_PREFIX]) {
        let (k, v) = item.map_err(|e| StoreError::sled("reading the log", e))?;
        let what = format!("log record {:?} of table {table:?}", &k[..]);
        let seq = number_of(&k, LOG_PREFIX, "log key").map_err(corrupt(what.clone()))?;
        let (stale, below) = match (seq < state.folded_through, resuming) {
            (true, false) => (true, 0),
            (true, true) => (false, state.folded_below),
            (false, _) => (false, 0),
        };
        if stale {
            continue;
        }
        decode_record(&v, |insert, hash| {
            live += if insert { 1 } else { -1 };
            for &q in params.positions(hash).as_slice() {
                if q / CHUNK_COUNTERS < below {
                    continue;
                }
                if insert {
                    nibble::inc(counters, q as usize);
                } else {
                    nibble::dec(counters, q as usize);
                }
            }
        })
        .map_err(corrupt(what))?;
    }
    Ok(live)
}
