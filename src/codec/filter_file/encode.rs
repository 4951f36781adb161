//! Writing filter files (FORMAT.md § 7).

use super::descriptor::{CounterWidth, DescriptorV1, DESCRIPTOR_LEN};
use crate::codec::frame;
use crate::filter::bloom::{BitFilter, BloomRead};
use crate::filter::counting::CountingFilter;

/// Encodes a bit filter as an exported file; `n` is the writer's key count.
pub fn encode_bit_filter(f: &BitFilter, n: u64) -> Vec<u8> {
    let params = *f.params();
    let d = DescriptorV1::raw(params, n, CounterWidth::Bit);
    encode_file(&d, |out| {
        for i in 0..params.num_words() {
            out.extend_from_slice(&f.word(i).to_le_bytes());
        }
    })
}

/// Encodes a counting filter as an exported file; `n` is the number of live keys.
pub fn encode_counting_filter(f: &CountingFilter, n: u64) -> Vec<u8> {
    let d = DescriptorV1::raw(*f.params(), n, CounterWidth::Four);
    encode_file(&d, |out| out.extend_from_slice(f.as_bytes()))
}

fn encode_file(d: &DescriptorV1, write_payload: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    // The payload length is bounded by 2^40 / 2 bytes: it fits in `usize` on the
    // 64-bit targets the crate supports.
    let body_len = DESCRIPTOR_LEN + d.payload_len as usize;
    frame::encode_with(d.counter_width.file_kind(), 0, body_len, |out| {
        out.extend_from_slice(&d.to_bytes());
        write_payload(out);
    })
}
