//! [`GuardValue`]: a value as [`SledDiffStorage`](super::SledDiffStorage)
//! reads it, the engine's buffer or a copy of our own.

use crate::sled_engine as engine;

/// A value read through [`SledDiffStorage`](super::SledDiffStorage): a base record is the
/// engine's own buffer, shared, not copied (a read of a key without a
/// change allocates nothing for its value; one of up to 22 bytes is held
/// inline); a change read from the differential file is the one copy its
/// decoding makes. It derefs to its bytes, compares, orders and hashes as
/// them, and `Vec::from` gives them (moving the copy, or copying the
/// engine's buffer).
///
/// # Examples
/// ```
/// use filterstore::{DiffStorage, FilterStore, GuardValue, SledDiffStorage};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let store = FilterStore::open(dir.path())?;
/// let storage = SledDiffStorage::open(&store, "accounts")?;
/// storage.load_base([(b"alice", b"10")])?;
/// let v: GuardValue = storage.read_base(b"alice")?.expect("loaded");
/// assert_eq!(v, b"10");
/// assert_eq!(v.len(), 2);
/// assert_eq!(Vec::from(v), b"10".to_vec());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct GuardValue(pub(super) Repr);

/// Where a [`GuardValue`]'s bytes are.
#[derive(Clone)]
pub(super) enum Repr {
    /// The engine's buffer (a base record).
    Engine(engine::IVec),
    /// A copy of our own (a change, decoded).
    Owned(Vec<u8>),
}

impl std::ops::Deref for GuardValue {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Engine(v) => v,
            Repr::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for GuardValue {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::borrow::Borrow<[u8]> for GuardValue {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl From<Vec<u8>> for GuardValue {
    /// Takes `v` as it is (no copy).
    fn from(v: Vec<u8>) -> Self {
        GuardValue(Repr::Owned(v))
    }
}

impl From<&[u8]> for GuardValue {
    fn from(v: &[u8]) -> Self {
        GuardValue(Repr::Owned(v.to_vec()))
    }
}

impl From<GuardValue> for Vec<u8> {
    fn from(v: GuardValue) -> Self {
        match v.0 {
            Repr::Engine(v) => v.to_vec(),
            Repr::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for GuardValue {
    /// As a byte string, like `b"..."`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"{}\"", self.escape_ascii())
    }
}

impl PartialEq for GuardValue {
    fn eq(&self, other: &GuardValue) -> bool {
        **self == **other
    }
}

impl Eq for GuardValue {}

impl PartialOrd for GuardValue {
    fn partial_cmp(&self, other: &GuardValue) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GuardValue {
    fn cmp(&self, other: &GuardValue) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::hash::Hash for GuardValue {
    /// As its bytes (`Borrow<[u8]>`).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl PartialEq<[u8]> for GuardValue {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for GuardValue {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl PartialEq<Vec<u8>> for GuardValue {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for GuardValue {
    fn eq(&self, other: &[u8; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for GuardValue {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

#[cfg(test)]
mod tests {
    use super::{engine, GuardValue, Repr};
    use std::collections::{BTreeSet, HashSet};

    #[test]
    fn a_guard_value_behaves_as_its_bytes() {
        // The engine's buffers (inline up to 22 bytes in sled, shared above)
        // and copies of our own alike, and the two compared with each other.
        for bytes in [&b""[..], b"a\x00\xff\"", &[7u8; 100][..]] {
            let engine = GuardValue(Repr::Engine(engine::IVec::from(bytes)));
            let owned = GuardValue::from(bytes.to_vec());
            assert_eq!(engine, owned);
            assert_eq!(engine.cmp(&owned), std::cmp::Ordering::Equal);
            for v in [engine, owned] {
                assert_eq!(&*v, bytes);
                assert_eq!(v, *bytes);
                assert_eq!(v, bytes);
                assert_eq!(v, bytes.to_vec());
                assert_eq!(v.as_ref(), bytes);
                assert_eq!(GuardValue::from(bytes), v);
                assert_eq!(Vec::from(v.clone()), bytes.to_vec());
                // `Borrow<[u8]>`: hashed and ordered as the bytes, so sets
                // of values are looked up by byte strings.
                let hashed: HashSet<GuardValue> = [v.clone()].into();
                assert!(hashed.contains(bytes));
                let ordered: BTreeSet<GuardValue> = [v.clone()].into();
                assert!(ordered.contains(bytes));
            }
        }
        let (ab, b) = (GuardValue::from(&b"ab"[..]), GuardValue::from(&b"b"[..]));
        assert!(ab < b, "ordered as byte strings, not by length");
        assert_ne!(GuardValue::from(&b"ab"[..]), b"abc");
        assert_eq!(
            format!("{:?}", GuardValue::from(&b"a\x00\"z"[..])),
            r#"b"a\x00\"z""#
        );
    }
}
