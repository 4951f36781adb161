//! Bounds-checked little-endian reads, shared by every decoder.
//!
//! Decoders never index into untrusted bytes directly: they read through a
//! [`ByteReader`], whose every method checks the bytes remaining first and
//! returns [`CodecError::Truncated`] instead of panicking. A length read from
//! the input is passed to [`ByteReader::take`] as a `u64` and compared with the
//! bytes present *before* it is converted to `usize` or used to size anything,
//! so a hostile length can neither overflow nor allocate.

use crate::error::CodecError;

/// A cursor over borrowed bytes with bounds-checked little-endian reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ByteReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader positioned at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        ByteReader { bytes, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `len` bytes, borrowed. `len` comes straight from the input and
    /// is checked against the bytes remaining before anything else is done.
    pub(crate) fn take(&mut self, len: u64) -> Result<&'a [u8], CodecError> {
        let remaining = self.remaining() as u64;
        if len > remaining {
            return Err(CodecError::Truncated {
                needed: (self.pos as u64).saturating_add(len),
                found: self.bytes.len() as u64,
            });
        }
        // `len <= remaining <= usize::MAX`, so the conversion is exact.
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    /// One byte.
    pub(crate) fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian `u16`.
    pub(crate) fn u16(&mut self) -> Result<u16, CodecError> {
        self.array().map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32, CodecError> {
        self.array().map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    pub(crate) fn u64(&mut self) -> Result<u64, CodecError> {
        self.array().map(u64::from_le_bytes)
    }

    /// Reads `N` reserved bytes and refuses them unless all are zero.
    pub(crate) fn reserved<const N: usize>(&mut self) -> Result<(), CodecError> {
        if self.array::<N>()? != [0u8; N] {
            return Err(CodecError::ReservedNotZero);
        }
        Ok(())
    }

    /// Succeeds only if every byte was consumed.
    pub(crate) fn finish(self) -> Result<(), CodecError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(CodecError::TrailingBytes {
                extra: extra as u64,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_refuses_overruns() {
        let bytes = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
        let mut r = ByteReader::new(&bytes);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 0x0302);
        assert_eq!(r.u32().unwrap(), 0x0706_0504);
        assert_eq!(r.position(), 7);
        assert_eq!(
            r.u64(),
            Err(CodecError::Truncated {
                needed: 15, // 7 consumed + 8 wanted
                found: 14
            })
        );
        assert_eq!(r.position(), 7, "a failed read consumes nothing");
        assert_eq!(r.take(7).unwrap(), &bytes[7..]);
        assert!(r.finish().is_ok());
    }

    #[test]
    fn hostile_lengths_are_refused_without_overflow() {
        let bytes = [0u8; 4];
        let mut r = ByteReader::new(&bytes);
        r.u8().unwrap();
        assert_eq!(
            r.take(u64::MAX),
            Err(CodecError::Truncated {
                needed: u64::MAX,
                found: 4
            })
        );
        assert_eq!(r.remaining(), 3);
    }

    #[test]
    fn reserved_and_trailing_bytes_are_typed_errors() {
        let mut r = ByteReader::new(&[0, 0, 1, 9]);
        assert!(r.reserved::<2>().is_ok());
        assert_eq!(r.reserved::<1>(), Err(CodecError::ReservedNotZero));
        assert_eq!(r.finish(), Err(CodecError::TrailingBytes { extra: 1 }));
    }
}
