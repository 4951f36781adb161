//! What one flush of the engine logs, measured (module docs, "The bounds").

use super::gate::MAX_FLUSHED;
use super::*;

/// A seeded key of [`MAX_KEY`] bytes.
fn key(x: &mut u64) -> Vec<u8> {
    (0..MAX_KEY)
        .map(|_| {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *x as u8
        })
        .collect()
}

/// The guard's traffic with records at the limits (keys of [`MAX_KEY`]
/// bytes, values of [`MAX_VALUE`]): changes written 8 per call, merged 4 per
/// transaction into a second tree (inserts there, removes here: splits and
/// merges in both), then that tree emptied 8 per call. The most any one
/// flush made stable must stay under the 12 MiB the module docs allow a
/// flush interval (16 MiB segment less 4 MiB); the figure it prints is the
/// measured margin, against which the docs' worst-case count is open.
#[test]
fn one_flush_logs_far_less_than_a_segment_at_the_limits() {
    const RECORDS: usize = 6_000;
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().unwrap();
    let config = sled::Config::new()
        .segment_size(GUARD_SEGMENT)
        .cache_capacity(64 << 20);
    let db = Db::open(&dir.path().join("g"), config, Duration::from_secs(120)).unwrap();
    let (diff, base) = (db.open_tree("diff").unwrap(), db.open_tree("base").unwrap());
    MAX_FLUSHED.store(0, Ordering::Relaxed);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let keys: Vec<Vec<u8>> = (0..RECORDS).map(|_| key(&mut x)).collect();
    let value = vec![7u8; MAX_VALUE];
    for group in keys.chunks(MAX_CALL_ITEMS) {
        let mut batch = Batch::default();
        for k in group {
            batch.insert(k, value.clone());
        }
        diff.apply_batch(batch).unwrap();
    }
    for group in keys.chunks(MAX_CALL_ITEMS / 2) {
        let moved: Vec<IVec> = group.iter().map(|k| IVec::from(k.as_slice())).collect();
        let value = IVec::from(value.as_slice());
        let r = base
            .transaction2(&diff, moved.clone(), move |b, d| {
                for k in &moved {
                    b.insert(k, value.clone())?;
                    d.remove(k)?;
                }
                Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
            })
            .unwrap();
        r.unwrap();
    }
    assert!(diff.is_empty().unwrap());
    assert_eq!(base.len().unwrap(), RECORDS);
    for group in keys.chunks(MAX_CALL_ITEMS) {
        let mut batch = Batch::default();
        for k in group {
            batch.remove(k);
        }
        base.apply_batch(batch).unwrap();
    }
    assert!(base.is_empty().unwrap());
    let max = MAX_FLUSHED.load(Ordering::Relaxed);
    println!("the largest flush of {RECORDS} records at the limits: {max} bytes");
    assert!(max > 0, "nothing was measured");
    assert!(
        max < GUARD_SEGMENT - (4 << 20),
        "one flush made {max} bytes stable, over the 12 MiB of a flush interval"
    );
}
