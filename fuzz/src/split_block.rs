//! Target `split_block_ops` (see `split_block_ops`): the split-block
//! layout's every insert and lookup path against a model of the Parquet
//! specification.

use arbitrary::Unstructured;
use filterstore::{encode_bit_filter, BitFilter, CountingFilter, FilterParams, FilterView};
use filterstore::{HashSpec, Layout, SPLIT_BLOCK_BITS, SPLIT_SALTS};

/// Target `split_block_ops`, structure-aware: a split-block filter of an
/// input-chosen block count takes input-chosen keys through every insert
/// path (`insert`, `insert_many`, `insert_many_mut`, the counting filter)
/// and answers every lookup path (`contains`, `contains_many`, a borrowed
/// view, a decoded file, the counting filter), each checked against a model
/// written from the Parquet specification's text: the same bitset bit for
/// bit, the same answer for every key, present and absent.
pub fn split_block_ops(data: &[u8]) {
    let _ = split_ops(&mut Unstructured::new(data));
}

/// The specification's SBBF: block `((h >> 32)·z) >> 32`, lane `i`'s bit
/// `(x · SALT[i]) >> 27` of the lower half `x`; `h` from the crate's
/// XXH64 (tested against the reference XXH64 in `tests/filter/golden_hash.rs`).
struct SbbfModel(Vec<[u32; 8]>);

impl SbbfModel {
    fn at(&self, key: &[u8]) -> (usize, [u32; 8]) {
        let h = HashSpec::xxh64().hash(key).h1;
        let b = (((h >> 32) * self.0.len() as u64) >> 32) as usize;
        let x = h as u32;
        (
            b,
            std::array::from_fn(|i| 1 << (x.wrapping_mul(SPLIT_SALTS[i]) >> 27)),
        )
    }
    fn insert(&mut self, key: &[u8]) {
        let (b, mask) = self.at(key);
        for (lane, m) in self.0[b].iter_mut().zip(mask) {
            *lane |= m;
        }
    }
    fn check(&self, key: &[u8]) -> bool {
        let (b, mask) = self.at(key);
        self.0[b].iter().zip(mask).all(|(l, m)| l & m != 0)
    }
    fn bytes(&self) -> Vec<u8> {
        self.0
            .iter()
            .flatten()
            .flat_map(|l| l.to_le_bytes())
            .collect()
    }
}

fn split_ops(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let z = u.int_in_range(1..=48u64)?;
    let p = FilterParams::new(
        Layout::SplitBlock,
        SPLIT_BLOCK_BITS * z,
        8,
        HashSpec::xxh64(),
    )
    .expect("valid by construction");
    let mut model = SbbfModel(vec![[0; 8]; z as usize]);
    let (shared, mut owned) = (
        BitFilter::new(p).expect("small"),
        BitFilter::new(p).expect("small"),
    );
    let mut counting = CountingFilter::new(p).expect("small");
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for _ in 0..u.int_in_range(0..=12u8)? {
        let batch: Vec<Vec<u8>> = (0..u.int_in_range(0..=16usize)?)
            .map(|_| {
                let len = u.int_in_range(0..=40usize)?;
                Ok(u.bytes(len)?.to_vec())
            })
            .collect::<arbitrary::Result<_>>()?;
        batch.iter().for_each(|k| model.insert(k));
        if u.arbitrary::<bool>()? {
            for k in &batch {
                shared.insert(k);
            }
        } else {
            shared.insert_many(&batch);
        }
        owned.insert_many_mut(&batch);
        for k in &batch {
            counting.insert(k);
        }
        keys.extend(batch);
    }
    let want = model.bytes();
    let bits = |f: &BitFilter| f.to_le_bytes()[..want.len()].to_vec();
    assert_eq!(bits(&shared), want, "shared inserts set other bits");
    assert_eq!(bits(&owned), want, "insert_many_mut set other bits");
    assert!(counting.to_bit_filter().expect("small").to_words() == owned.to_words());
    let raw = owned.to_le_bytes();
    let view = FilterView::new(p, &raw).expect("length of the parameters");
    let file = encode_bit_filter(&owned, keys.len() as u64);
    let decoded = filterstore::decode_filter(&file).expect("fresh split-block file refused");
    // Probe the inserted keys and as many input-chosen others.
    let mut probes = keys.clone();
    for i in 0..u.int_in_range(0..=32u8)? {
        let len = u.int_in_range(0..=40usize)?;
        let mut k = u.bytes(len)?.to_vec();
        k.push(i);
        probes.push(k);
    }
    let batch = owned.contains_many(&probes);
    for (key, &got) in probes.iter().zip(&batch) {
        let w = model.check(key);
        assert_eq!(shared.contains(key), w, "contains disagrees with the model");
        assert_eq!(got, w, "contains_many disagrees with the model");
        assert_eq!(view.contains(key), w, "a view disagrees with the model");
        assert_eq!(
            decoded.contains(key),
            w,
            "a decoded file disagrees with the model"
        );
        assert_eq!(
            counting.contains(key),
            w,
            "the counting filter disagrees with the model"
        );
    }
    Ok(())
}
